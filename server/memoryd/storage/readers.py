"""Read-only connections on a small thread pool, so database reads never block the event loop.

Each thread opens its own read-only connection on first use (the backend says how). Every read
function runs inside one read transaction, so it sees a single committed snapshot even across
several statements. A connection that broke (PostgreSQL went away) is opened again by the next
read of its thread; a read that finds its thread's connection broken while it sat idle (a
PostgreSQL that restarted in between) runs once more on a new one, so that storage that is back
does not fail one read a reader thread before each thread has noticed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from typing import Protocol, TypeVar

from memoryd.errors import Unavailable
from memoryd.storage import errors as database_errors
from memoryd.storage.errors import translate_read_errors
from memoryd.storage.transaction import Transaction

T = TypeVar("T")


class ReaderConnection(Transaction, Protocol):
    """A connection the pool reads on: a Transaction that can be closed."""

    def close(self) -> None:
        """Close the connection."""
        ...


class ReaderPool:
    """A fixed number of reader threads, each with its own read-only connection."""

    def __init__(
        self,
        open_reader: Callable[[], ReaderConnection],
        threads: int,
        *,
        begin: str = "BEGIN",
        usable: Callable[[ReaderConnection], bool] = lambda _: True,
    ) -> None:
        self._open_reader = open_reader
        self._begin = begin
        self._usable = usable
        self._local = threading.local()
        self._connections: list[ReaderConnection] = []
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

    def read_now(self, run: Callable[[Transaction], T]) -> T:
        """`read`, from a thread that may wait (the writer's, after a commit; never the event
        loop's)."""
        if self._closed:
            raise Unavailable("memoryd is shutting down; retry against another instance")
        return self._executor.submit(self._read, run).result()

    def _read(self, run: Callable[[Transaction], T]) -> T:
        with translate_read_errors():
            idle: ReaderConnection | None = getattr(self._local, "connection", None)
            reused = idle is not None and self._usable(idle)
            try:
                return self._read_on(self._connection(), run)
            except database_errors.TRANSIENT_ERRORS:
                connection = getattr(self._local, "connection", None)
                if not reused or connection is None or self._usable(connection):
                    raise  # a new connection failed, or one that still works: storage is away
            # The connection had broken while idle: a read changes nothing, so once more.
            return self._read_on(self._connection(), run)

    def _read_on(self, connection: ReaderConnection, run: Callable[[Transaction], T]) -> T:
        connection.execute(self._begin)
        try:
            return run(connection)
        finally:
            if self._usable(connection):
                connection.execute("COMMIT")

    def _connection(self) -> ReaderConnection:
        connection: ReaderConnection | None = getattr(self._local, "connection", None)
        if connection is not None and not self._usable(connection):
            self._local.connection = None
            with self._lock:
                self._connections.remove(connection)
            connection.close()
            connection = None
        if connection is None:
            connection = self._open_reader()
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
