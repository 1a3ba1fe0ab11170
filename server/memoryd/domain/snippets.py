"""Snippets: a short excerpt of a message around what matched, matches between markers.

Word matches get their snippet from FTS5's snippet() with the same markers and ellipsis; this
module builds the snippet of a substring match, which FTS5 cannot highlight.
"""

from __future__ import annotations

import re

MARK = "**"
ELLIPSIS = "…"
WORD_SNIPPET_TOKENS = 16
SUBSTRING_RADIUS_CHARS = 60


def substring_snippet(content: str, words: tuple[str, ...]) -> str:
    """Excerpt `content` around the first occurrence of any of `words`, marking every match."""
    if not words:
        return _clip(content, 0, min(len(content), 2 * SUBSTRING_RADIUS_CHARS))
    pattern = re.compile(
        "|".join(re.escape(word) for word in sorted(words, key=len, reverse=True)), re.IGNORECASE
    )
    first = pattern.search(content)
    if first is None:
        return _clip(content, 0, min(len(content), 2 * SUBSTRING_RADIUS_CHARS))
    start = max(0, first.start() - SUBSTRING_RADIUS_CHARS)
    end = min(len(content), first.end() + SUBSTRING_RADIUS_CHARS)
    excerpt = pattern.sub(lambda match: f"{MARK}{match.group(0)}{MARK}", content[start:end])
    return _clip(excerpt, 0, len(excerpt), before=start > 0, after=end < len(content))


def _clip(
    text: str, start: int, end: int, *, before: bool = False, after: bool | None = None
) -> str:
    if after is None:
        after = end < len(text)
    return (ELLIPSIS if before else "") + text[start:end] + (ELLIPSIS if after else "")
