"""The grpcurl walkthrough (docs/walkthrough.md), run verbatim with the real grpcurl against a
fresh server; the README's one call is one of its steps."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
from pathlib import Path

from memoryd.testing.server_process import ServerProcess
from tests.backends import on_postgres
from tests.conftest import ROOT

WALKTHROUGH = ROOT / "docs" / "walkthrough.md"
SEPARATOR = "@@memoryd-walkthrough-block@@"
FENCE = re.compile(r"```(\w+)\n(.*?)```", re.DOTALL)
TIMESTAMP = re.compile(r'("(?:created|updated)_at": )"[^"]+"')
# A word hit's rank is its engine's own score: FTS5's bm25 on SQLite, ts_rank on PostgreSQL.
RANK = re.compile(r'("(?:rank|bm25)": )-?[0-9.e+-]+')


def walkthrough_blocks(page: Path = WALKTHROUGH) -> list[tuple[str, str]]:
    """(command, expected output) pairs between the walkthrough markers of a page."""
    text = page.read_text(encoding="utf-8")
    section = text.split("<!-- walkthrough:start -->")[1].split("<!-- walkthrough:end -->")[0]
    fences = FENCE.findall(section)
    pairs = []
    for (language, command), (output_language, output) in itertools.pairwise(fences):
        if language == "sh":
            assert output_language in ("text", "json"), "each command is followed by its output"
            pairs.append((command, output))
    return pairs


def normalise(text: str, *, ranks: bool = False) -> str:
    """Timestamps differ from run to run (and with `ranks`, the engine's scores); everything
    else must match."""
    text = TIMESTAMP.sub(r'\1"<time>"', text)
    if ranks:
        text = RANK.sub(r"\1<rank>", text)
    return text.strip()


def test_the_walkthrough_has_the_promised_steps() -> None:
    commands = " ".join(command for command, _ in walkthrough_blocks())
    for step in (
        " list",
        " describe ",
        "/AppendMessages",
        "/ListMessages",
        "/SearchHistory",
        "/StoreMemory",
        "/Recall",
        "/GetPromptContext",
        "/ComposeContext",
    ):
        assert step in commands


def test_the_readme_call_is_a_step_of_the_walkthrough() -> None:
    (call,) = walkthrough_blocks(ROOT / "README.md")
    steps = [(command, normalise(output)) for command, output in walkthrough_blocks()]
    assert (call[0], normalise(call[1])) in steps


def test_the_walkthrough_runs_verbatim(
    start_server: type[ServerProcess], tmp_path: Path, grpcurl: str
) -> None:
    # The page shows SQLite's answers; PostgreSQL's are the same but for the ranks' values.
    ranks = on_postgres()
    server = start_server(tmp_path / "home").start()
    blocks = walkthrough_blocks()
    script = "set -euo pipefail\n" + f"\necho {SEPARATOR}\n".join(c for c, _ in blocks)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD")}
    env["MEMORYD_ADDRESS"] = server.address  # the one name the walkthrough and the CLI read
    env["PATH"] = f"{Path(grpcurl).parent}:{ROOT / '.tools' / 'bin'}:{env['PATH']}"  # and buf
    result = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    outputs = result.stdout.split(SEPARATOR + "\n")
    assert len(outputs) == len(blocks)
    for (command, expected), actual in zip(blocks, outputs, strict=True):
        assert normalise(actual, ranks=ranks) == normalise(expected, ranks=ranks), command
