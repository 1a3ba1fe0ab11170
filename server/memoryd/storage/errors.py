"""Where SQLite's errors become memoryd's: only storage sees apsw exceptions.

One table says which of SQLite's failures are transient (the same call may succeed later) and
what each means to a caller; reads and writes both answer those with Unavailable. The writer
(memoryd.storage.writer) retries them before giving up; a read gives up at once. Anything else
is a defect and stays as it is: the api layer turns it into INTERNAL without showing its text.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import apsw

from memoryd.errors import Unavailable

# SQLite's transient failures, and what each means.
TRANSIENT: dict[type[apsw.Error], str] = {
    apsw.BusyError: "the database is busy",
    apsw.LockedError: "the database is locked",
    apsw.IOError: "the disk failed (I/O error)",
    apsw.FullError: "the disk is full",
}
TRANSIENT_ERRORS = tuple(TRANSIENT)


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
