"""Which process does the background work that must happen once per store.

Several memoryd processes may share one store (a supervisor's workers on one machine, replicas
over one PostgreSQL). The embedding of new messages and rows must run in one of them: each
vector computed once, in commit order of its cursor. That process holds this lock; the others
try again every few seconds, so when it dies (its lock goes with it) another takes over.

On SQLite, an flock on a file in the data directory (released by the kernel when the process
dies). On PostgreSQL, a session advisory lock on a connection of its own (released by the
server when the connection ends: memoryd.storage.postgres.advisory_lock). Work whose every
item is claimed in the database (reviews) needs no such lock.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from memoryd.data_directory import BACKGROUND_LOCK_FILE
from memoryd.storage.engine import engine_for

if TYPE_CHECKING:
    from memoryd.storage.location import DatabaseLocation


class BackgroundLock(Protocol):
    """Taken by one process of all that share the store."""

    def try_take(self) -> bool:
        """Whether this process holds the lock now (taking it when free); never waits."""
        ...

    def release(self) -> None:
        """Give it up (at stop)."""
        ...


class FileLock:
    """An flock on BACKGROUND_LOCK_FILE beside the SQLite database."""

    def __init__(self, folder: Path) -> None:
        self._path = folder / BACKGROUND_LOCK_FILE
        self._fd: int | None = None

    def try_take(self) -> bool:
        if self._fd is not None:
            return True
        descriptor = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            return False
        self._fd = descriptor
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def background_lock(settings: DatabaseLocation) -> BackgroundLock:
    """The lock for the store `settings` name (its engine's)."""
    return engine_for(settings).background_lock(settings)
