"""Nearest vectors of a scope: exact search over the scope's vectors, kept in memory.

A scope (a conversation, an owner's, an agent's messages) is loaded once from SQLite into
arrays, then only the vectors written since are added (their seq is past the one loaded); the
least recently searched scopes leave when the cache passes its budget. A scope of up to
EXACT_LIMIT vectors is compared exactly with the query; a larger one is first narrowed to the
CANDIDATES nearest by the Hamming distance of sign bits, and those are compared exactly. No
approximate index to build or tune: the figures are in the README. A scope too large for the
budget is refused on SQLite (searched by its words); on PostgreSQL the model's HNSW index
(pgvector) answers for it, approximately.

Everything runs on a reader thread inside one read transaction; the found ids are read back
from messages in the same transaction, so an erased message is never returned even while a stale
copy of its vector is still cached.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
from collections.abc import Collection

import numpy as np

from memoryd.domain.conversation import HistoryScope
from memoryd.domain.memory_queries import Visible
from memoryd.domain.vectors import (
    Floats,
    Ids,
    Int8s,
    Words,
    from_blobs,
    hamming,
    restored,
    sign_words,
    smallest,
)
from memoryd.observability import metrics
from memoryd.storage import search_reads, vector_reads
from memoryd.storage import vector_store as store
from memoryd.storage.sql import Row
from memoryd.storage.transaction import Transaction

# What a cached scope costs beside its arrays: the object, its arrays' headers, its key (1,076
# bytes by tracemalloc for a scope with no vector). Counted so that scopes with few vectors or
# none take their share of the budget too: counted as nothing, every scope ever searched stayed.
SCOPE_BYTES = 1_100


# Bytes a cached vector takes: its id, scale, int8 components and sign words.
def vector_bytes(dimension: int) -> int:
    """The memory one cached vector of `dimension` takes."""
    return 8 + 4 + dimension + 8 * ((dimension + 63) // 64)


class ScopeTooLargeError(Exception):
    """The scope's vectors do not fit in the cache's budget; the message says what to do."""


# A scope found too large is not counted again for this long.
TOO_LARGE_SECONDS = 60.0
EXACT_LIMIT = 4_096
CANDIDATES = 1_000
GROWTH = 1.5


@dataclasses.dataclass(slots=True)
class _Scope:
    """One scope's vectors, in arrays with room to grow, and their ids in order (vectors come
    in any order of ids: the live queue is embedded before the backlog)."""

    last_seq: int
    size: int
    ids: Ids
    scales: Floats
    components: Int8s
    # The sign words, one row per word and one column per vector (memoryd.domain.vectors).
    words: Words
    # The ids held, in order, and where each is held.
    sorted_ids: Ids = dataclasses.field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    order: Ids = dataclasses.field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return SCOPE_BYTES + int(
            self.ids.nbytes
            + self.scales.nbytes
            + self.components.nbytes
            + self.words.nbytes
            + self.sorted_ids.nbytes
            + self.order.nbytes
        )

    def append(self, ids: Ids, scales: Floats, components: Int8s) -> None:
        needed = self.size + len(ids)
        if needed > len(self.ids):
            room = max(needed, int(len(self.ids) * GROWTH) + 16)
            self.ids = _grown(self.ids, room)
            self.scales = _grown(self.scales, room)
            self.components = _grown(self.components, room)
            words = np.zeros((self.words.shape[0], room), dtype=np.uint64)
            words[:, : self.size] = self.words[:, : self.size]
            self.words = words
        end = self.size + len(ids)
        self.ids[self.size : end] = ids
        self.scales[self.size : end] = scales
        self.components[self.size : end] = components
        self.words[:, self.size : end] = sign_words(components).T
        arrived = np.argsort(ids, kind="stable")
        at = np.searchsorted(self.sorted_ids, ids[arrived])
        self.sorted_ids = np.insert(self.sorted_ids, at, ids[arrived])
        self.order = np.insert(self.order, at, np.arange(self.size, end)[arrived])
        self.size = end

    def positions(self, wanted: Ids) -> tuple[Ids, Ids]:
        """Where each of `wanted` is held: (the wanted ids held, their positions)."""
        if not self.size:
            return wanted[:0], wanted[:0]
        places = np.searchsorted(self.sorted_ids, wanted).clip(0, self.size - 1)
        found = self.sorted_ids[places] == wanted
        return wanted[found], self.order[places[found]]


class VectorCache:
    """Scopes' vectors by (model, scope), least recently used out first, within a budget.

    `indexed`: the database has an approximate nearest-neighbour index of its own (PostgreSQL's
    HNSW through pgvector), which answers for a scope too large for the budget.
    """

    def __init__(self, budget_mb: float, *, indexed: bool = False) -> None:
        self._indexed = indexed
        self._budget_mb = budget_mb
        self._budget = int(budget_mb * (1 << 20))
        self._entries: collections.OrderedDict[tuple[int, HistoryScope], _Scope] = (
            collections.OrderedDict()
        )
        # The bytes of the scopes held, kept as they come and go (a scope held is never changed:
        # it is taken out to be brought up to date), so that no search sums them all.
        self._held = 0
        # Held only to take a scope out, put it back or read it: a scope is read from the
        # database and brought up to date outside it, so that searches of other scopes go on.
        self._lock = threading.Lock()
        # Scopes whose vectors would not fit, and when that was found.
        self._too_large: dict[tuple[int, HistoryScope], tuple[float, str]] = {}
        # Counts the clears: a scope read before one is not put back after it. nearest() notes
        # it before its read transaction's first statement (the snapshot begins there, on both
        # engines), and an erasure clears after its commit: so a scope read from a snapshot
        # older than an erasure is never put back, and no copy of an erased vector stays.
        self._generation = 0

    def clear(self) -> None:
        """Forget every scope (after an erasure, so that nothing of it stays in memory),
        including those being read now."""
        with self._lock:
            self._entries.clear()
            self._held = 0
            self._too_large.clear()
            self._generation += 1

    def held(self) -> tuple[int, int]:
        """The scopes held, and the bytes they count against the budget."""
        with self._lock:
            return len(self._entries), self._held

    def nearest(
        self,
        connection: Transaction,
        model: store.EmbeddingModel,
        scope: HistoryScope,
        query: Floats,
        depth: int,
    ) -> list[tuple[int, float]]:
        """(message id, cosine similarity) of the scope's `depth` nearest messages, best first:
        exact from memory, or approximate through the database's index for a scope too large
        for the budget (ScopeTooLargeError without one). Called first in its read transaction
        (see `_generation`)."""
        key = (model.id, scope)
        with self._lock:  # taken out: this search alone brings it up to date
            entry = self._entries.pop(key, None)
            metrics.cache_lookup("vectors", hit=entry is not None)
            if entry is not None:
                self._held -= entry.nbytes
            generation = self._generation
        try:
            entry = self._current(connection, model, scope, entry)
        except ScopeTooLargeError:
            if not self._indexed:
                raise
            return vector_reads.indexed_nearest(connection, model, scope, query.tolist(), depth)
        found = _nearest(entry, query, depth)
        self._put_back(key, entry, generation)
        return found

    def similarities(
        self,
        connection: Transaction,
        model: store.EmbeddingModel,
        scope: HistoryScope,
        query: Floats,
        message_ids: Collection[int],
    ) -> dict[int, float]:
        """The cosine similarity to the query of each of these messages of the scope that has a
        vector of the model: from memory when the scope is cached (it is, right after nearest()),
        else read by id."""
        wanted = np.unique(np.fromiter(message_ids, dtype=np.int64, count=len(message_ids)))
        with self._lock:
            entry = self._entries.get((model.id, scope))
            if entry is not None:
                held, places = entry.positions(wanted)
                values = _similarities(entry, places, query)
                return dict(zip(held.tolist(), values.tolist(), strict=True))
        ids, scales, components = _arrays(
            vector_reads.message_vectors(connection, model.id, wanted.tolist()), model.dimension
        )
        if not len(ids):
            return {}
        values = restored(scales, components) @ query
        return dict(zip(ids.tolist(), values.tolist(), strict=True))

    def _current(
        self,
        connection: Transaction,
        model: store.EmbeddingModel,
        scope: HistoryScope,
        entry: _Scope | None,
    ) -> _Scope:
        """The scope's vectors up to date: `entry` (taken out of the cache) with the vectors
        written since, or all of them read afresh. Outside the lock."""
        if entry is not None:
            newest = vector_reads.newest_seq(connection)
            if newest > entry.last_seq:
                for chunk in vector_reads.scope_vectors(
                    connection, scope, model.id, entry.last_seq
                ):
                    ids, scales, components = _arrays(chunk, model.dimension)
                    if len(entry.positions(ids)[0]):
                        entry = None  # vectors made again (a reindex): load the scope afresh
                        break
                    # New vectors, of messages newer or older (the live queue is embedded
                    # before the backlog): ids need no order.
                    entry.append(ids, scales, components)
                if entry is not None:
                    entry.last_seq = newest
        if entry is None:
            self._check_size(connection, model, scope)
            newest = vector_reads.newest_seq(connection)
            entry = _Scope(
                last_seq=newest,
                size=0,
                ids=np.zeros(0, dtype=np.int64),
                scales=np.zeros(0, dtype=np.float32),
                components=np.zeros((0, model.dimension), dtype=np.int8),
                words=np.zeros(((model.dimension + 63) // 64, 0), dtype=np.uint64),
            )
            for chunk in vector_reads.scope_vectors(connection, scope, model.id, 0):
                entry.append(*_arrays(chunk, model.dimension))
        return entry

    def _put_back(self, key: tuple[int, HistoryScope], entry: _Scope, generation: int) -> None:
        """Hold a scope brought up to date, within the budget: not when the cache was cleared
        since it was taken out (an erasure), and only the newer of two searches' copies."""
        with self._lock:
            if generation != self._generation or entry.nbytes > self._budget:
                return
            other = self._entries.pop(key, None)
            if other is not None:  # another search of the scope put its copy back meanwhile
                self._held -= other.nbytes
                if other.last_seq > entry.last_seq:
                    entry = other
            self._entries[key] = entry
            self._held += entry.nbytes
            self._shrink()

    def known_too_large(self, model: store.EmbeddingModel, scope: HistoryScope) -> bool:
        """Whether the scope was found too large for the budget within TOO_LARGE_SECONDS (a
        hybrid search of it then goes straight to its words, with no query vector to make).
        Never with an index: the index answers for it."""
        if self._indexed:
            return False
        with self._lock:
            known = self._too_large.get((model.id, scope))
        return known is not None and time.monotonic() - known[0] < TOO_LARGE_SECONDS

    def _check_size(
        self, connection: Transaction, model: store.EmbeddingModel, scope: HistoryScope
    ) -> None:
        """Refuse (ScopeTooLargeError) a scope whose vectors would not fit in the budget, before
        reading them; the verdict is kept for TOO_LARGE_SECONDS."""
        key = (model.id, scope)
        now = time.monotonic()
        with self._lock:
            known = self._too_large.get(key)
        if known is not None and now - known[0] < TOO_LARGE_SECONDS:
            raise ScopeTooLargeError(known[1])
        fits = self._budget // vector_bytes(model.dimension)
        # No more messages than fit, no more vectors: counted on the scope's index alone (0.03
        # ms for a conversation of 330 messages, against 0.55 to count their vectors).
        if (
            search_reads.scope_message_count(connection, scope, fits + 1) <= fits
            or vector_reads.scope_vector_count(connection, scope, model.id, fits + 1) <= fits
        ):
            with self._lock:
                self._too_large.pop(key, None)
            return
        reason = (
            f"this scope has more than {fits:,} vectors, more than memoryd.search.vector_cache_mb "
            f"({self._budget_mb:g} MiB) holds: search it by words (mode lexical), "
            "narrow the scope, or raise vector_cache_mb"
        )
        with self._lock:
            self._too_large[key] = (now, reason)
        raise ScopeTooLargeError(reason)

    def _shrink(self) -> None:
        while self._held > self._budget and len(self._entries) > 1:
            _, dropped = self._entries.popitem(last=False)
            self._held -= dropped.nbytes


def nearest_memories(
    connection: Transaction,
    model: store.EmbeddingModel,
    visible: Visible,
    query: Floats,
    depth: int,
) -> tuple[list[tuple[int, float]], dict[int, float]]:
    """(row id, cosine similarity) of the caller's `depth` nearest memory rows, best first; and
    the similarity of every row the caller may see that has a vector. An owner's rows are few:
    read and compared on every call."""
    found = vector_reads.visible_memory_vectors(connection, visible, model.id)
    ids, scales, components = _arrays(found.rows, model.dimension)
    if not len(ids):
        return [], {}
    similarities = restored(scales, components) @ query
    every = dict(zip(ids.tolist(), similarities.tolist(), strict=True))
    return _best(ids, similarities, depth), every


def _nearest(entry: _Scope, query: Floats, depth: int) -> list[tuple[int, float]]:
    if not entry.size:
        return []
    ids = entry.ids[: entry.size]
    if entry.size <= EXACT_LIMIT:
        return _best(ids, _similarities(entry, slice(0, entry.size), query), depth)
    signs = sign_words(np.where(query >= 0, 1, -1).astype(np.int8)[None, :])[0]
    chosen = smallest(hamming(entry.words[:, : entry.size], signs), max(CANDIDATES, depth))
    return _best(ids[chosen], _similarities(entry, chosen, query), depth)


def _similarities(entry: _Scope, chosen: slice | Ids, query: Floats) -> Floats:
    """Cosine similarities of the chosen vectors to the query (the scale applied last)."""
    found: Floats = (entry.components[chosen].astype(np.float32) @ query) * entry.scales[chosen]
    return found


def _best(ids: Ids, similarities: Floats, depth: int) -> list[tuple[int, float]]:
    top = np.argpartition(-similarities, depth)[:depth] if len(ids) > depth else np.arange(len(ids))
    ordered = top[np.lexsort((-ids[top], -similarities[top]))]
    return [(int(ids[index]), float(similarities[index])) for index in ordered]


def _arrays(rows: list[Row], dimension: int) -> tuple[Ids, Floats, Int8s]:
    """(_, id, scale, vector) rows as arrays."""
    ids = np.fromiter((row[1] for row in rows), dtype=np.int64, count=len(rows))
    scales = np.fromiter((row[2] for row in rows), dtype=np.float32, count=len(rows))
    return ids, scales, from_blobs([row[3] for row in rows], dimension)


def _grown(array: np.ndarray, rows: int) -> np.ndarray:
    grown = np.zeros((rows, *array.shape[1:]), dtype=array.dtype)
    grown[: len(array)] = array
    return grown
