"""memory_recall: what a recall searches, OpenHermit's partial-word fallback, and the merge.

The fallback fills a search that found fewer than the limit with rows whose key or value
contains any of the query's real terms as a substring (words split on whitespace and
`/ , ; :`; function words and pieces shorter than three letters left out), ranked by how many
terms match, then newest. Terms are matched literally: they never reach LIKE, so `%` and `_`
are ordinary characters.
"""

from __future__ import annotations

import enum
import itertools
import re
from collections.abc import Sequence
from typing import TypeVar

from memoryd.domain.conversation import CONTROL_CHARACTERS
from memoryd.domain.search_query import substring_term

T = TypeVar("T")
DEFAULT_LIMIT = 10
MAX_LIMIT = 50
MAX_FALLBACK_WORDS = 32
_WORD_BREAKS = re.compile(r"[\s/,;:]+")
GUEST_RECALLS_ONE_CONVERSATION = (
    "a guest recalls within its own conversation only (scope RECALL_SCOPE_CURRENT): the "
    "owner's profile and the agent's notes are withheld from guests"
)
HISTORY_REFUSED_IN_JOBS = (
    "Scheduled jobs cannot access conversation history; use source=memories scoped to job:self."
)


class RecallScope(enum.Enum):
    """How far a recall looks (always within the caller's agent and owner)."""

    CURRENT = "current"
    OWNER = "owner"
    ALL = "all"


class RecallSource(enum.Enum):
    """What a recall searches."""

    MEMORIES = "memories"
    HISTORY = "history"
    ALL = "all"


def fallback_words(query: str) -> tuple[str, ...]:
    """The query's real terms for the substring fallback, without repeats (case is folded in
    SQL): no function word, and no piece of a word too short to mean anything
    (memoryd.domain.search_query.substring_term), so "is" never matches "Is vegetarian"."""
    cleaned = CONTROL_CHARACTERS.sub(" ", query)
    terms = (substring_term(word) for word in _WORD_BREAKS.split(cleaned) if word)
    return tuple(dict.fromkeys(term for term in terms if term is not None))[:MAX_FALLBACK_WORDS]


def interleave(first: Sequence[T], second: Sequence[T], limit: int) -> list[T]:
    """Both ranked lists merged fairly: one from each in turn, the rest of the longer one."""
    merged: list[T] = []
    for pair in itertools.zip_longest(first, second):
        merged.extend(item for item in pair if item is not None)
    return merged[:limit]
