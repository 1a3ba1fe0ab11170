"""The background lock of a store on PostgreSQL (memoryd.storage.background_lock): a session
advisory lock on a connection of its own, released by the server when the connection ends."""

from __future__ import annotations

import contextlib

from memoryd.storage import errors as database_errors
from memoryd.storage.postgres import database as postgres
from memoryd.storage.postgres.settings import PostgresSettings
from memoryd.storage.postgres.transaction import PostgresTransaction

# The advisory lock's key: "memoryd" and 2.
ADVISORY_KEY = 0x6D656D6F72796402


class AdvisoryLock:
    """A session advisory lock on a PostgreSQL connection of its own. Asked again while held, it
    checks that the connection (and so the lock) is still there."""

    def __init__(self, settings: PostgresSettings) -> None:
        self._settings = settings
        self._connection: PostgresTransaction | None = None

    def try_take(self) -> bool:
        if self._connection is not None:
            try:
                self._connection.execute("SELECT 1").fetchall()
            except database_errors.TRANSIENT_ERRORS:
                self.release()  # the connection went, and the lock with it
            else:
                return True
        try:
            connection = postgres.connect(self._settings)
        except database_errors.TRANSIENT_ERRORS:
            return False  # PostgreSQL is away: the next attempt tries again
        try:
            taken = connection.execute(
                "SELECT pg_try_advisory_lock(?)", (ADVISORY_KEY,)
            ).fetchall()[0][0]
        except database_errors.TRANSIENT_ERRORS:
            taken = False
        if not taken:
            with contextlib.suppress(*database_errors.TRANSIENT_ERRORS):
                connection.close()
            return False
        self._connection = connection
        return True

    def release(self) -> None:
        if self._connection is not None:
            with contextlib.suppress(*database_errors.TRANSIENT_ERRORS):
                self._connection.close()
            self._connection = None
