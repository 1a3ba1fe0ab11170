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
    pattern = re.compile(
        "|".join(re.escape(word) for word in sorted(words, key=len, reverse=True)), re.IGNORECASE
    )
    first = pattern.search(content) if words else None
    if first is None:  # the match was case-folded beyond what re.IGNORECASE folds: show the start
        start, end = 0, min(len(content), 2 * SUBSTRING_RADIUS_CHARS)
    else:
        start = max(0, first.start() - SUBSTRING_RADIUS_CHARS)
        end = min(len(content), first.end() + SUBSTRING_RADIUS_CHARS)
    excerpt = content[start:end]
    if words:
        excerpt = pattern.sub(lambda match: f"{MARK}{match.group(0)}{MARK}", excerpt)
    return (ELLIPSIS if start > 0 else "") + excerpt + (ELLIPSIS if end < len(content) else "")
