"""The database as the rest of memoryd opens it: start-up, private connections, snapshots.

`Database.open` opens the one read-write connection and migrates. Until the writer takes that
connection over, start-up recovery (clearing stale claims, finishing erasures, rewriting prompt
files) runs on it directly: `autocommit` for statements that commit alone, `transaction()` for
a group. `writer()` then hands the connection to the writer thread, which owns it from there.

The other functions open short-lived connections of their own, away from the writer and the
reader pool: a read snapshot that an export streams from for as long as it runs, and a WAL
truncation that must not wait behind a busy timeout.

Each function takes the settings of either backend (`DatabaseLocation`) and goes to PostgreSQL's
counterpart (memoryd.storage.postgres.database) for PostgreSQL's settings; the driver is
imported only then.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import apsw

from memoryd.config.secret_files import read_secret_file
from memoryd.config.serving_settings import StorageSettings
from memoryd.data_directory import DATABASE_FILE
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
from memoryd.storage.postgres.settings import PostgresSettings
from memoryd.storage.readers import ReaderPool
from memoryd.storage.transaction import Transaction
from memoryd.storage.write_terms import WriterSettings
from memoryd.storage.writer import Writer

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

# Where the database is: SQLite's file and policy, or PostgreSQL's connection string and policy.
DatabaseLocation = ConnectionSettings | PostgresSettings


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
    _connection: apsw.Connection | None
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
        """Hand the connection to the one writer (not started yet); the database is its now."""
        connection = self._owned()
        self._connection = None
        return Writer(connection, settings)

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

    def _owned(self) -> apsw.Connection:
        if self._connection is None:
            raise RuntimeError("the writer owns the database connection now")
        return self._connection


def store_settings(
    storage: StorageSettings, home: Path, env: Mapping[str, str]
) -> DatabaseLocation:
    """Where the configured database is: SQLite's file in the data directory, or PostgreSQL's
    connection string (from dsn, or the variable dsn_env names)."""
    if storage.backend == "postgres":
        dsn = storage.dsn or env.get(storage.dsn_env, "")
        if not dsn:
            raise StartupError(
                f"memoryd.storage.dsn_env names {storage.dsn_env}, which is not set (or empty); "
                "set it to PostgreSQL's connection string"
            )
        if storage.password_file:
            dsn = with_password(
                dsn, read_secret_file(storage.password_file, "memoryd.storage.password_file")
            )
        return PostgresSettings(
            dsn=dsn, pool_size=storage.pool_size, statement_timeout_ms=storage.statement_timeout_ms
        )
    return ConnectionSettings(
        path=home / DATABASE_FILE,
        busy_timeout_ms=storage.busy_timeout_ms,
        synchronous=storage.synchronous,
        secure_delete=storage.secure_delete,
    )


def with_password(dsn: str, password: str) -> str:
    """The connection string with this password (in place of any it had), in libpq's keyword
    form; StartupError when libpq cannot read the string."""
    from psycopg import conninfo  # noqa: PLC0415 - PostgreSQL's driver, only when it is used

    try:
        return conninfo.make_conninfo(dsn, password=password)
    except Exception:  # noqa: BLE001 - psycopg's ProgrammingError: its message quotes the string
        raise StartupError(
            "memoryd.storage.dsn (or the variable dsn_env names) cannot be read as a "
            "connection string"
        ) from None


def describe(settings: DatabaseLocation) -> str:
    """Where the database is, for messages and logs: SQLite's file, or PostgreSQL's server and
    database (never its password)."""
    if isinstance(settings, PostgresSettings):
        return settings.target
    return str(settings.path)


def open_database(settings: DatabaseLocation) -> OpenedDatabase:
    """Open and migrate the database of either backend; StartupError when it cannot be."""
    if isinstance(settings, PostgresSettings):
        try:
            from memoryd.storage.postgres import database as postgres  # noqa: PLC0415
        except ImportError as error:
            raise StartupError(
                'memoryd.storage.backend = "postgres" needs the PostgreSQL driver: '
                "pip install 'memoryd[postgres]' (psycopg 3)"
            ) from error
        return postgres.PostgresDatabase.open(settings)
    return Database.open(settings)


@contextlib.contextmanager
def read_snapshot(settings: DatabaseLocation) -> Iterator[Transaction]:
    """A read-only connection of its own, in one read transaction for as long as the block runs:
    every read in it sees the same committed state (an export's), and the reader pool is not
    held meanwhile."""
    if isinstance(settings, PostgresSettings):
        from memoryd.storage.postgres import database as postgres  # noqa: PLC0415

        with postgres.read_snapshot(settings) as transaction:
            yield transaction
        return
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


def scrub_erased(settings: DatabaseLocation) -> scrub.Scrubbed:
    """One attempt to scrub what erasures left after their commits, on a connection of its own
    that never waits. On SQLite, the WAL truncated (memoryd.storage.scrub.truncate_wal: not
    when a writer or a reader is in the way); the statistics were dropped in the erasure's own
    transaction. On PostgreSQL, a VACUUM of the erased tables, their statistics rebuilt and
    the word indexes rebuilt (not when a reader's snapshot kept it from removing every erased
    row)."""
    if isinstance(settings, PostgresSettings):
        from memoryd.storage.postgres import scrubbing  # noqa: PLC0415

        return scrubbing.vacuum(settings)
    no_wait = dataclasses.replace(settings, busy_timeout_ms=0)
    connection = open_connection(no_wait, writer_policy(no_wait))
    try:
        return scrub.Scrubbed(wal_truncated=scrub.truncate_wal(connection), statistics_rebuilt=True)
    finally:
        connection.close()
