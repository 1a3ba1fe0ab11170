"""PostgreSQL as memoryd's database: the same parts SQLite's Database gives the runtime.

One connection writes, owned by the group-committing writer thread, as on SQLite (it holds a
session advisory lock: a second memoryd on the same database is refused at start): a group's
statements commit in one transaction, and message ids come out in commit order, which history,
review cursors and the embedding queue rely on. The vectors have a writer of their own
(side_writer), whose transactions run beside the first's. Reads run on a pool of connections,
one per reader thread, each read in one REPEATABLE READ READ ONLY transaction: a single
snapshot, as a SQLite read transaction is.

A connection that PostgreSQL dropped (a restart, a failover, a killed backend) fails its call
with UNAVAILABLE and is opened again by the next call that needs it, without a restart of
memoryd. The connection string may carry a password: it is never logged; messages name the
server by host, port and database only.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

import psycopg

from memoryd.config.secrets import mask_quoted
from memoryd.errors import StartupError
from memoryd.storage.errors import translate_read_errors
from memoryd.storage.maintenance import Unreadable
from memoryd.storage.migrations import bundled_migrations, migrate, schema_version
from memoryd.storage.postgres.engine import POSTGRES
from memoryd.storage.postgres.settings import PostgresSettings
from memoryd.storage.postgres.transaction import PostgresTransaction
from memoryd.storage.readers import ReaderPool
from memoryd.storage.sql import write_transaction
from memoryd.storage.transaction import Transaction
from memoryd.storage.write_terms import WriterSettings
from memoryd.storage.writer import Writer

# Several memoryd processes may serve one database (a supervisor's workers, replicas on other
# machines). Their writers' groups take this lock in their transactions, one group at a time
# across every process: ids are then drawn in commit order, which windows, review cursors and
# the embedding queue read as "everything after id N", as SQLite's write lock gives.
WRITE_ORDER_LOCK = 0x6D656D6F72796401
# Held while a process migrates, so that replicas starting together migrate once.
MIGRATION_LOCK = 0x6D656D6F72796403
MINIMUM_VERSION = 170000  # PostgreSQL 17: the pg_c_utf8 collation (Unicode case folding)
READ_TRANSACTION = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
CONNECT_TIMEOUT_SECONDS = 5
# Every connection's settings: the statement timeout, times in UTC, and no JIT compilation
# (memoryd's statements are short; compiling one costs more than it saves, and PostgreSQL's
# default cost threshold sent an agent-wide search over 1,000,000 messages past it: p50 of
# SearchHistory there 10.1 -> 8.8 ms, p99 141 -> 110 ms).
OPTIONS = "-c statement_timeout={timeout} -c TimeZone=UTC -c jit=off"


def connect(
    settings: PostgresSettings, *, read_only: bool = False, ordered: bool = False
) -> PostgresTransaction:
    """A new connection in autocommit mode (storage sends BEGIN and COMMIT itself). `ordered`:
    the writer's, whose write transactions take WRITE_ORDER_LOCK."""
    connection = psycopg.connect(
        settings.dsn,
        autocommit=True,
        connect_timeout=CONNECT_TIMEOUT_SECONDS,
        application_name="memoryd-reader" if read_only else "memoryd",
        options=OPTIONS.format(timeout=settings.statement_timeout_ms),
    )
    return PostgresTransaction(
        connection,
        reopen=lambda: connect(settings, read_only=read_only, ordered=ordered),
        ordered_by=WRITE_ORDER_LOCK if ordered else None,
    )


@dataclasses.dataclass(slots=True)
class PostgresDatabase:
    """The opened, migrated PostgreSQL database: its writing connection, until the writer
    takes it."""

    settings: PostgresSettings
    applied: list[int]
    schema_version: int
    _connection: PostgresTransaction | None
    _writer: Writer | None = None
    # pgvector's HNSW index of each model's message vectors (memoryd.storage.vector_store).
    vector_index = True

    @classmethod
    def open(cls, settings: PostgresSettings) -> PostgresDatabase:
        """Connect and migrate (one process at a time); StartupError when the database
        cannot be used."""
        try:
            connection = connect(settings, ordered=True)
        except psycopg.Error as error:
            raise StartupError(f"cannot connect to {settings.target}: {_reason(error)}") from error
        connection.reopen_with(lambda: connect(settings, ordered=True))
        try:
            _check_version(connection, settings)
            connection.execute("SELECT pg_advisory_lock(?)", (MIGRATION_LOCK,)).fetchall()
            try:
                applied = migrate(connection, bundled_migrations(POSTGRES.name), settings.target)
            finally:
                connection.execute("SELECT pg_advisory_unlock(?)", (MIGRATION_LOCK,)).fetchall()
            current = schema_version(connection)
        except psycopg.Error as error:
            connection.close()
            raise StartupError(f"cannot migrate {settings.target}: {_reason(error)}") from error
        except BaseException:
            connection.close()
            raise
        return cls(settings, applied, current, connection)

    @property
    def autocommit(self) -> Transaction:
        """The connection outside any transaction: each statement commits on its own."""
        return self._owned()

    def transaction(self) -> AbstractContextManager[Transaction]:
        """One write transaction: committed when the block ends, rolled back when it raises."""
        return write_transaction(self._owned())

    def writer(self, settings: WriterSettings) -> Writer:
        """Hand the connection to the one writer (not started yet); it is the writer's now."""
        connection = self._owned()
        self._connection = None
        self._writer = Writer(connection, settings)
        return self._writer

    def side_writer(self, settings: WriterSettings) -> Writer:
        """A second group-committing writer on a connection of its own, for the vectors: an
        HNSW insert costs a millisecond or two, and in the main writer's groups every append
        waited for a batch of them. Their commits need no order with the messages' (a vector
        is stored only while its message exists, and its own seq orders the caches' loads)."""
        try:
            connection = connect(self.settings)
        except psycopg.Error as error:
            raise StartupError(
                f"cannot connect to {self.settings.target}: {_reason(error)}"
            ) from error
        return Writer(connection, settings, name="vectors")

    def readers(self, threads: int) -> ReaderPool:
        """A pool of `threads` read-only connections, each on its own thread."""
        settings = self.settings
        return ReaderPool(
            lambda: connect(settings, read_only=True),
            threads,
            begin=READ_TRANSACTION,
            usable=lambda connection: (
                isinstance(connection, PostgresTransaction) and connection.usable
            ),
        )

    def changes(self) -> WriterCommits:
        """A watcher of commits: those of this process's writer (the only one, for now)."""
        if self._writer is None:
            raise RuntimeError("the writer is made before the watcher of its commits")
        return WriterCommits(self._writer)

    def refresh_statistics(self) -> None:
        """ANALYZE every table: after a bulk load the planner, and the word ranking's idf
        (memoryd.storage.postgres.words), have statistics at once, not when autovacuum comes."""
        connection = self._owned()
        connection.execute("SET statement_timeout = 0")
        try:
            connection.execute("ANALYZE")
        finally:
            connection.execute(f"SET statement_timeout = {self.settings.statement_timeout_ms}")

    def alone(self) -> bool:
        """Whether no other memoryd process is connected to the database (each keeps its
        writer's connection open, named "memoryd")."""
        found = self._owned().execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = 'memoryd' AND pid <> pg_backend_pid()"
        )
        return int(found.fetchall()[0][0]) == 0

    def close(self) -> None:
        """Close the connection, if the writer has not taken it (a start-up that failed)."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _owned(self) -> PostgresTransaction:
        if self._connection is None:
            raise RuntimeError("the writer owns the database connection now")
        return self._connection


class WriterCommits:
    """DatabaseChanges for PostgreSQL: the count of the writer's commits, read at no cost.

    A cache stamps what it reads with the count taken before the read; any commit after that
    changes the count. One memoryd process writes to its database (the data directory's lock
    says so), so its writer sees every commit.
    """

    def __init__(self, writer: Writer) -> None:
        self._writer = writer

    def stamp(self) -> int | None:
        """The commit count now."""
        return self._writer.stats.commits

    def clock(self) -> None:
        """Never at once: the clock is a round trip away."""
        return

    def close(self) -> None:
        """Nothing to close: the count is the writer's."""


@contextlib.contextmanager
def read_snapshot(settings: PostgresSettings) -> Iterator[Transaction]:
    """A connection of its own, in one REPEATABLE READ transaction for as long as the block
    runs: every read sees the same committed state (an export's). A database that cannot be
    reached raises maintenance.Unreadable, saying why as `serve` does (never the password)."""
    try:
        connection = connect(settings, read_only=True)
    except psycopg.Error as error:
        raise Unreadable(f"{settings.target}: {_reason(error)}") from error
    try:
        with translate_read_errors():
            connection.execute(READ_TRANSACTION)
            try:
                yield connection
            finally:
                if connection.usable:
                    connection.execute("COMMIT")
    finally:
        connection.close()


def _check_version(connection: PostgresTransaction, settings: PostgresSettings) -> None:
    version = connection.connection.info.server_version
    if version < MINIMUM_VERSION:
        raise StartupError(
            f"{settings.target} runs PostgreSQL {version // 10000}; memoryd needs 17 or later"
        )


def _reason(error: psycopg.Error) -> str:
    """libpq's first line. A connection string it could not parse is quoted in the error (a
    piece of a password, perhaps): every quoted fragment but a keyword is masked then."""
    text: Any = str(error).strip().splitlines()
    reason = text[0] if text else type(error).__name__
    if isinstance(error, psycopg.ProgrammingError):
        keywords = {option.keyword.decode() for option in psycopg.pq.Conninfo.get_defaults()}
        reason = mask_quoted(reason, keep=keywords | {"="})
    return str(reason)
