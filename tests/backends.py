"""Which backend the suite runs on (MEMORYD_TEST_BACKEND), and SQL against a server's own
database on PostgreSQL, for tests that check what the database itself holds."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from memoryd.testing import postgres


def on_postgres() -> bool:
    """Whether this run's servers keep their data in PostgreSQL."""
    return os.environ.get("MEMORYD_TEST_BACKEND", "sqlite") == "postgres"


def postgres_rows(home: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The rows of `sql` run on the PostgreSQL database of the server of `home`."""
    import psycopg  # noqa: PLC0415 - only runs on PostgreSQL import it

    dsn = postgres.environment_for(home)["MEMORYD_STORAGE_DSN"]
    with psycopg.connect(dsn, autocommit=True) as connection:
        return connection.execute(sql, params).fetchall()
