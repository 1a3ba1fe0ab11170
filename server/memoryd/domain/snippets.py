"""Snippets: a short excerpt of a message around what matched, matches between markers.

A word match's snippet is built here from the message's words as the word index reads them
(memoryd.storage.terms.text_spans): the WORD_SNIPPET_TOKENS words holding the most of the
query's terms, each term held between markers, as FTS5's snippet() would make it, on both
backends alike. It costs nothing of the database: FTS5's snippet() re-ran the match for every
message shown (3 ms of a search of a conversation of 100,000 messages). A substring match gets
a window of characters around its first match.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

MARK = "**"
ELLIPSIS = "…"
WORD_SNIPPET_TOKENS = 16
SUBSTRING_RADIUS_CHARS = 60


# A word of a text: (first character, character after the last, the word as indexed).
Span = tuple[int, int, str]


def word_snippet(
    content: str,
    spans: Sequence[Span],
    phrases: Sequence[tuple[str, ...]],
    *,
    width: int = WORD_SNIPPET_TOKENS,
) -> str | None:
    """The `width` words of `content` holding the most of `phrases` (each a run of indexed
    words), every phrase held between MARKs, with ellipses where the content goes on; None
    when it holds none of them (a match of its sender alone, or of a part of a word)."""
    held = _instances(spans, phrases)
    if not held:
        return None
    first, last = _window(held, len(spans), width)
    start = 0 if first == 0 else spans[first][0]
    end = len(content) if last == len(spans) - 1 else spans[last][1]
    marked: list[str] = []
    at = start
    for begin, finish in held:
        if begin < first or finish > last:
            continue
        left, right = spans[begin][0], spans[finish][1]
        if left < at:  # overlaps the one marked before it
            continue
        marked += [content[at:left], MARK, content[left:right], MARK]
        at = right
    marked.append(content[at:end])
    text = "".join(marked)
    return (ELLIPSIS if start > 0 else "") + text + (ELLIPSIS if end < len(content) else "")


def _instances(spans: Sequence[Span], phrases: Sequence[tuple[str, ...]]) -> list[tuple[int, int]]:
    """Where each phrase is held: (its first word's place, its last word's), in order."""
    words = [word for _, _, word in spans]
    found: set[tuple[int, int]] = set()
    for phrase in phrases:
        size = len(phrase)
        if not size:
            continue
        for place, word in enumerate(words):
            if word == phrase[0] and tuple(words[place : place + size]) == phrase:
                found.add((place, place + size - 1))
    return sorted(found)


def _window(held: list[tuple[int, int]], words: int, width: int) -> tuple[int, int]:
    """The first and last word of the `width` words holding the most of `held` (the earliest
    of the best), the phrases centred in it. When no phrase fits in `width` words (a query of
    more words than a snippet holds), the window opens on the first phrase's first word."""
    if words <= width:
        return 0, words - 1
    best, chosen = 0, None
    for begin, _ in held:
        inside = [(b, f) for b, f in held if begin <= b and f < begin + width]
        if len(inside) <= best:
            continue
        best = len(inside)
        span_end = max(f for _, f in inside)
        start = max(0, min(begin - (width - (span_end - begin + 1)) // 2, words - width))
        chosen = (start, start + width - 1)
    if chosen is None:
        start = min(held[0][0], words - width)
        chosen = (start, start + width - 1)
    return chosen


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
