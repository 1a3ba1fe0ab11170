"""Where SQLite's errors become memoryd's: only storage sees apsw exceptions.

    apsw.BusyError, LockedError, IOError, FullError  -> Unavailable   (transient)

Reads are translated here. Writes are translated by the writer (memoryd.storage.writer), which
retries transient failures before giving up with Unavailable. Anything else is a defect and stays
as it is; the api layer turns it into INTERNAL without showing its text to the caller.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import apsw

from memoryd.errors import Unavailable


@contextlib.contextmanager
def translate_read_errors() -> Iterator[None]:
    """Reads fail transiently when the database is locked or the disk misbehaves."""
    try:
        yield
    except (apsw.BusyError, apsw.LockedError) as error:
        raise Unavailable(f"the database is busy ({type(error).__name__}); retry later") from error
    except apsw.IOError as error:
        raise Unavailable("the database could not be read (I/O error); retry later") from error
