"""The writer's contracts, on a real SQLite database: grouping, isolation, order, retries, close."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path

import pytest

from memoryd.errors import Unavailable
from memoryd.log_events import Event
from memoryd.storage.connection import (
    ConnectionSettings,
    SqliteConnection,
    open_connection,
    writer_policy,
)
from memoryd.storage.transaction import Transaction
from memoryd.storage.write_terms import Batch, WriterSettings
from memoryd.storage.writer import Writer


def _insert_all(connection: Transaction, values: list[str]) -> list[int]:
    ids = []
    for value in values:
        if value == "boom":
            raise ValueError("this payload is refused")
        connection.execute("INSERT INTO items (value) VALUES (?)", (value,))
        ids.append(connection.last_insert_rowid())
    return ids


INSERT = Batch("insert", _insert_all)
CALLS: list[int] = []


def _counting(connection: Transaction, values: list[str]) -> list[int]:
    CALLS.append(len(values))
    return _insert_all(connection, values)


COUNTED = Batch("counted", _counting)


def mark(writer: Writer, value: str) -> Awaitable[int]:
    """A closure job: one row, its id."""

    def work(connection: Transaction) -> int:
        if value == "boom":
            raise ValueError("this closure is refused")
        connection.execute("INSERT INTO items (value) VALUES (?)", (value,))
        return connection.last_insert_rowid()

    return writer.run("mark", work)


@pytest.fixture
def settings(tmp_path: Path) -> ConnectionSettings:
    return ConnectionSettings(
        path=tmp_path / "w.db", busy_timeout_ms=20, synchronous="normal", secure_delete=True
    )


@pytest.fixture
async def writer(settings: ConnectionSettings) -> AsyncIterator[Writer]:
    connection = open_connection(settings, writer_policy(settings))
    connection.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, value TEXT NOT NULL) STRICT")
    started = Writer(connection, WriterSettings(512, 0.0, 3, 0.05))
    started.start()
    yield started
    await started.close()


def stored(settings: ConnectionSettings) -> list[str]:
    connection = SqliteConnection(str(settings.path))
    try:
        return [row[0] for row in connection.execute("SELECT value FROM items ORDER BY id")]
    finally:
        connection.close()


async def test_concurrent_jobs_share_one_batch_call(
    writer: Writer, settings: ConnectionSettings
) -> None:
    CALLS.clear()
    results = await asyncio.gather(*(writer.submit(COUNTED, f"v{i}") for i in range(50)))
    assert len(set(results)) == 50  # one row id per job
    assert sum(CALLS) == 50
    assert len(CALLS) < 50  # grouped: fewer calls than jobs
    assert sorted(stored(settings)) == sorted(f"v{i}" for i in range(50))


async def test_a_failing_job_is_isolated_and_the_others_commit(
    writer: Writer, settings: ConnectionSettings
) -> None:
    results = await asyncio.gather(
        *(writer.submit(INSERT, value) for value in ("a", "b", "boom", "c")),
        return_exceptions=True,
    )
    assert isinstance(results[2], ValueError)
    assert all(isinstance(result, int) for i, result in enumerate(results) if i != 2)
    assert stored(settings) == ["a", "b", "c"]
    assert writer.stats.failed_groups == 0


async def test_order_is_kept_across_kinds(writer: Writer, settings: ConnectionSettings) -> None:
    await asyncio.gather(
        writer.submit(INSERT, "1"),
        mark(writer, "2"),
        writer.submit(INSERT, "3"),
        writer.submit(INSERT, "4"),
        mark(writer, "5"),
    )
    assert stored(settings) == ["1", "2", "3", "4", "5"]


async def test_a_failing_closure_is_isolated_and_the_others_commit(
    writer: Writer, settings: ConnectionSettings
) -> None:
    results = await asyncio.gather(
        *(mark(writer, value) for value in ("a", "boom", "b")),
        writer.submit(INSERT, "c"),
        return_exceptions=True,
    )
    assert isinstance(results[1], ValueError)
    assert [isinstance(result, int) for result in results] == [True, False, True, True]
    assert stored(settings) == ["a", "b", "c"]


async def test_after_commit_hooks_run_before_the_answer(writer: Writer) -> None:
    seen: list[int] = []
    result = await writer.submit(INSERT, "x", after_commit=seen.append)
    assert seen == [result]


class _Retried(logging.Handler):
    """Sets an asyncio event when the writer logs a retry (from its thread)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, event: asyncio.Event) -> None:
        super().__init__()
        self._loop = loop
        self._event = event

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "event", None) == Event.WRITE_RETRY:
            self._loop.call_soon_threadsafe(self._event.set)


async def test_a_held_lock_is_retried(settings: ConnectionSettings) -> None:
    """Another connection holds the write lock; it lets go once the writer has retried (an
    event, not a timer), and the write commits on a later attempt."""
    connection = open_connection(settings, writer_policy(settings))
    connection.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, value TEXT NOT NULL) STRICT")
    # Attempts enough that a slow machine cannot use them all before the lock is let go.
    writer = Writer(connection, WriterSettings(512, 0.0, 10, 0.05))
    writer.start()
    retried = asyncio.Event()
    handler = _Retried(asyncio.get_running_loop(), retried)
    logger = logging.getLogger("memoryd.storage.writer")
    logger.addHandler(handler)
    other = SqliteConnection(str(settings.path))
    try:
        other.execute("BEGIN IMMEDIATE")
        pending = asyncio.ensure_future(writer.submit(INSERT, "after the lock"))
        await retried.wait()
        assert not pending.done()
        other.execute("ROLLBACK")
        await pending
    finally:
        logger.removeHandler(handler)
        other.close()
        await writer.close()
    assert writer.stats.retries >= 1
    assert stored(settings) == ["after the lock"]


async def test_close_commits_what_is_queued_then_refuses(
    writer: Writer, settings: ConnectionSettings
) -> None:
    pending = [asyncio.ensure_future(writer.submit(INSERT, f"q{i}")) for i in range(20)]
    await asyncio.sleep(0)
    await writer.close()
    assert len(await asyncio.gather(*pending)) == 20
    assert len(stored(settings)) == 20
    with pytest.raises(Unavailable):
        await writer.submit(INSERT, "late")
