"""How an error message shows a value the client sent: quoted, and never more than a prefix.

A message that echoed a whole value would let one request make its own error as large as the
request: past 16 KiB the status trailer breaks, and the client sees RESOURCE_EXHAUSTED instead
of the refusal. Every message quotes client text through `clipped`.
"""

from __future__ import annotations

QUOTE_CHARS = 64


def clipped(value: str, limit: int = QUOTE_CHARS) -> str:
    """`value` quoted like repr(); past `limit` characters, a prefix and the full length."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}... ({len(value):,} characters)"


def shortened(value: str, limit: int = QUOTE_CHARS) -> str:
    """`value` as it is, for names in a sentence; past `limit` characters, a prefix and "..."."""
    return value if len(value) <= limit else f"{value[:limit]}..."
