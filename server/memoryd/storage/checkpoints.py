"""SQLite's WAL checkpoints, off the commit path.

SQLite checkpoints the WAL (copies its pages into the database file, then syncs the file) in the
connection whose commit took the WAL past its mark (1,000 pages), inside that commit: on the
writer's thread, so every caller of that group, and every job queued behind it, waited for
megabytes to be copied and synced. Under 50 transcript streams (1,000 finals a second) that was
one group in a few hundred; without it the writer's p99 group time fell from 7.2 to 2.9 ms
(bench/transcript_latency.py, embeddings off).

Here the writer's connection only notes the WAL's size after each commit (a WAL hook, which
takes the place of SQLite's automatic checkpoint), and a thread with a connection of its own
runs a PASSIVE checkpoint once the WAL has reached CHECKPOINT_PAGES: it copies what no reader
still needs while the writer goes on appending, and never waits for a lock. Once a checkpoint
has copied the whole WAL, the next write starts the WAL over. A writer that never pauses can
keep a checkpoint from ever copying the whole WAL, so past LIMIT_PAGES the commit that reaches
it checkpoints itself, as SQLite would have at its mark: the thread has copied most of the WAL
by then, so that one copies what is left, and the WAL starts over. A checkpoint that fails is
logged, and tried again after the next commit past the mark. Nothing about durability changes:
a commit is durable in the WAL before any checkpoint.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import apsw

from memoryd.log_events import Event

log = logging.getLogger("memoryd.storage.checkpoints")

# SQLite's own mark (wal_autocheckpoint's default): pages of the WAL after which it is copied
# into the database file.
CHECKPOINT_PAGES = 1000
# Pages after which a commit checkpoints itself (the WAL starts over; see the module docstring).
LIMIT_PAGES = 4 * CHECKPOINT_PAGES


class Checkpointer:
    """Checkpoints the WAL of the connections it watches, on a thread of its own."""

    def __init__(
        self,
        connect: Callable[[], apsw.Connection],
        *,
        pages: int = CHECKPOINT_PAGES,
        limit: int = LIMIT_PAGES,
    ) -> None:
        self._connect = connect
        self._pages = pages
        self._limit = limit
        self._due = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="memoryd-checkpoint", daemon=True)
        # Checkpoints the thread ran, and the last one's (WAL frames, frames copied).
        self.checkpoints = 0
        self.last: tuple[int, int] = (0, 0)
        # Checkpoints run in a commit that took the WAL past the limit.
        self.in_commits = 0

    def watch(self, connection: apsw.Connection) -> None:
        """Take over `connection`'s checkpoints: its commits no longer run one."""
        connection.set_wal_hook(self._committed)

    def start(self) -> None:
        """Start the thread; it opens its connection at the first checkpoint."""
        self._thread.start()

    def close(self) -> None:
        """Stop the thread (after a checkpoint it is running) and close its connection."""
        self._stopping = True
        self._due.set()
        if self._thread.is_alive():
            self._thread.join()

    def _committed(self, connection: apsw.Connection, database: str, pages: int) -> int:
        """The WAL hook, on the committing thread: wake the checkpointer past the mark, or
        checkpoint here past the limit (the commit is durable already: this never fails it)."""
        if pages >= self._limit:
            try:
                connection.wal_checkpoint(database, apsw.SQLITE_CHECKPOINT_PASSIVE)
                self.in_commits += 1
            except apsw.Error:  # the thread's checkpoint is running: the next commit tries
                log.debug("WAL checkpoint in a commit skipped", exc_info=True)
        elif pages >= self._pages:
            self._due.set()
        return apsw.SQLITE_OK

    def _run(self) -> None:
        connection: apsw.Connection | None = None
        try:
            while True:
                self._due.wait()
                if self._stopping:
                    return
                self._due.clear()
                try:
                    if connection is None:
                        connection = self._connect()
                    self.last = connection.wal_checkpoint("main", apsw.SQLITE_CHECKPOINT_PASSIVE)
                    self.checkpoints += 1
                except apsw.BusyError:
                    # Another checkpoint is running (a commit's past the limit, an erasure's
                    # truncation): it copies the same pages.
                    log.debug("WAL checkpoint skipped: another one is running")
                except apsw.Error as error:
                    log.warning(
                        "WAL checkpoint failed; tried again after the next commit: %s",
                        error,
                        extra={"event": Event.WAL_CHECKPOINT_FAILED},
                    )
        finally:
            if connection is not None:
                connection.close()
