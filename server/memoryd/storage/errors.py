"""Where the database's errors become memoryd's: only storage sees apsw and psycopg exceptions.

One table says which of SQLite's and PostgreSQL's failures are transient (the same call may
succeed later) and what each means to a caller; reads and writes both answer those with
Unavailable. The writer (memoryd.storage.writer) retries them before giving up; a read gives up
at once. Anything else is a defect and stays as it is: the api layer turns it into INTERNAL
without showing its text.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence

import apsw

from memoryd.errors import Unavailable

# SQLite's transient failures, and what each means.
TRANSIENT: dict[type[Exception], str] = {
    apsw.BusyError: "the database is busy",
    apsw.LockedError: "the database is locked",
    apsw.IOError: "the disk failed (I/O error)",
    apsw.FullError: "the disk is full",
}
# A value the database refused: a constraint (a unique key, a foreign key, a check) or, on
# PostgreSQL, a value its column's type cannot hold (SQLite's STRICT tables count that as a
# constraint).
CONSTRAINT_ERRORS: tuple[type[Exception], ...] = (apsw.ConstraintError,)

try:  # PostgreSQL's, when its driver is installed (the "postgres" extra)
    import psycopg
    from psycopg import errors as pg
except ImportError:  # pragma: no cover - the extra is part of every test environment
    pass
else:
    TRANSIENT.update(
        {
            pg.SerializationFailure: "the database is busy (a conflicting transaction)",
            pg.DeadlockDetected: "the database is busy (a deadlock was broken)",
            pg.LockNotAvailable: "the database is locked",
            pg.QueryCanceled: "the database cancelled the statement (statement_timeout)",
            pg.DiskFull: "the database's disk is full",
            pg.AdminShutdown: "PostgreSQL is shutting down",
            pg.CannotConnectNow: "PostgreSQL is starting up",
            psycopg.OperationalError: "PostgreSQL is unreachable",
            psycopg.InterfaceError: "the connection to PostgreSQL was lost",
        }
    )
    CONSTRAINT_ERRORS += (psycopg.errors.IntegrityError, psycopg.errors.DataError)
TRANSIENT_ERRORS = tuple(TRANSIENT)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def constraint_violated(error: Exception) -> str:
    """Which kind of constraint a CONSTRAINT_ERRORS error broke, in the same words on both
    backends: "unique", "foreign key", "not null", "check", or "other"."""
    text = str(error)
    sqlstate = getattr(error, "sqlstate", None) or ""
    for words, code, marker in (
        ("unique", "23505", "UNIQUE"),
        ("foreign key", "23503", "FOREIGN KEY"),
        ("not null", "23502", "NOT NULL"),
        ("check", "23514", "CHECK"),
    ):
        if sqlstate == code or marker in text:
            return words
    return "other"


def broken_check(error: Exception, table: str, columns: Sequence[str]) -> str | None:
    """The column of `table` whose CHECK constraint `error` broke, on both backends; None when
    the error does not say. PostgreSQL names a column's check `<table>_<column>_check`; SQLite
    quotes the check's expression, whose first column of the table is the one."""
    name = getattr(getattr(error, "diag", None), "constraint_name", None)
    if name:
        column = str(name).removeprefix(f"{table}_").removesuffix("_check")
        return column if column in columns else None
    _, found, expression = str(error).partition("CHECK constraint failed: ")
    if not found:
        return None
    return next((word for word in _IDENTIFIER.findall(expression) if word in columns), None)


def unavailable(error: BaseException, *, doing: str) -> Unavailable:
    """The Unavailable a transient failure gives the caller; `doing` says what did not happen."""
    meaning = next(
        (text for kind, text in TRANSIENT.items() if isinstance(error, kind)),
        "the database is unavailable",
    )
    return Unavailable(f"{meaning} ({type(error).__name__}); {doing}, retry later")


@contextlib.contextmanager
def translate_read_errors() -> Iterator[None]:
    """A read that fails transiently answers Unavailable."""
    try:
        yield
    except TRANSIENT_ERRORS as error:
        raise unavailable(error, doing="nothing was read") from error
