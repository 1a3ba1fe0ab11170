"""Read-only connections on a small thread pool, so SQLite reads never block the event loop.

Each thread opens its own read-only connection on first use. Every read function runs inside
one read transaction, so it sees a single committed snapshot even across several statements.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from typing import TypeVar

import apsw

from memoryd.errors import Unavailable
from memoryd.storage.connection import ConnectionSettings, open_connection, reader_policy
from memoryd.storage.errors import translate_read_errors
from memoryd.storage.transaction import Transaction

T = TypeVar("T")


class ReaderPool:
    """A fixed number of reader threads, each with its own read-only connection."""

    def __init__(self, settings: ConnectionSettings, threads: int) -> None:
        self._settings = settings
        self._local = threading.local()
        self._connections: list[apsw.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix="memoryd-reader"
        )

    async def read(self, run: Callable[[Transaction], T]) -> T:
        """Run `run(connection)` in one read transaction on a reader thread."""
        if self._closed:
            raise Unavailable("memoryd is shutting down; retry against another instance")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._read, run)

    def _read(self, run: Callable[[Transaction], T]) -> T:
        connection = self._connection()
        with translate_read_errors():
            connection.execute("BEGIN")
            try:
                return run(connection)
            finally:
                connection.execute("COMMIT")

    def _connection(self) -> apsw.Connection:
        connection: apsw.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = open_connection(
                self._settings, reader_policy(self._settings), read_only=True
            )
            self._local.connection = connection
            with self._lock:
                self._connections.append(connection)
        return connection

    def close(self) -> None:
        """Finish running reads and close every connection."""
        self._closed = True
        self._executor.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            for connection in self._connections:
                connection.close()
            self._connections.clear()
