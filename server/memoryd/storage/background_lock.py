"""Which process does the background work that must happen once per store.

Several memoryd processes may share one store (a supervisor's workers on one machine, replicas
over one PostgreSQL). The embedding of new messages and rows must run in one of them: each
vector computed once, in commit order of its cursor. That process holds this lock; the others
try again every few seconds, so when it dies (its lock goes with it) another takes over.

On SQLite, an flock on a file in the data directory (released by the kernel when the process
dies). On PostgreSQL, a session advisory lock on a connection of its own (released by the
server when the connection ends). Work whose every item is claimed in the database (reviews)
needs no such lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from memoryd.data_directory import BACKGROUND_LOCK_FILE
from memoryd.storage.connection import ConnectionSettings
from memoryd.storage.errors import TRANSIENT_ERRORS
from memoryd.storage.postgres.settings import PostgresSettings

if TYPE_CHECKING:
    from memoryd.storage.postgres.transaction import PostgresTransaction

# PostgreSQL's advisory lock key: "memoryd" and 2.
ADVISORY_KEY = 0x6D656D6F72796402


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


class AdvisoryLock:
    """A session advisory lock on a PostgreSQL connection of its own. Asked again while held, it
    checks that the connection (and so the lock) is still there."""

    def __init__(self, settings: PostgresSettings) -> None:
        self._settings = settings
        self._connection: PostgresTransaction | None = None

    def try_take(self) -> bool:
        from memoryd.storage.postgres import database as postgres  # noqa: PLC0415

        if self._connection is not None:
            try:
                self._connection.execute("SELECT 1").fetchall()
            except TRANSIENT_ERRORS:
                self.release()  # the connection went, and the lock with it
            else:
                return True
        try:
            connection = postgres.connect(self._settings)
        except TRANSIENT_ERRORS:
            return False  # PostgreSQL is away: the next attempt tries again
        try:
            taken = connection.execute(
                "SELECT pg_try_advisory_lock(?)", (ADVISORY_KEY,)
            ).fetchall()[0][0]
        except TRANSIENT_ERRORS:
            taken = False
        if not taken:
            with contextlib.suppress(*TRANSIENT_ERRORS):
                connection.close()
            return False
        self._connection = connection
        return True

    def release(self) -> None:
        if self._connection is not None:
            with contextlib.suppress(*TRANSIENT_ERRORS):
                self._connection.close()
            self._connection = None


def background_lock(settings: ConnectionSettings | PostgresSettings) -> BackgroundLock:
    """The lock for the store `settings` name."""
    if isinstance(settings, PostgresSettings):
        return AdvisoryLock(settings)
    return FileLock(settings.path.parent)
