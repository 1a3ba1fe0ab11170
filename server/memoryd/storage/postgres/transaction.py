"""A PostgreSQL connection as storage's `Transaction`: the same four methods an apsw connection
has, on one psycopg connection in autocommit mode (storage opens and ends its transactions with
BEGIN and COMMIT, as on SQLite).

Statements' parameter markers are psycopg's (memoryd.storage.postgres.paramstyle); values are
passed as SQLite would take them: a bool is an integer, as SQLite stores it. Text holding
U+0000 is refused with INVALID_ARGUMENT: PostgreSQL's text cannot hold it.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import psycopg
from psycopg.adapt import Loader

from memoryd.errors import InvalidArgument, Unavailable
from memoryd.storage.postgres import errors as _driver_errors  # noqa: F401 - storage learns them
from memoryd.storage.postgres.engine import POSTGRES, PostgresEngine
from memoryd.storage.postgres.paramstyle import format_style


class _Numeric(Loader):
    """numeric (what sum() of integers gives) as an int when whole, else a float, as SQLite."""

    def load(self, data: Any) -> int | float:
        value = decimal.Decimal(bytes(data).decode())
        return int(value) if value == value.to_integral_value() else float(value)


COMMIT_UNKNOWN = (
    "PostgreSQL went away while this write was committing, and cannot say whether it was: "
    "retry it (with the same client_message_id, an append is stored once)"
)
NUL_REFUSED = (
    "the text contains U+0000 (NUL), which PostgreSQL cannot store; remove it "
    "(SQLite stores it: the backends differ here)"
)


def _value(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, str) and "\x00" in value:
        raise InvalidArgument(NUL_REFUSED)
    return value


def _bindings(bindings: Any) -> Any:
    if bindings is None:
        return None
    if isinstance(bindings, Mapping):
        return {name: _value(value) for name, value in bindings.items()}
    return [_value(value) for value in bindings]


class Cursor:
    """The rows of one statement, as apsw's cursor gives them (tuples)."""

    __slots__ = ("_cursor",)

    def __init__(self, cursor: psycopg.Cursor[Any] | None) -> None:
        """None: a statement known to have no rows."""
        self._cursor = cursor

    def fetchall(self) -> list[Any]:
        """Every row (none for a statement without a result)."""
        if self._cursor is None or self._cursor.description is None:
            return []
        return self._cursor.fetchall()

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


class PostgresTransaction:
    """One psycopg connection, used through storage's Transaction methods.

    When PostgreSQL dropped the connection, the next BEGIN opens a new one with `reopen` (a
    transaction cannot survive its connection; the caller's attempt already failed).
    """

    engine: PostgresEngine = POSTGRES

    def __init__(
        self,
        connection: psycopg.Connection[Any],
        reopen: Callable[[], PostgresTransaction] | None = None,
        ordered_by: int | None = None,
    ) -> None:
        """`ordered_by`: an advisory lock every write transaction (`begin_write`) takes
        first, so that the writers of every process commit one after another."""
        connection.adapters.register_loader("numeric", _Numeric)
        self.connection = connection
        # Which database this is (its connection string without the password), read once:
        # psycopg builds it anew on every ask.
        self.database = connection.info.dsn
        self._reopen = reopen
        self._changes = 0
        self._ordered_by = ordered_by
        # The open write transaction's id, while one is open on an ordered connection.
        self._xid: str | None = None

    def reopen_with(self, reopen: Callable[[], PostgresTransaction]) -> None:
        """Open the connection again with `reopen` from now on (the writer's takes its lock)."""
        self._reopen = reopen

    @property
    def usable(self) -> bool:
        """Whether the connection is still open and working."""
        return not (self.connection.closed or self.connection.broken)

    def execute(self, statements: str, bindings: Any = None, /) -> Cursor:
        """Run a statement (or, without parameters, several separated by `;`)."""
        if statements.startswith("BEGIN"):
            self._reopen_if_broken()
        if self._xid is not None and statements == "COMMIT":
            return self._commit_known()
        sql = format_style(statements, parameters=bindings is not None)
        try:
            cursor = self.connection.execute(sql, _bindings(bindings))
        except psycopg.errors.UntranslatableCharacter:  # U+0000 inside a JSON parameter
            raise InvalidArgument(NUL_REFUSED) from None
        self._changes = max(cursor.rowcount, 0)
        return Cursor(cursor)

    def begin_write(self) -> None:
        """BEGIN; on an ordered connection (every process's writer), wait for the write order
        lock first: PostgreSQL's row locks do the rest of what SQLite's write lock did."""
        if self._ordered_by is None:
            self.execute("BEGIN")
        else:
            self._reopen_if_broken()
            self._begin_ordered(self._ordered_by)

    def _reopen_if_broken(self) -> None:
        if not self.usable and self._reopen is not None:
            self.connection = self._reopen().connection

    def _begin_ordered(self, lock: int) -> Cursor:
        """BEGIN, wait for the write order lock, and note the transaction's id (for
        `_commit_known`)."""
        cursor = self.connection.execute(
            f"BEGIN; SELECT pg_advisory_xact_lock({lock}), pg_current_xact_id()"
        )
        cursor.nextset()
        row = cursor.fetchone()
        self._xid = str(row[1]) if row else None
        return Cursor(cursor)

    def _commit_known(self) -> Cursor:
        """COMMIT; when the connection fails during it (PostgreSQL restarted, the backend was
        ended), the commit may or may not have happened: ask PostgreSQL on a new connection
        (pg_xact_status). Committed: as if COMMIT had answered. Aborted: the failure stands, and
        the writer runs the group again. Unknown (PostgreSQL is away): an
        Unavailable, which the writer does not retry: running the group again could store it
        twice."""
        xid, self._xid = self._xid, None
        try:
            cursor = self.connection.execute("COMMIT", prepare=False)
        except (psycopg.OperationalError, psycopg.InterfaceError) as error:
            if not self.connection.broken and not self.connection.closed:
                raise  # PostgreSQL answered: the transaction did not commit
            status = self._status_of(xid)
            if status == "committed":
                return Cursor(None)
            if status is None:
                raise Unavailable(COMMIT_UNKNOWN) from error
            raise
        return Cursor(cursor)

    def _status_of(self, xid: str | None) -> str | None:
        """pg_xact_status of `xid` on a new connection (None when there is none to be had)."""
        if xid is None or self._reopen is None:
            return None
        try:
            other = self._reopen()
        except psycopg.Error:
            return None
        try:
            row = other.connection.execute("SELECT pg_xact_status(%s)", (xid,)).fetchone()
        except psycopg.Error:
            return None
        finally:
            other.close()
        return str(row[0]) if row and row[0] is not None else None

    def executemany(self, statements: str, sequenceofbindings: Iterable[Any], /) -> Cursor:
        """Run one statement once per set of parameters."""
        cursor = self.connection.cursor()
        batches = [_bindings(bindings) for bindings in sequenceofbindings]
        cursor.executemany(format_style(statements), batches)
        self._changes = max(cursor.rowcount, 0)
        return Cursor(cursor)

    def changes(self) -> int:
        """How many rows the last statement inserted, updated or deleted."""
        return self._changes

    def last_insert_rowid(self) -> int:
        """The id the last insert of this connection drew (its sequence's last value). The ids
        of one INSERT ... SELECT are consecutive because no other connection inserts meanwhile:
        every process's writer takes the write order lock in its transaction
        (memoryd.storage.postgres.database)."""
        row = self.connection.execute("SELECT lastval()").fetchone()
        return int(row[0]) if row else 0

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open on the connection."""
        if not self.usable:
            return False
        status = self.connection.info.transaction_status
        return status != psycopg.pq.TransactionStatus.IDLE

    def close(self) -> None:
        """Close the connection."""
        self.connection.close()
