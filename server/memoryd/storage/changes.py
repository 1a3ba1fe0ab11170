"""Whether anything was committed since a moment, asked on the event loop at no cost.

SQLite counts the commits other connections make (`PRAGMA data_version`). In WAL mode reading it
takes a few microseconds and only looks at the WAL index in shared memory; the connection never
waits for a lock (its busy timeout is 0: a busy database reads as "changed"), so it is safe on
the event loop. A cache stamps what it read with the count taken *before* the read; while the
count is unchanged, nothing it read has changed. (apsw's `Connection.data_version()` is not
enough: it reports the count as of the connection's last transaction.)
"""

from __future__ import annotations

import apsw

from memoryd.storage import store_clock
from memoryd.storage.connection import ConnectionSettings, open_connection


class DatabaseChanges:
    """A read-only connection used only for the commit count."""

    def __init__(self, settings: ConnectionSettings) -> None:
        self._connection = open_connection(settings, [], read_only=True)
        self._connection.setbusytimeout(0)

    def stamp(self) -> int | None:
        """The commit count now; None when it cannot be read (treat as changed)."""
        try:
            (count,) = self._connection.execute("PRAGMA data_version").fetchall()[0]
        except apsw.Error:
            return None
        return int(count) if isinstance(count, int) else None

    def clock(self) -> int | None:
        """The store clock's version now (memoryd.storage.store_clock), without waiting; None
        when the database was busy."""
        try:
            return store_clock.read(self._connection)
        except apsw.Error:
            return None

    def close(self) -> None:
        """Close the connection."""
        self._connection.close()
