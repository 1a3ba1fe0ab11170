"""The database as the rest of memoryd opens it: start-up, private connections, snapshots.

`Database.open` opens the one read-write connection and migrates. Until the writer takes that
connection over, start-up recovery (clearing stale claims, finishing erasures, rewriting prompt
files) runs on it directly: `autocommit` for statements that commit alone, `transaction()` for
a group. `writer()` then hands the connection to the writer thread, which owns it from there.

The other functions open short-lived connections of their own, away from the writer and the
reader pool: a read snapshot that an export streams from for as long as it runs, and a WAL
truncation that must not wait behind a busy timeout.

Each function takes the settings of either backend (`DatabaseLocation`) and goes to its engine
(memoryd.storage.engine.engine_for); PostgreSQL's driver is imported only when it is used.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

import apsw

from memoryd.errors import StartupError
from memoryd.storage import scrub
from memoryd.storage.changes import DatabaseChanges
from memoryd.storage.checkpoints import Checkpointer
from memoryd.storage.connection import (
    ConnectionSettings,
    SqliteConnection,
    checkpoint_policy,
    open_connection,
    reader_policy,
    writer_policy,
)
from memoryd.storage.engine import engine_for
from memoryd.storage.location import DatabaseLocation
from memoryd.storage.migrations import bundled_migrations, migrate, schema_version
from memoryd.storage.readers import ReaderPool
from memoryd.storage.transaction import Transaction
from memoryd.storage.write_terms import WriterSettings
from memoryd.storage.writer import Writer

if TYPE_CHECKING:
    from contextlib import AbstractContextManager


class Changes(Protocol):
    """Whether anything was committed since a stamp (DatabaseChanges, or PostgreSQL's)."""

    def stamp(self) -> int | None:
        """A count that changes with every commit; None when unknown (treat as changed)."""
        ...

    def clock(self) -> int | None:
        """The store clock's version (memoryd.storage.store_clock) when it can be read at once
        on the event loop; None when it cannot (read it on a reader thread)."""
        ...

    def close(self) -> None:
        """Release what the watcher holds."""
        ...


class OpenedDatabase(Protocol):
    """What the runtime holds of an opened, migrated database, whichever the backend."""

    @property
    def settings(self) -> DatabaseLocation:
        """Where the database is."""
        ...

    @property
    def applied(self) -> list[int]:
        """The migrations this start applied."""
        ...

    @property
    def schema_version(self) -> int:
        """The highest applied migration."""
        ...

    @property
    def vector_index(self) -> bool:
        """Whether the database indexes vectors itself (an approximate nearest-neighbour index
        that can answer for a scope too large to compare in memory)."""
        ...

    @property
    def autocommit(self) -> Transaction:
        """The connection outside any transaction: each statement commits on its own."""
        ...

    def transaction(self) -> AbstractContextManager[Transaction]:
        """One write transaction: committed when the block ends, rolled back when it raises."""
        ...

    def writer(self, settings: WriterSettings) -> Writer:
        """Hand the connection to the one writer; the database is its now."""
        ...

    def side_writer(self, settings: WriterSettings) -> Writer | None:
        """A second writer, on a connection of its own, for writes whose commits need no order
        with the others' (vectors); None where it would only wait for the first (SQLite has one
        write lock)."""
        ...

    def readers(self, threads: int) -> ReaderPool:
        """A pool of read-only connections."""
        ...

    def changes(self) -> Changes:
        """A watcher of commits."""
        ...

    def refresh_statistics(self) -> None:
        """Measure the tables again for the planner, after a bulk load (SQLite's PRAGMA
        optimize, PostgreSQL's ANALYZE: its word ranking reads the statistics too)."""
        ...

    def alone(self) -> bool:
        """Whether no other memoryd process uses the database now."""
        ...

    def close(self) -> None:
        """Close the connection, if the writer has not taken it."""
        ...


@dataclasses.dataclass(slots=True)
class Database:
    """The opened, migrated database: its read-write connection, until the writer takes it."""

    settings: ConnectionSettings
    applied: list[int]
    schema_version: int
    _connection: SqliteConnection | None
    # SQLite has no vector index: vectors are compared in memory only.
    vector_index = False

    @classmethod
    def open(cls, settings: ConnectionSettings) -> Database:
        """Open (creating it) and migrate SQLite's database; StartupError when it cannot be."""
        try:
            connection = open_connection(settings, writer_policy(settings))
        except apsw.Error as error:
            raise StartupError(f"cannot open database {settings.path}: {error}") from error
        try:
            applied = migrate(connection, bundled_migrations())
            version = schema_version(connection)
        except BaseException:
            connection.close()
            raise
        return cls(settings, applied, version, connection)

    @property
    def autocommit(self) -> Transaction:
        """The connection outside any transaction: each statement commits on its own."""
        return self._owned()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """One write transaction: committed when the block ends, rolled back when it raises."""
        connection = self._owned()
        with connection:
            yield connection

    def writer(self, settings: WriterSettings) -> Writer:
        """Hand the connection to the one writer (not started yet); the database is its now.
        Its WAL is checkpointed by a thread of its own (memoryd.storage.checkpoints), never in
        a commit."""
        connection = self._owned()
        self._connection = None
        location = self.settings
        checkpointer = Checkpointer(lambda: open_connection(location, checkpoint_policy(location)))
        checkpointer.watch(connection)
        checkpointer.start()
        return Writer(connection, settings, closed=checkpointer.close)

    def side_writer(self, settings: WriterSettings) -> Writer | None:  # noqa: ARG002
        """None: a second SQLite writer would only wait for the first's write lock."""
        return None

    def readers(self, threads: int) -> ReaderPool:
        """A pool of read-only connections on this database."""
        settings = self.settings
        return ReaderPool(
            lambda: open_connection(settings, reader_policy(settings), read_only=True), threads
        )

    def changes(self) -> DatabaseChanges:
        """A watcher of commits to this database, by any connection."""
        return DatabaseChanges(self.settings)

    def refresh_statistics(self) -> None:
        """PRAGMA optimize: ANALYZE where SQLite finds it worth it."""
        self._owned().execute("PRAGMA optimize")

    def alone(self) -> bool:
        """Always, when asked: the process that opens a SQLite database for recovery holds
        the data directory's lock, and its workers start after."""
        return True

    def close(self) -> None:
        """Close the connection, if the writer has not taken it (a start-up that failed)."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _owned(self) -> SqliteConnection:
        if self._connection is None:
            raise RuntimeError("the writer owns the database connection now")
        return self._connection


def describe(settings: DatabaseLocation) -> str:
    """Where the database is, for messages and logs: SQLite's file, or PostgreSQL's server and
    database (never its password)."""
    return engine_for(settings).describe(settings)


def open_database(settings: DatabaseLocation) -> OpenedDatabase:
    """Open and migrate the database of either backend; StartupError when it cannot be."""
    return engine_for(settings).open(settings)


def read_snapshot(settings: DatabaseLocation) -> AbstractContextManager[Transaction]:
    """A read-only connection of its own, in one read transaction for as long as the block runs:
    every read in it sees the same committed state (an export's), and the reader pool is not
    held meanwhile."""
    return engine_for(settings).read_snapshot(settings)


def scrub_erased(settings: DatabaseLocation) -> scrub.Scrubbed:
    """One attempt to scrub what erasures left after their commits, on a connection of its own
    that never waits. On SQLite, the WAL truncated (memoryd.storage.scrub.truncate_wal: not
    when a writer or a reader is in the way); the statistics were dropped in the erasure's own
    transaction. On PostgreSQL, a VACUUM of the erased tables, their statistics rebuilt and
    the word indexes rebuilt (not when a reader's snapshot kept it from removing every erased
    row)."""
    return engine_for(settings).scrub_erased(settings)
