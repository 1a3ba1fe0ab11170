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


PAGE = 8192
LP_NORMAL = 1


def heap_tuples(data: bytes) -> list[bytes]:
    """Every tuple stored in a PostgreSQL table's pages (the bytes of its file): each page's
    line pointers (4 bytes each, from byte 24 to pd_lower: offset 15 bits, flags 2, length
    15) that point at storage, as pageinspect's heap_page_items would show them. A page's free
    space may keep old bytes: they belong to no row."""
    tuples = []
    for start in range(0, len(data) - PAGE + 1, PAGE):
        page = data[start : start + PAGE]
        lower = int.from_bytes(page[12:14], "little")
        for pointer in range(24, lower, 4):
            item = int.from_bytes(page[pointer : pointer + 4], "little")
            offset, flags, length = item & 0x7FFF, (item >> 15) & 0x3, item >> 17
            if flags == LP_NORMAL:
                tuples.append(page[offset : offset + length])
    return tuples
