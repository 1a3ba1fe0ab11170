"""What every SQL module shares: query helpers, column lists read by name, conversation filters,
and savepoints."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from memoryd.storage.transaction import Transaction

Row = tuple[Any, ...]
KEY_COLUMNS = ("agent_id", "owner_id", "channel", "chat_id", "thread_scope")
# A message alias `m` restricted to one conversation (five parameters, in KEY_COLUMNS order).
KEY_MATCH = " AND ".join(f"m.{column} = ?" for column in KEY_COLUMNS)
# The conversations row of one conversation (five parameters).
CONVERSATION_MATCH = "(agent_id, owner_id, channel, chat_id, thread_scope) = (?, ?, ?, ?, ?)"


def rows(connection: Transaction, sql: str, params: Sequence[Any] = ()) -> list[Row]:
    """Every row of a statement."""
    found: list[Row] = connection.execute(sql, params).fetchall()
    return found


def one(connection: Transaction, sql: str, params: Sequence[Any] = ()) -> Row:
    """The single row a statement always returns (an aggregate, a RETURNING of a known row)."""
    return rows(connection, sql, params)[0]


class Columns:
    """A table's select list built from one tuple of names, and its rows read by name.

    `select` qualifies each name with the query's table alias (a name that names its own, as
    in `v.revision` of a join, keeps it); `returning` is the same list for RETURNING clauses,
    which cannot name an alias. Rows are read by the bare names. Queries may select more values
    after these: `after(row, n)` is the n-th of them, counted from 0.
    """

    def __init__(self, alias: str, names: tuple[str, ...]) -> None:
        self.names = tuple(name.rpartition(".")[2] for name in names)
        self.select = ", ".join(name if "." in name else f"{alias}.{name}" for name in names)
        self.returning = ", ".join(self.names)

    def named(self, row: Row) -> dict[str, Any]:
        """The row's values by column name."""
        return dict(zip(self.names, row, strict=False))

    def after(self, row: Row, n: int) -> Any:
        """The n-th value a query selected after these columns."""
        return row[len(self.names) + n]


@contextmanager
def write_transaction(connection: Transaction) -> Iterator[Transaction]:
    """One write transaction on a connection outside any: committed when the block ends,
    rolled back when it raises. It takes the write order at once (Transaction.begin_write), so
    a second writer waits here rather than failing later."""
    connection.begin_write()
    try:
        yield connection
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


@contextmanager
def savepoint(connection: Transaction, name: str) -> Iterator[None]:
    """A nested transaction: released when the block ends, rolled back to when it raises.

    Inside a write transaction, one failing step undoes only its own changes; the exception
    goes on to the caller, which decides whether the transaction continues.
    """
    connection.execute(f"SAVEPOINT {name}")
    try:
        yield
    except BaseException:
        connection.execute(f"ROLLBACK TO {name}; RELEASE {name}")
        raise
    connection.execute(f"RELEASE {name}")


def placeholders(count: int) -> str:
    """`?, ?, ...`: `count` parameters of an IN list."""
    return ", ".join("?" * count)


def add_kinds(sql: list[str], params: list[Any], kinds: tuple[str, ...]) -> None:
    """Narrow a query of messages (alias m) to these kinds, when any are given."""
    if kinds:
        sql.append(f"AND m.kind IN ({placeholders(len(kinds))})")
        params.extend(kinds)
