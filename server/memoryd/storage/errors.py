"""Where the database's errors become memoryd's: only storage sees apsw and psycopg exceptions.

One table says which of SQLite's failures are transient (the same call may succeed later) and
what each means to a caller; PostgreSQL's driver adds its own when it loads
(memoryd.storage.postgres.errors); reads and writes both answer those with
Unavailable. The writer (memoryd.storage.writer) retries them before giving up; a read gives up
at once. Anything else is a defect and stays as it is: the api layer turns it into INTERNAL
without showing its text.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping, Sequence

import apsw

from memoryd.errors import Unavailable

# The transient failures of the engines in use, and what each means: SQLite's, and another
# engine's once its driver is loaded (`recognise`). Read where a failure is caught, as
# `errors.TRANSIENT_ERRORS`: a name imported from here would not see an engine's added later.
TRANSIENT: dict[type[Exception], str] = {
    apsw.BusyError: "the database is busy",
    apsw.LockedError: "the database is locked",
    apsw.IOError: "the disk failed (I/O error)",
    apsw.FullError: "the disk is full",
}
TRANSIENT_ERRORS = tuple(TRANSIENT)
# A value the database refused: a constraint (a unique key, a foreign key, a check) or, on
# PostgreSQL, a value its column's type cannot hold (SQLite's STRICT tables count that as a
# constraint).
CONSTRAINT_ERRORS: tuple[type[Exception], ...] = (apsw.ConstraintError,)


def recognise(
    transient: Mapping[type[Exception], str], constraint: tuple[type[Exception], ...]
) -> None:
    """Add an engine's driver's failures to the tables: its module calls this when it loads, so
    SQLite's servers never import PostgreSQL's driver (a tenth of a second at every start)."""
    global TRANSIENT_ERRORS, CONSTRAINT_ERRORS  # noqa: PLW0603 - extended once, by an engine
    TRANSIENT.update(transient)
    TRANSIENT_ERRORS = tuple(TRANSIENT)
    CONSTRAINT_ERRORS = tuple(dict.fromkeys((*CONSTRAINT_ERRORS, *constraint)))


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
    except TRANSIENT_ERRORS as error:  # read now: the engines' failures known by then
        raise unavailable(error, doing="nothing was read") from error
