"""Write the README's access table from the RPCs' declarations in the contract.

    .venv/bin/python scripts/update_access_table.py

Each RPC declares its access with the method option (memoryd.v1.access); the table between the
README's `<!-- access:start -->` and `<!-- access:end -->` markers is printed from those
declarations, and tests/test_access.py fails when it is stale.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
START, END = "<!-- access:start -->\n", "\n<!-- access:end -->"


def main() -> int:
    """Replace the table between the markers."""
    from memoryd.api.access import declarations, markdown_table  # noqa: PLC0415
    from memoryd_client.v1 import compaction_service_pb2, memory_service_pb2  # noqa: PLC0415

    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    if START not in text or END not in text:
        sys.exit(f"README.md has no {START.strip()} ... {END.strip()} markers")
    before, rest = text.split(START, 1)
    _, after = rest.split(END, 1)
    table = markdown_table(declarations((memory_service_pb2, compaction_service_pb2)).values())
    readme.write_text(before + START + table + END + after, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
