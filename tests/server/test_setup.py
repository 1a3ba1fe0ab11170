"""`memoryd setup` (flags and a terminal's answers) and `memoryd config show`, as users run them."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import select
import subprocess
import sys
import time
import tomllib
from argparse import Namespace
from io import StringIO
from pathlib import Path

from memoryd.cli.setup_commands import run_setup
from memoryd.testing.fake_model import FakeModel
from tests.helpers import Ran, run_memoryd


def memoryd(*args: str, home: Path, stdin: str = "", env: dict[str, str] | None = None) -> Ran:
    """`memoryd ARGS --home HOME` in this process, without the caller's MEMORYD_ variables."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    environment.update(env or {})
    return run_memoryd(*args, "--home", str(home), env=environment, stdin=stdin)


def test_setup_with_flags_checks_the_endpoint_and_writes_the_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[memoryd.server]\nlisten = "127.0.0.1:6000"\n\n'
        '[[memoryd.providers]]\nname = "main"\nbase_url = "http://127.0.0.1:8/v1"\n'
        'model = "old"\n\n'
        '[[memoryd.providers]]\nname = "backup"\nbase_url = "http://127.0.0.1:9/v1"\n'
        'model = "small"\n',
        encoding="utf-8",
    )
    with FakeModel() as model:
        model.reply("OK")
        result = memoryd(
            "setup",
            "--yes",
            "--base-url",
            model.base_url,
            "--model",
            "llama3.1",
            "--api-key-env",
            "LOCAL_KEY",
            "--review-interval-hours",
            "12",
            home=home,
        )
    assert result.returncode == 0, result.stderr
    assert f"{model.base_url} answered with model llama3.1" in result.stdout
    assert "note: $LOCAL_KEY is not set in this shell" in result.stdout
    written = tomllib.loads((home / "config.toml").read_text(encoding="utf-8"))
    assert written["memoryd"]["server"] == {"listen": "127.0.0.1:6000"}  # kept
    assert written["memoryd"]["memory"] == {"review_interval_hours": 12}
    assert written["memoryd"]["search"] == {"embeddings": "embedded"}  # the default
    # The primary is replaced (it keeps its name); the fallback stays.
    assert [p["name"] for p in written["memoryd"]["providers"]] == ["main", "backup"]
    assert written["memoryd"]["providers"][0] == {
        "name": "main",
        "base_url": model.base_url,
        "model": "llama3.1",
        "api_key_env": "LOCAL_KEY",
    }
    assert model.requests[0]["model"] == "llama3.1"


def test_setup_refuses_an_endpoint_that_does_not_answer(tmp_path: Path) -> None:
    result = memoryd(
        "setup", "--yes", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", home=tmp_path / "h"
    )
    assert result.returncode == 1
    assert "did not answer: primary: cannot connect" in result.stderr
    assert not (tmp_path / "h" / "config.toml").exists()
    skipped = memoryd(
        "setup",
        "--yes",
        "--skip-check",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        home=tmp_path / "h",
    )
    assert skipped.returncode == 0
    assert (tmp_path / "h" / "config.toml").is_file()


def test_setup_asks_for_what_no_flag_gave(tmp_path: Path) -> None:
    with FakeModel() as model:
        answers = iter([model.base_url, "qwen", "", "0", "provider", "nomic-embed-text"])
        asked: list[str] = []

        def ask(question: str) -> str:
            asked.append(question)
            return next(answers)

        out = StringIO()
        args = Namespace(
            home=str(tmp_path / "home"),
            config=None,
            name=None,
            base_url=None,
            model=None,
            api_key_env=None,
            review_interval_hours=None,
            embeddings=None,
            embedding_model=None,
            skip_check=False,
            yes=False,
        )
        assert run_setup(args, {}, out, ask) == 0
    assert asked[0].startswith("Model endpoint (OpenAI-compatible base URL)")
    assert asked[3] == (
        "Review interval in hours, the longest a fact waits (0: turn and idle triggers only) [24]: "
    )
    assert asked[4].startswith("Semantic search: embedded (a small model on this machine)")
    assert asked[5] == "Embedding model of the endpoint []: "
    written = tomllib.loads((tmp_path / "home" / "config.toml").read_text(encoding="utf-8"))
    assert written["memoryd"]["memory"]["review_interval_hours"] == 0
    assert written["memoryd"]["providers"][0]["model"] == "qwen"
    assert "api_key_env" not in written["memoryd"]["providers"][0]
    assert written["memoryd"]["search"] == {
        "embeddings": "provider",
        "embedding_model": "nomic-embed-text",
    }


def test_config_show_masks_secrets(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[[memoryd.providers]]\nname = "cloud"\nbase_url = "https://user:hunter2@api.example/v1?api_key=qwzqwz&x=1"\n'
        'model = "big"\napi_key_env = "CLOUD_KEY"\n',
        encoding="utf-8",
    )
    shown = memoryd("config", "show", "--json", home=home, env={"CLOUD_KEY": "sk-very-secret"})
    assert shown.returncode == 0, shown.stderr
    # None of them is hex: a PostgreSQL database's name holds random hex digits.
    for secret in ("hunter2", "sk-very-secret", "qwzqwz"):
        assert secret not in shown.stdout
    document = json.loads(shown.stdout)["memoryd"]
    (provider,) = document["providers"]
    assert provider["api_key"] == "********"
    assert provider["base_url"] == "https://user:********@api.example/v1?api_key=********&x=1"
    assert document["memory"]["review_interval_hours"] == 24.0
    assert document["history"]["max_conversation_history"] == "unbounded"
    text = memoryd("config", "show", home=home)
    assert "[[memoryd.providers]]" in text.stdout
    assert 'api_key = "(not set)"' in text.stdout


def test_config_show_shows_every_section_and_where_each_value_came_from(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        "[memoryd.compaction]\nthreshold = 0.7\n\n[memoryd.realtime]\npersist_transcripts = true\n",
        encoding="utf-8",
    )
    env = {"MEMORYD_SERVER_LOG_LEVEL": "debug"}
    shown = memoryd("config", "show", "--json", home=home, env=env)
    assert shown.returncode == 0, shown.stderr
    answer = json.loads(shown.stdout)
    document, origins = answer["memoryd"], answer["origins"]
    for section in ("server", "storage", "history", "memory", "compaction", "realtime", "search"):
        assert section in document, section
    assert document["compaction"]["threshold"] == 0.7
    assert document["realtime"]["persist_transcripts"] is True
    assert origins["memoryd.compaction.threshold"] == "file"
    assert origins["memoryd.realtime.persist_transcripts"] == "file"
    assert origins["memoryd.server.log_level"] == "environment"
    assert origins["memoryd.history.max_content_bytes"] == "default"
    assert origins["memoryd.home"] == "flag"
    text = memoryd("config", "show", home=home, env=env).stdout
    assert "[memoryd.compaction]\n" in text
    assert "threshold = 0.7  # file\n" in text
    assert 'log_level = "debug"  # environment\n' in text


class Terminal:
    """`memoryd ARGS` on a pseudo-terminal: wait for what it shows, type answers."""

    def __init__(self, *args: str, home: Path) -> None:
        environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
        self._controller, terminal = pty.openpty()
        self._process = subprocess.Popen(
            [sys.executable, "-m", "memoryd", *args, "--home", str(home)],
            stdin=terminal,
            stdout=terminal,
            stderr=terminal,
            env=environment,
            close_fds=True,
        )
        os.close(terminal)
        self.shown = ""

    def expect(self, text: str, timeout: float = 30.0) -> None:
        """Read until `text` has been shown."""
        deadline = time.monotonic() + timeout
        while text not in self.shown:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._controller], [], [], left)[0]:
                raise AssertionError(f"{text!r} never shown; the terminal showed:\n{self.shown}")
            try:
                piece = os.read(self._controller, 65536)
            except OSError:  # the program ended
                piece = b""
            if not piece:
                raise AssertionError(f"{text!r} never shown; the terminal showed:\n{self.shown}")
            self.shown += piece.decode("utf-8", "replace")

    def type(self, answer: str) -> None:
        os.write(self._controller, answer.encode() + b"\r")

    def finish(self) -> int:
        """Wait for the exit status (what is left to show is read)."""
        code = self._process.wait(timeout=60)
        with contextlib.suppress(OSError):
            while piece := os.read(self._controller, 65536):
                self.shown += piece.decode("utf-8", "replace")
        os.close(self._controller)
        return code


COMMENTED = """\
# memoryd for the family bots: ask Ana before changing the port.
[memoryd.server]
listen = "127.0.0.1:6000"  # the bots use this one

# The model, on the desk machine.
[[memoryd.providers]]
name = "primary"
base_url = "http://127.0.0.1:9/v1"
model = "old"
context_window = 32000  # the card's limit
"""


def test_setup_on_a_terminal_asks_again_offers_to_write_and_keeps_comments(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    config = home / "config.toml"
    config.write_text(COMMENTED, encoding="utf-8")
    config.chmod(0o600)
    dead = "http://127.0.0.1:9/v1"
    terminal = Terminal("setup", home=home)
    terminal.expect("Model endpoint (OpenAI-compatible base URL) [http://127.0.0.1:9/v1]: ")
    terminal.type("127.0.0.1:11434")  # no scheme: asked again at once, nothing lost
    terminal.expect("the base URL must start with http:// or https://, got '127.0.0.1:11434'")
    terminal.expect("try again")
    terminal.type("")  # the file's endpoint
    terminal.expect("Model name [old]: ")
    terminal.type("qwen2.5")
    terminal.expect("Environment variable with the API key (empty: none) []: ")
    terminal.type("")
    terminal.expect("Review interval in hours")
    terminal.type("soon")
    terminal.expect("the review interval must be a number of hours, got 'soon'; try again")
    terminal.type("6")
    terminal.expect("Semantic search")
    terminal.type("")
    terminal.expect(f"memoryd: {dead} did not answer: primary: cannot connect")
    terminal.expect("Write the file anyway? [y/N]: ")
    terminal.type("y")
    assert terminal.finish() == 0, terminal.shown
    text = config.read_text(encoding="utf-8")
    for comment in (
        "# memoryd for the family bots: ask Ana before changing the port.",
        'listen = "127.0.0.1:6000"  # the bots use this one',
        "# The model, on the desk machine.",
        "context_window = 32000  # the card's limit",
    ):
        assert comment in text
    written = tomllib.loads(text)
    assert written["memoryd"]["providers"] == [
        {"name": "primary", "base_url": dead, "model": "qwen2.5", "context_window": 32000}
    ]
    assert written["memoryd"]["memory"] == {"review_interval_hours": 6}
    # Run again: the file is still the user's, comments and all.
    again = memoryd("setup", "--yes", "--skip-check", "--model", "qwen3", home=home)
    assert again.returncode == 0, again.stderr
    assert "# The model, on the desk machine." in config.read_text(encoding="utf-8")


def test_setup_on_a_terminal_writes_nothing_when_told_not_to(tmp_path: Path) -> None:
    home = tmp_path / "home"
    terminal = Terminal("setup", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", home=home)
    terminal.expect("Environment variable with the API key")
    terminal.type("")
    terminal.expect("Review interval in hours")
    terminal.type("")
    terminal.expect("Semantic search")
    terminal.type("")
    terminal.expect("Write the file anyway? [y/N]: ")
    terminal.type("")
    assert terminal.finish() == 1
    assert "nothing written to" in terminal.shown
    assert not (home / "config.toml").exists()
