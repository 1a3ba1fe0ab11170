"""A queue of writers, for the writers of several processes on one SQLite database.

SQLite lets one transaction write at a time; a writer that finds the database locked waits in
SQLite's busy handler, which sleeps 1, 2, 5, 10, 15 ms... between tries: a group that waited
once has lost milliseconds after the lock was free. The writers of a supervisor's workers take
an flock around each group's transaction instead: the kernel queues the waiters and wakes one
the moment the lock is released. (PostgreSQL's writers queue on an advisory lock in their
transactions: memoryd.storage.postgres.database.)
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from types import TracebackType

from memoryd.data_directory import WRITE_LOCK_FILE


class WriteQueue:
    """A context manager: an exclusive flock on WRITE_LOCK_FILE in `folder` while inside."""

    def __init__(self, folder: Path) -> None:
        self._fd = os.open(folder / WRITE_LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)

    def __enter__(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Close the lock file."""
        os.close(self._fd)
