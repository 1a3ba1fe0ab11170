"""No stale read after an acknowledgement, when several processes share the store.

A process's caches (the windows of ListMessages, the prompt states of GetPromptContext, memory
rows, kept compositions) are written through by its own writer after each commit. Another
process's commits never reach them. So, where the store may be shared (a supervisor's workers,
PostgreSQL), every group of every process advances the store's clock in its transaction
(memoryd.storage.store_clock), and:

- `committed` (the writer thread, after each commit): a version right after the one the caches
  reflect is this process's own, and its hooks keep the caches current. A later one means
  another process committed in between: every cache is dropped, then the hooks run (what they
  put is as of this version). An earlier one than a read already found: the caches are dropped
  and take nothing from the hooks (what they would put may be older than that read's).
- `check` (each read that may answer from a cache, before it looks): the clock's version now. A
  version past the one the caches reflect means a commit they have not seen: every cache is
  dropped before the read looks. A write acknowledged by any process before the read was sent
  is at or before that version, so the read cannot miss it.

A fill that raced with another process's commit may still put an older value in a cache; the
next `check` finds the newer version and drops it before anything reads it. On SQLite the
version is read on the event loop from a connection of its own (microseconds); on PostgreSQL on
a reader thread (a round trip). A server alone on its SQLite database has nothing to check:
`check` returns None at once, and `stamp` SQLite's commit count (memoryd.storage.changes).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from memoryd.storage import store_clock
from memoryd.storage.database import Changes
from memoryd.storage.readers import ReaderPool
from memoryd.storage.transaction import Transaction


class Droppable(Protocol):
    """A cache that can forget everything, and refuse what is put into it for a while."""

    def clear(self) -> None:
        """Forget every entry."""
        ...

    def hold(self, *, closed: bool) -> None:
        """While closed, what is put is dropped instead of kept."""
        ...


class Coherence:
    """See the module docstring."""

    def __init__(self, *, shared: bool, changes: Changes, readers: ReaderPool) -> None:
        self.shared = shared
        self._changes = changes
        self._readers = readers
        self._caches: list[Droppable] = []
        self._lock = threading.Lock()
        self._current = -1  # nothing read yet: the first check drops nothing there is
        self.dropped = 0

    def track(self, *caches: Droppable) -> None:
        """Caches to drop when another process has committed."""
        self._caches.extend(caches)

    def advance(self, transaction: Transaction) -> int:
        """The writer's group advances the clock (memoryd.storage.write_terms.CommitClock)."""
        return store_clock.advance(transaction)

    def committed(self, version: int, publish: Callable[[], None]) -> None:
        """After a commit, in the writer thread (memoryd.storage.write_terms.CommitClock): the
        group's hooks put what it committed into the caches, unless a later version is known
        already (a read absorbed it), when what they put could be older than what a read that
        checked that version must see: the caches then take nothing from them."""
        with self._lock:
            if version < self._current:
                self._drop()
                for cache in self._caches:
                    cache.hold(closed=True)
                try:
                    publish()
                finally:
                    for cache in self._caches:
                        cache.hold(closed=False)
                return
            if version > self._current + 1:
                self._drop()  # another process committed in between: what is cached predates it
            publish()
            self._current = version

    async def stamp(self) -> int | None:
        """`check`, or alone on SQLite the commit count: a number that changes with every
        commit, for a cache that validates its entries itself (compositions)."""
        if not self.shared:
            return self._changes.stamp()
        return await self.check()

    async def check(self) -> int | None:
        """Before a read that may answer from a cache: the store's version now (caches that
        have not seen it are dropped). None, at no cost, alone on SQLite."""
        if not self.shared:
            return None
        # Read without waiting where the backend can (SQLite); else on a reader thread.
        version = self._changes.clock()
        if version is None:
            version = await self._readers.read(store_clock.read)
        if version != self._current:
            with self._lock:
                if version > self._current:
                    self._drop()
                    self._current = version
        return version

    def _drop(self) -> None:
        self.dropped += 1
        for cache in self._caches:
            cache.clear()
