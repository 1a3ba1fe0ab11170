"""The clients against the real server, across languages: a message appended by
one is recalled by the other byte for byte (emoji, CJK, combining marks), and each language's
console adapter example runs a conversation (the TypeScript one with a voice transcript cut and
resumed). The clients' own suites run in `make client-tests`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from memoryd.testing.server_process import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
GO_CLIENT = ROOT / "clients" / "go"
TS_CLIENT = ROOT / "clients" / "typescript"
TEXTS = [
    "東京で会いましょう 🍣",
    "naïve café — e\u0301 (combining)",
    "Привет, 👩‍💻 world",
    "tab\tand\nnewline",
]


def run(command: list[str], cwd: Path, stdin: str = "") -> str:
    done = subprocess.run(
        command, cwd=cwd, input=stdin, capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, f"{command}: {done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """The built cross-language programs and examples of both clients."""
    if shutil.which("go") is None or shutil.which("node") is None:
        pytest.fail("Go and Node.js are needed: the clients are part of the product")
    built = tmp_path_factory.mktemp("clients")
    run(["go", "build", "-o", str(built / "xlang"), "./internal/xlang"], GO_CLIENT)
    run(["go", "build", "-o", str(built / "adapter"), "./examples/adapter"], GO_CLIENT)
    run(["npm", "run", "--silent", "build"], TS_CLIENT)
    return {
        "go": [str(built / "xlang")],
        "ts": ["node", str(TS_CLIENT / "dist" / "test" / "xlang.js")],
        "go-adapter": [str(built / "adapter")],
        "ts-adapter": ["node", str(TS_CLIENT / "dist" / "examples" / "adapter.js")],
    }


@pytest.fixture
def voice_server(start_server: type[ServerProcess], tmp_path: Path) -> ServerProcess:
    return start_server(
        tmp_path / "home", config="[memoryd.realtime]\npersist_transcripts = true\n"
    ).start()


@pytest.mark.parametrize(("writer", "reader"), [("go", "ts"), ("ts", "go")])
def test_a_message_appended_in_one_language_is_recalled_in_the_other_byte_for_byte(
    programs: dict[str, list[str]], server: ServerProcess, writer: str, reader: str
) -> None:
    owner, chat = f"xlang-{writer}", f"chat-{uuid.uuid4().hex[:8]}"
    for text in TEXTS:
        stored = run([*programs[writer], "append", server.address, owner, chat, text], ROOT)
        assert int(stored) > 0
    for text in TEXTS:
        query = text.split()[0]
        recalled = json.loads(
            run([*programs[reader], "recall", server.address, owner, chat, query], ROOT)
        )
        assert text in recalled, (query, recalled)
        assert next(found for found in recalled if found == text).encode() == text.encode()


def test_the_go_console_adapter_commits_turns_and_prints_what_is_known(
    programs: dict[str, list[str]], server: ServerProcess
) -> None:
    chat = f"go-{uuid.uuid4().hex[:8]}"
    shown = run(
        [*programs["go-adapter"], "-address", server.address, "-owner", "ada", "-chat", chat],
        ROOT,
        stdin="hello\nI live in 東京\n",
    )
    assert shown.splitlines()[:2] == ["assistant: echo: hello", "assistant: echo: I live in 東京"]


def test_the_typescript_console_adapter_streams_a_transcript_and_resumes(
    programs: dict[str, list[str]], voice_server: ServerProcess
) -> None:
    chat = f"ts-{uuid.uuid4().hex[:8]}"
    command = [*programs["ts-adapter"], "--address", voice_server.address, "--owner", "ada"]
    shown = run([*command, "--chat", chat, "--voice"], ROOT, stdin="hello\nsee you in 東京\n")
    assert shown.splitlines() == [
        "assistant: echo: hello",
        "voice: committed 1 (reconnects 0)",
        "assistant: echo: see you in 東京",
        "voice: committed 2 (reconnects 1)",
        "voice: 1 finals stored",
    ]


def test_the_python_console_adapter_commits_turns_and_prints_what_is_known(
    server: ServerProcess,
) -> None:
    chat = f"py-{uuid.uuid4().hex[:8]}"
    example = ROOT / "clients" / "python" / "examples" / "adapter.py"
    command = [sys.executable, str(example), "--address", server.address, "--owner", "ada"]
    shown = run([*command, "--chat", chat], ROOT, stdin="hello\nI live in 東京\n")
    assert shown.splitlines()[:2] == ["assistant: echo: hello", "assistant: echo: I live in 東京"]
