"""SQLite's word index: FTS5 tables beside messages (content, sender and the scope tokens) and
memory rows (category, key, value and the owner's token), kept by the schema's triggers, ranked
by bm25.

Each row holds its scopes' tokens, so a search of a small scope narrows the index itself; a
large scope's search can read the index's own best matches first and check them against the
scope (memoryd.storage.search_reads.rank_words), and a small scope's few matches are scored by
bm25 with the counts the search read (memoryd.storage.fts5_scores). How rare a term is comes
from FTS5's vocabulary: an fts5vocab table of each connection, which counts a word's rows by
reading its whole list of them: 0.15 ms for a rare word, 2.6 ms for "what" in a million
messages of LoCoMo. So a word's count is kept between searches until its table has grown by
COUNT_GROWTH (or is smaller than when counted, or rows were erased): a weight moves little with
it.
"""

from __future__ import annotations

import collections
import threading
import weakref
from collections.abc import Mapping, Sequence

from memoryd.storage import fts5_scores
from memoryd.storage.engine import WordMatch, WordTable
from memoryd.storage.sql import one, rows
from memoryd.storage.terms import phrase_words
from memoryd.storage.transaction import Transaction

# The sender's weight in bm25, against 1.0 for the content (tuned on LoCoMo conversations 1-5).
SENDER_WEIGHT = 1.0
# bm25's weights of each index's columns: content, sender, scope; category, key, value, scope.
MESSAGE_WEIGHTS = ("messages_fts", f"1.0, {SENDER_WEIGHT}, 0.0")
MEMORY_WEIGHTS = ("memories_fts", "1.0, 1.0, 1.0, 0.0")
MESSAGE_SCORE = f"bm25({MESSAGE_WEIGHTS[0]}, {MESSAGE_WEIGHTS[1]})"
# The word indexes (and the trigram index of substrings, an FTS5 table too).
INDEXES = ("messages_fts", "messages_trigram", "memories_fts")
# The vocabulary tables each connection has made already.
_VOCABULARIES: weakref.WeakKeyDictionary[object, set[str]] = weakref.WeakKeyDictionary()
_VOCABULARIES_LOCK = threading.Lock()


# A word's count of rows holds until its table has grown by this share of the rows it had then.
COUNT_GROWTH = 0.01
# The most words' counts kept in a process, the least recently asked leaving first.
COUNTS_KEPT = 100_000


class KeptCounts:
    """Words' counts of rows by (database, table, word), each with the table's rows when it was
    counted; a count holds while the table has between those rows and COUNT_GROWTH more."""

    def __init__(self, most: int = COUNTS_KEPT) -> None:
        self._most = most
        self._counts: collections.OrderedDict[tuple[str, str, str], tuple[int, int]] = (
            collections.OrderedDict()
        )
        self._lock = threading.Lock()

    def held(self, place: tuple[str, str], rows_now: int, words: Sequence[str]) -> dict[str, int]:
        """The counts of `words` in the table at `place` that still hold at `rows_now` rows."""
        found = {}
        with self._lock:
            for word in words:
                kept = self._counts.get((*place, word))
                if kept is None:
                    continue
                count, rows_then = kept
                if rows_then <= rows_now <= rows_then + int(rows_then * COUNT_GROWTH):
                    self._counts.move_to_end((*place, word))
                    found[word] = count
        return found

    def clear(self) -> None:
        """Forget every count."""
        with self._lock:
            self._counts.clear()

    def keep(self, place: tuple[str, str], rows_now: int, counts: dict[str, int]) -> None:
        """Counts just read, at `rows_now` rows of the table."""
        with self._lock:
            for word, count in counts.items():
                self._counts[(*place, word)] = (count, rows_now)
                self._counts.move_to_end((*place, word))
            while len(self._counts) > self._most:
                self._counts.popitem(last=False)


_KEPT = KeptCounts()


def forget_counts() -> None:
    """Forget the counts kept (after an erasure: no count of erased rows' words stays, though a
    table whose newest row stays keeps its number of rows)."""
    _KEPT.clear()


class Fts5Words:
    """The WordIndex of SQLite (module docstring)."""

    scoped = True

    def match_messages(
        self,
        connection: Transaction,
        expression: str,
        scope_token: str | None,
        *,
        scored: bool = True,
        counted: Mapping[str, float] | None = None,
    ) -> WordMatch:
        match = f"{{content sender}} : ({expression})"
        if scope_token is not None:
            match += f' AND scope : "{scope_token}"'
        return _match(
            "messages_fts JOIN messages AS m ON m.id = messages_fts.rowid",
            "messages_fts MATCH ?",
            match,
            MESSAGE_WEIGHTS if scored else None,
            counted if scope_token is not None else None,
        )

    def match_memories(
        self,
        connection: Transaction,
        expression: str,
        scope_token: str,
        *,
        scored: bool = True,
        counted: Mapping[str, float] | None = None,
    ) -> WordMatch:
        return _match(
            "memories_fts JOIN memories AS r ON r.id = memories_fts.rowid",
            "memories_fts MATCH ?",
            f'{{category key value}} : ({expression}) AND search_scope : "{scope_token}"',
            MEMORY_WEIGHTS if scored else None,
            counted,
        )

    def best_messages(
        self, connection: Transaction, expression: str, limit: int
    ) -> list[tuple[int, float]]:
        best = rows(
            connection,
            f"SELECT rowid, {MESSAGE_SCORE} AS score FROM messages_fts "
            "WHERE messages_fts MATCH ? ORDER BY score, rowid DESC LIMIT ?",
            (f"{{content sender}} : ({expression})", limit),
        )
        return [(int(row[0]), float(row[1])) for row in best]

    def counts(
        self, connection: Transaction, table: WordTable, terms: Sequence[str]
    ) -> tuple[float, list[float]]:
        """FTS5's vocabulary: a term of several words counts as its rarest word. Counts kept
        from an earlier search are used while they hold (module docstring)."""
        split = [phrase_words(term) for term in terms]
        wanted = sorted({word for words in split for word in words})
        # The rows of the table: ids only grow, so the largest is the count but for erasures.
        total = int(one(connection, f"SELECT coalesce(max(id), 0) FROM {table}")[0])
        # A database in memory has no name to keep its counts by.
        place = (str(getattr(connection, "filename", "") or ""), table)
        found = _KEPT.held(place, total, wanted) if place[0] else {}
        missing = [word for word in wanted if word not in found]
        if missing:
            marks = ", ".join("?" * len(missing))
            counted = {
                str(term): int(doc)
                for term, doc in rows(
                    connection,
                    f"SELECT term, doc FROM {_vocabulary(connection, table)} "
                    f"WHERE term IN ({marks})",
                    missing,
                )
            }
            read = {word: counted.get(word, 0) for word in missing}
            if place[0]:
                _KEPT.keep(place, total, read)
            found.update(read)
        return float(total), [
            float(min((found.get(word, 0) for word in words), default=0)) for words in split
        ]


def _match(
    tables: str,
    condition: str,
    match: str,
    weights: tuple[str, str] | None,
    counted: Mapping[str, float] | None,
) -> WordMatch:
    """A match scored by bm25 with `weights` (index, columns' weights): with the counts the
    search read when given (memoryd.storage.fts5_scores), else FTS5's own; 0 when unscored."""
    if weights is None:
        return WordMatch(tables, condition, "0", [match])
    index, columns = weights
    if counted is None:
        return WordMatch(tables, condition, f"bm25({index}, {columns})", [match])
    score = f"{fts5_scores.FUNCTION}({index}, ?, {columns})"
    return WordMatch(tables, condition, score, [match], [fts5_scores.encoded(counted)])


def _vocabulary(connection: Transaction, table: WordTable) -> str:
    """The connection's fts5vocab table of `table`'s word index (made on first use: a virtual
    table of the connection's temporary schema, which reads the index and stores nothing)."""
    name = f"temp.memoryd_{table}_vocabulary"
    with _VOCABULARIES_LOCK:
        known = name in _VOCABULARIES.get(connection, ())
    if not known:
        connection.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING fts5vocab(main, {table}_fts, row)"
        )
        with _VOCABULARIES_LOCK:
            _VOCABULARIES.setdefault(connection, set()).add(name)
    return name
