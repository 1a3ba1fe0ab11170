"""The words a text holds, as the word index reads them, and how rare each query term is: what a
hit's words are judged by (memoryd.domain.relevance).

Texts are split into words as the word index splits them on SQLite: FTS5's porter tokenizer
(unicode61, diacritics removed), run on an in-memory connection of the calling thread's own, so
that both backends judge a hit by the same words (a message of 100 characters takes about 3 us,
one of 4,000 about 30). How rare a term is comes from the engine's own word index
(memoryd.storage.engine.WordIndex.counts).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import cast

import apsw

from memoryd.storage.engine import WordTable as Table
from memoryd.storage.engine import engine_of
from memoryd.storage.transaction import Transaction

TOKENIZER = ("porter", ["unicode61", "remove_diacritics", "2"])
_local = threading.local()


def _tokenizer() -> apsw.FTS5Tokenizer:
    found: apsw.FTS5Tokenizer | None = getattr(_local, "tokenizer", None)
    if found is None:
        _local.connection = apsw.Connection(":memory:")
        found = _local.connection.fts5_tokenizer(*TOKENIZER)
        _local.tokenizer = found
    return found


def text_words(text: str) -> tuple[str, ...]:
    """The words of a stored text, in order, as the word index holds them."""
    return _words(text, apsw.FTS5_TOKENIZE_DOCUMENT)


def text_spans(text: str) -> list[tuple[int, int, str]]:
    """The words of a stored text as the word index holds them, each with where it is in the
    text: (first character, character after its last, word)."""
    encoded = text.encode("utf-8", "surrogatepass")
    found = _tokenizer()(
        encoded,
        apsw.FTS5_TOKENIZE_DOCUMENT,
        None,
        include_offsets=True,
        include_colocated=False,
    )
    words = [(int(item[0]), int(item[1]), str(item[2])) for item in found]  # type: ignore[misc]
    if len(encoded) == len(text):  # ASCII: bytes are characters
        return words
    # Characters from the UTF-8 offsets the tokenizer gives.
    places = [0] * (len(encoded) + 1)
    at = 0
    for index, char in enumerate(text):
        size = len(char.encode("utf-8", "surrogatepass"))
        for offset in range(size):
            places[at + offset] = index
        at += size
    places[at] = len(text)
    return [(places[start], places[end], word) for start, end, word in words]


def phrase_words(phrase: str) -> tuple[str, ...]:
    """The words a query term (unquoted) is searched as."""
    return _words(phrase, apsw.FTS5_TOKENIZE_QUERY)


def _words(text: str, reason: int) -> tuple[str, ...]:
    found = _tokenizer()(
        text.encode("utf-8", "surrogatepass"),
        reason,
        None,
        include_offsets=False,
        include_colocated=False,
    )
    # Each a str, without offsets or colocated tokens (no conversion: 1.3 us of 2.9 a text).
    return cast("tuple[str, ...]", tuple(found))


def counts(
    connection: Transaction, table: Table, terms: Sequence[str]
) -> tuple[float, list[float]]:
    """The rows of `table`, and how many hold each term (unquoted; for a term of several words,
    the rarest word's count), from the engine's word index: FTS5's vocabulary on SQLite, the
    planner's statistics on PostgreSQL."""
    if not terms:
        return 0.0, []
    return engine_of(connection).words.counts(connection, table, terms)
