"""The database as the rest of memoryd opens it: start-up, private connections, snapshots.

`Database.open` opens the one read-write connection and migrates. Until the writer takes that
connection over, start-up recovery (clearing stale claims, finishing erasures, rewriting prompt
files) runs on it directly: `autocommit` for statements that commit alone, `transaction()` for
a group. `writer()` then hands the connection to the writer thread, which owns it from there.

The other functions open short-lived connections of their own, away from the writer and the
reader pool: a read snapshot that an export streams from for as long as it runs, and a WAL
truncation that must not wait behind a busy timeout.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator

import apsw

from memoryd.errors import StartupError
from memoryd.storage import scrub
from memoryd.storage.changes import DatabaseChanges
from memoryd.storage.connection import (
    ConnectionSettings,
    open_connection,
    reader_policy,
    writer_policy,
)
from memoryd.storage.errors import translate_read_errors
from memoryd.storage.migrations import bundled_migrations, migrate, schema_version
from memoryd.storage.readers import ReaderPool
from memoryd.storage.transaction import Transaction
from memoryd.storage.writer import Writer, WriterSettings


@dataclasses.dataclass(slots=True)
class Database:
    """The opened, migrated database: its read-write connection, until the writer takes it."""

    settings: ConnectionSettings
    applied: list[int]
    schema_version: int
    _connection: apsw.Connection | None

    @classmethod
    def open(cls, settings: ConnectionSettings) -> Database:
        """Open (creating it) and migrate the database; StartupError when it cannot be."""
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
        """Hand the connection to the one writer (not started yet); the database is its now."""
        connection = self._owned()
        self._connection = None
        return Writer(connection, settings)

    def readers(self, threads: int) -> ReaderPool:
        """A pool of read-only connections on this database."""
        return ReaderPool(self.settings, threads)

    def changes(self) -> DatabaseChanges:
        """A watcher of commits to this database, by any connection."""
        return DatabaseChanges(self.settings)

    def close(self) -> None:
        """Close the connection, if the writer has not taken it (a start-up that failed)."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _owned(self) -> apsw.Connection:
        if self._connection is None:
            raise RuntimeError("the writer owns the database connection now")
        return self._connection


@contextlib.contextmanager
def read_snapshot(settings: ConnectionSettings) -> Iterator[Transaction]:
    """A read-only connection of its own, in one read transaction for as long as the block runs:
    every read in it sees the same committed state (an export's), and the reader pool is not
    held meanwhile."""
    connection = open_connection(settings, reader_policy(settings), read_only=True)
    try:
        with translate_read_errors():
            connection.execute("BEGIN")
            try:
                yield connection
            finally:
                connection.execute("COMMIT")
    finally:
        connection.close()


def truncate_wal(settings: ConnectionSettings) -> bool:
    """One attempt to truncate the WAL, on a connection of its own that never waits (see
    memoryd.storage.scrub.truncate_wal): False when a writer or a reader was in the way."""
    no_wait = dataclasses.replace(settings, busy_timeout_ms=0)
    connection = open_connection(no_wait, writer_policy(no_wait))
    try:
        return scrub.truncate_wal(connection)
    finally:
        connection.close()
