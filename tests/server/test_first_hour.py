"""What a new user meets in the first hour, through the real CLI and the real server: one name
for the server's address, and a message saying where it looked when nothing answers there; an
address without a port goes to memoryd's port, not 443; bad paths, a stopped server and a wrong
token end every command with one line and a non-zero exit, never a traceback."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memoryd.cli import data_commands, data_runs
from memoryd.cli.remote import with_port
from memoryd.log_events import Event
from memoryd.testing.server_process import ServerProcess

TOKEN = "first-hour-admin-token-0123456789"
TOKENS = f"""
[[memoryd.auth.tokens]]
token = "{TOKEN}"
role = "admin"
agents = ["*"]
"""


def memoryd(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    return subprocess.run(
        [sys.executable, "-m", "memoryd", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**clean, **(env or {})},
    )


def free_address() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


def one_line_failure(result: subprocess.CompletedProcess[str]) -> str:
    """The single error line of a failed command (asserting that is all it printed)."""
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_a_server_that_is_not_there_is_named_with_where_the_address_came_from() -> None:
    nowhere = free_address()
    line = one_line_failure(memoryd("memory", "list", "--address", nowhere))
    assert f"cannot reach memoryd at {nowhere} (from --address)" in line
    assert "--address HOST:PORT" in line
    assert "MEMORYD_ADDRESS" in line
    line = one_line_failure(memoryd("search", "hello", env={"MEMORYD_ADDRESS": nowhere}))
    assert f"cannot reach memoryd at {nowhere} (from $MEMORYD_ADDRESS)" in line


def test_the_cli_and_the_walkthrough_read_the_same_address(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    server = start_server(tmp_path / "home").start()
    listed = memoryd("memory", "list", env={"MEMORYD_ADDRESS": server.address})
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout == "no memory rows match\n"  # not an empty screen
    # Without a model, one line at start-up says what works and the one command to connect one.
    server.wait_for_event(Event.NO_PROVIDER)  # logged right after `serving`
    (said,) = server.events(Event.NO_PROVIDER)
    assert "messages, search and the memory rows you store work" in said["msg"]
    assert "memoryd setup --base-url http://127.0.0.1:11434/v1" in said["msg"]
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert "$MEMORYD_ADDRESS" in readme
    assert '"$MEMORYD"' not in readme  # the walkthrough's old name, which the CLI never read


@pytest.mark.parametrize(
    ("given", "target"),
    [
        ("localhost", "localhost:50051"),
        ("127.0.0.1", "127.0.0.1:50051"),
        ("[::1]", "[::1]:50051"),
        ("localhost:7000", "localhost:7000"),
        ("[::1]:7000", "[::1]:7000"),
        ("unix:/run/memoryd.sock", "unix:/run/memoryd.sock"),
    ],
)
def test_an_address_without_a_port_gets_memoryds_port(given: str, target: str) -> None:
    assert with_port(given) == target


def test_a_host_without_a_port_is_reported_on_memoryds_port() -> None:
    line = one_line_failure(memoryd("memory", "list", "--address", "127.0.0.2"))
    # Nothing listens on 127.0.0.2; the CLI tried 50051 there, not gRPC's 443.
    assert "cannot reach memoryd at 127.0.0.2:50051" in line


def test_bad_paths_end_every_file_command_with_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    folder = tmp_path / "a-folder"
    folder.mkdir()
    nowhere = free_address()
    home = ["--home", str(tmp_path / "no-home")]
    empty = tmp_path / "empty-home"
    empty.mkdir(mode=0o700)
    cases = {
        "import of a missing file": ["import", str(missing / "export.jsonl")],
        "import of a folder": ["import", str(folder)],
        "export into a missing folder": ["export", str(missing / "out.jsonl")],
        "backup into a missing folder": ["backup", str(missing / "copy.db"), *home],
        "backup of a missing home": ["backup", str(tmp_path / "copy.db"), *home],
        "backup of a home with no database": [
            "backup",
            str(tmp_path / "copy.db"),
            "--home",
            str(empty),
        ],
        "check of a home with no database": ["check", "--home", str(empty)],
        "restore of a missing file": ["restore", str(missing / "copy.db"), *home],
        "restore of a folder": ["restore", str(folder), *home],
        "check of a missing home": ["check", *home],
        "discard-replaced in a missing home": ["discard-replaced", *home],
        "log-name in a missing home": ["log-name", "ada", *home],
        "config show of a missing file": ["config", "show", "--config", str(missing / "c.toml")],
    }
    for name, args in cases.items():
        result = memoryd(*args, "--address", nowhere) if args[0] in ("import", "export") else None
        result = result or memoryd(*args)
        line = one_line_failure(result)
        assert line.startswith("memoryd"), (name, line)


def test_a_stopped_server_and_a_wrong_token_end_every_remote_command_with_one_line(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    commands = [
        ["memory", "list"],
        ["memory", "show", "1"],
        ["memory", "review", "--now"],
        ["compact", "--conversation", "telegram:1"],
        ["context", "--conversation", "telegram:1"],
        ["resource", "list"],
        ["search", "hello"],
        ["embeddings"],
        ["reindex"],
        ["export", "-"],
        ["purge-owner", "main", "ada", "--yes"],
    ]
    nowhere = free_address()
    for args in commands:
        line = one_line_failure(memoryd(*args, "--address", nowhere))
        assert "UNAVAILABLE" in line, (args, line)
        assert nowhere in line, (args, line)
    server = start_server(tmp_path / "home", config=TOKENS).start()
    for args in commands:
        result = memoryd(
            *args, "--address", server.address, env={"MEMORYD_TOKEN": "not-the-token-at-all"}
        )
        line = one_line_failure(result)
        assert "UNAUTHENTICATED" in line, (args, line)


def test_every_data_command_the_command_line_sends_on_has_what_it_runs() -> None:
    assert {*data_runs.RUNS, "check"} == data_commands.COMMANDS


@pytest.mark.parametrize("listen", ["nowhere", "127.0.0.1:70000", "127.0.0.1:\u00b9"])
def test_a_bad_mcp_listen_address_ends_with_one_line(listen: str) -> None:
    """ "¹" is a digit to str.isdigit() and not to int(): it ended in a traceback."""
    line = one_line_failure(memoryd("mcp", "--listen", listen, "--address", free_address()))
    assert line == f"memoryd mcp: --listen must be HOST:PORT, got {listen!r}"


def test_review_help_says_unset_flags_review_every_agent() -> None:
    shown = memoryd("memory", "review", "--help")
    assert shown.returncode == 0
    text = " ".join(shown.stdout.split())
    assert "the agent (default: every agent)" in text
    assert "the owner (default: every owner)" in text
    listed = " ".join(memoryd("memory", "list", "--help").stdout.split())
    assert "the agent (default: main)" in listed


def test_text_logs_keep_the_milliseconds_of_rpc_lines(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    address = free_address()
    server = start_server(
        tmp_path / "home", config='[memoryd.server]\nlog_format = "text"\n', listen=address
    )
    deadline = time.monotonic() + 30
    while not any(f"serving on {address}" in line for line in server.lines):
        assert time.monotonic() < deadline, server.output  # text lines: no JSON event to await
        time.sleep(0.05)
    assert memoryd("memory", "list", "--address", address).returncode == 0
    server.stop()
    rpc_lines = [line for line in server.lines if " memoryd.rpc: " in line]
    assert rpc_lines, server.output
    stamp = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO memoryd\.rpc: ")
    assert all(stamp.match(line) for line in rpc_lines), rpc_lines
    others = [line for line in server.lines if " memoryd.server: " in line]
    assert others, server.output
    assert all(re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ", line) for line in others)


def test_memoryd_health_says_whether_the_server_serves_for_probes(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    nowhere = memoryd("health", "--address", free_address(), "--timeout", "1")
    assert (nowhere.returncode, nowhere.stdout) == (1, "UNAVAILABLE\n"), nowhere.stderr
    # Health is open: a probe carries no token, whatever the server requires.
    server = start_server(tmp_path / "home", config=TOKENS).start()
    serving = memoryd("health", "--address", server.address)
    assert (serving.returncode, serving.stdout) == (0, "SERVING\n"), serving.stderr
    unknown = memoryd("health", "--address", server.address, "--service", "no.such.Service")
    assert (unknown.returncode, unknown.stdout) == (1, "NOT_FOUND\n"), unknown.stderr
    refused = memoryd("health", "--address", server.address, "--timeout", "0")
    assert refused.returncode == 2
    assert refused.stdout == "--timeout must be above 0, got 0.0\n"
    assert server.stop() == 0, server.output
    stopped = memoryd("health", "--address", server.address, "--timeout", "1")
    assert (stopped.returncode, stopped.stdout) == (1, "UNAVAILABLE\n")
