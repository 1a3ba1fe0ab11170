"""Run the grpcurl walkthrough (docs/walkthrough.md) against a fresh server and write its
outputs back.

    .venv/bin/python -m scripts.update_walkthrough

tests/server/test_readme_walkthrough.py checks that the page shows what the commands print,
and that the README's one call is one of its steps; run this after a change to the contract,
then read the diff before committing it (and copy the README's step again if it changed).
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from memoryd.testing.server_process import ServerProcess
from tests.server.test_readme_walkthrough import FENCE, SEPARATOR, WALKTHROUGH, walkthrough_blocks

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    """Rewrite the output blocks of the README's walkthrough section."""
    with tempfile.TemporaryDirectory() as scratch:
        server = ServerProcess(Path(scratch) / "home").start()
        try:
            blocks = walkthrough_blocks()
            script = "set -euo pipefail\n" + f"\necho {SEPARATOR}\n".join(c for c, _ in blocks)
            env = dict(
                os.environ,
                MEMORYD_ADDRESS=server.address,
                PATH=f"{ROOT}/.tools/bin:{os.environ['PATH']}",
            )
            result = subprocess.run(
                ["bash", "-c", script],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
        finally:
            server.stop()
    if result.returncode != 0:
        sys.stderr.write(result.stderr)
        return 1
    outputs = result.stdout.split(SEPARATOR + "\n")
    readme_path = WALKTHROUGH
    readme = readme_path.read_text(encoding="utf-8")
    start = readme.index("<!-- walkthrough:start -->")
    end = readme.index("<!-- walkthrough:end -->")
    section = readme[start:end]
    fences = list(FENCE.finditer(section))
    pieces: list[str] = []
    last = 0
    count = 0
    for first, second in itertools.pairwise(fences):
        if first.group(1) != "sh":
            continue
        output = outputs[count].rstrip("\n")
        count += 1
        pieces.append(section[last : second.start()])
        pieces.append(
            f"```{second.group(1)}\n{output}\n```" if output else f"```{second.group(1)}\n```"
        )
        last = second.end()
    pieces.append(section[last:])
    readme_path.write_text(readme[:start] + "".join(pieces) + readme[end:], encoding="utf-8")
    print(f"rewrote {count} outputs in {WALKTHROUGH.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
