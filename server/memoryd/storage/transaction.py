"""The handle services hold while storage lends them the database: one open transaction.

The writer lends its connection inside a write transaction, a reader inside a read
transaction. Services pass the handle on to storage's repository functions and never use it
themselves: no SQL is written outside `storage/` (`tests/server/test_layers.py` keeps it so), so the
methods below are the ones those repository functions need. SQLite's is an apsw connection
that knows its engine (memoryd.storage.connection.SqliteConnection); PostgreSQL's
(memoryd.storage.postgres.transaction) has the same methods.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from memoryd.storage.engine import Engine


class Cursor(Protocol):
    """The rows of one statement: every one at once, or one at a time."""

    def fetchall(self) -> list[Any]:
        """Every row, as tuples."""
        ...

    def __iter__(self) -> Iterator[Any]:
        """The rows, one at a time."""
        ...


class Transaction(Protocol):
    """An open transaction: statements run in it and commit, or roll back, with it."""

    @property
    def engine(self) -> Engine:
        """The backend's SQL and abilities (memoryd.storage.engine)."""
        ...

    def begin_write(self) -> None:
        """Open a write transaction that takes the write order at once: a second writer waits
        here rather than failing later (SQLite's BEGIN IMMEDIATE; PostgreSQL's ordered BEGIN)."""
        ...

    def execute(self, statements: str, bindings: Any = None, /) -> Cursor:
        """Run statements with their parameters; the cursor yields the rows."""
        ...

    def executemany(self, statements: str, sequenceofbindings: Iterable[Any], /) -> Cursor:
        """Run one statement once per set of parameters."""
        ...

    def changes(self) -> int:
        """How many rows the last statement inserted, updated or deleted."""
        ...

    def last_insert_rowid(self) -> int:
        """The rowid of the last row inserted."""
        ...
