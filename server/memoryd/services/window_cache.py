"""The hot cache of recent conversation windows (the reference's ConversationStore).

Bounded twice: at most `max_conversations` conversations (least recently used evicted), and per
conversation the newest `per_conversation` messages of its window. Write-through: the writer
thread applies committed rows right after each commit (never before), clear and purge drop the
entry, and every miss loads from SQLite.

A load races with writes: a reader may take its snapshot, a write commits and is applied (to no
entry), then the now-stale load is inserted. So loads register first; any write to the same
conversation while a load is in flight marks it stale, and a stale load is not inserted.
"""

from __future__ import annotations

import collections
import dataclasses
import threading

from memoryd.domain.conversation import ConversationKey
from memoryd.domain.messages import StoredMessage
from memoryd.observability import metrics


@dataclasses.dataclass(slots=True)
class CachedWindow:
    """The newest messages of one conversation's window, oldest first."""

    window_start_id: int
    messages: list[StoredMessage]
    # True when `messages` is the whole window (no older message of the window is missing).
    complete: bool


@dataclasses.dataclass(slots=True)
class _PendingLoad:
    count: int = 0
    stale: bool = False


class WindowCache:
    """Thread-safe: read on the event loop, written by the writer thread after commits."""

    def __init__(
        self, *, max_conversations: int, per_conversation: int, window_cap: int | None
    ) -> None:
        self._max_conversations = max_conversations
        # A capped window never holds more than its cap, so the cap bounds the entry too.
        self._capacity = (
            per_conversation if window_cap is None else min(per_conversation, window_cap)
        )
        # With a cap the cache can hold, every entry is the whole window by construction.
        self._cap_fits = window_cap is not None and window_cap <= per_conversation
        self._entries: collections.OrderedDict[ConversationKey, CachedWindow] = (
            collections.OrderedDict()
        )
        self._pending: dict[ConversationKey, _PendingLoad] = {}
        self._lock = threading.Lock()
        self._hits = metrics.CACHE.labels("windows", "hit")
        self._misses = metrics.CACHE.labels("windows", "miss")

    @property
    def capacity(self) -> int:
        """The most messages kept per conversation."""
        return self._capacity

    def get(self, key: ConversationKey) -> CachedWindow | None:
        """The cached window, or None on a miss. The returned object must not be mutated."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self._misses.inc()
                return None
            self._entries.move_to_end(key)
            found = CachedWindow(entry.window_start_id, list(entry.messages), entry.complete)
        self._hits.inc()
        return found

    def begin_load(self, key: ConversationKey) -> None:
        """Announce a load from SQLite, before its snapshot is taken."""
        with self._lock:
            self._pending.setdefault(key, _PendingLoad()).count += 1

    def finish_load(self, key: ConversationKey, loaded: CachedWindow | None) -> None:
        """Insert a loaded window unless a write made it stale meanwhile (None: nothing to add)."""
        with self._lock:
            pending = self._pending[key]
            pending.count -= 1
            stale = pending.stale
            if pending.count == 0:
                del self._pending[key]
            if stale or loaded is None or key in self._entries:
                return
            loaded.complete = loaded.complete or self._cap_fits
            self._entries[key] = loaded
            while len(self._entries) > self._max_conversations:
                self._entries.popitem(last=False)

    def append(self, key: ConversationKey, messages: list[StoredMessage]) -> None:
        """Write-through of committed rows (called in commit order by the writer thread)."""
        with self._lock:
            self._mark_stale(key)
            entry = self._entries.get(key)
            if entry is None or not messages:
                return
            newest = entry.messages[-1].id if entry.messages else entry.window_start_id
            entry.messages.extend(message for message in messages if message.id > newest)
            overflow = len(entry.messages) - self._capacity
            if overflow > 0:
                del entry.messages[:overflow]
                entry.complete = self._cap_fits

    def invalidate(self, key: ConversationKey) -> None:
        """Drop a conversation (its window moved, or it was purged)."""
        with self._lock:
            self._mark_stale(key)
            self._entries.pop(key, None)

    def clear(self) -> None:
        """Drop every conversation (another process wrote: memoryd.services.coherence); loads
        in flight are stale."""
        with self._lock:
            self._entries.clear()
            for pending in self._pending.values():
                pending.stale = True

    def hold(self, *, closed: bool) -> None:
        """Nothing to refuse: after `clear`, appends only extend entries there are, and there
        are none (memoryd.services.coherence)."""

    def _mark_stale(self, key: ConversationKey) -> None:
        pending = self._pending.get(key)
        if pending is not None:
            pending.stale = True
