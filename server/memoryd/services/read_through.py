"""A bounded read-through cache that a concurrent write can never leave stale.

Writers call `put` or `invalidate` after their commit (from the writer thread, in commit
order). Readers that miss call `begin` before reading the database and `fill` afterwards; the
fill is dropped if any write reached the cache in between, because the value read may predate
it. Simple and conservative: under heavy writes some fills are dropped, never a stale value
kept.
"""

from __future__ import annotations

import collections
import threading
from typing import Generic, TypeVar

from memoryd.observability import metrics

K = TypeVar("K")
V = TypeVar("V")


class ReadThroughCache(Generic[K, V]):
    """An LRU map of at most `capacity` entries, safe across threads; `name` labels its hits
    and misses in the metrics."""

    def __init__(self, capacity: int, name: str) -> None:
        self._capacity = capacity
        self._hits = metrics.CACHE.labels(name, "hit")
        self._misses = metrics.CACHE.labels(name, "miss")
        self._entries: collections.OrderedDict[K, V] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._writes = 0
        self._closed = False

    def get(self, key: K) -> V | None:
        """The cached value, or None."""
        with self._lock:
            value = self._entries.get(key)
            if value is None:
                self._misses.inc()
                return None
            self._entries.move_to_end(key)
        self._hits.inc()
        return value

    def begin(self) -> int:
        """Before reading the database on a miss: a token for `fill`."""
        with self._lock:
            return self._writes

    def fill(self, key: K, value: V, token: int) -> None:
        """Cache what a miss read, unless a write happened since `begin`."""
        with self._lock:
            if self._writes == token:
                self._store(key, value)

    def put(self, key: K, value: V) -> None:
        """A committed value (writer thread, after commit); while held closed, the key is
        forgotten instead."""
        with self._lock:
            self._writes += 1
            if self._closed:
                self._entries.pop(key, None)
            else:
                self._store(key, value)

    def invalidate(self, key: K) -> None:
        """Forget a key whose value changed (writer thread, after commit)."""
        with self._lock:
            self._writes += 1
            self._entries.pop(key, None)

    def hold(self, *, closed: bool) -> None:
        """Refuse puts while closed (memoryd.services.coherence)."""
        with self._lock:
            self._closed = closed

    def clear(self) -> None:
        """Forget everything (another process wrote: memoryd.services.coherence); fills in
        flight are dropped."""
        with self._lock:
            self._writes += 1
            self._entries.clear()

    def _store(self, key: K, value: V) -> None:
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self._capacity:
            self._entries.popitem(last=False)
