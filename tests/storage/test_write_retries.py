"""Transient storage failures: a held lock is retried, then reported as UNAVAILABLE, never lost.

Another connection to the same database file holds SQLite's write lock, exactly as a second
process (a backup, an admin shell) would.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

import memoryd_client as md
from memoryd.log_events import Event
from memoryd.storage.connection import SqliteConnection
from memoryd.testing.server_process import ServerProcess
from tests.helpers import append, user

# busy_timeout 50 ms per attempt; retry delays 300 ms then 600 ms: about 1.05 s for 3 attempts.
CONFIG = """
[memoryd.storage]
busy_timeout_ms = 50
write_retry_delay_ms = 300
write_attempts = 3
"""


@contextlib.contextmanager
def write_lock(database: Path) -> Iterator[threading.Event]:
    """Hold the database's write lock from another connection (in a thread) until the yielded
    event is set, or the block ends."""
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        connection = SqliteConnection(str(database))
        connection.execute("BEGIN IMMEDIATE")
        taken.set()
        release.wait(60)
        connection.execute("ROLLBACK")
        connection.close()

    thread = threading.Thread(target=hold)
    thread.start()
    taken.wait(5)
    try:
        yield release
    finally:
        release.set()
        thread.join()


@pytest.fixture
def server(start_server: type[ServerProcess], tmp_path: Path) -> ServerProcess:
    return start_server(tmp_path / "home", config=CONFIG).start()


@pytest.mark.sqlite_only("holds SQLite's write lock from outside")
async def test_a_briefly_held_lock_is_retried_and_the_write_commits(server: ServerProcess) -> None:
    conversation = md.Conversation(channel="telegram", chat_id="retry")
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        with write_lock(server.home / "memory.db") as release:
            appending = asyncio.create_task(
                append(memory, conversation, user("survives a held lock"))
            )
            # Released once the writer has been refused and said it will retry.
            await asyncio.to_thread(server.wait_for_event, Event.WRITE_RETRY, 30)
            release.set()
            response = await appending
        assert response.results[0].outcome == md.APPEND_OUTCOME_STORED
        listed = await memory.conversations.ListMessages(
            md.ListMessagesRequest(conversation=conversation)
        )
        assert [m.content for m in listed.messages] == ["survives a held lock"]
    retries = server.events(Event.WRITE_RETRY)
    assert retries
    assert retries[0]["level"] == "warning"


@pytest.mark.sqlite_only("holds SQLite's write lock from outside")
async def test_a_lock_held_past_every_attempt_is_unavailable_and_nothing_is_written(
    server: ServerProcess,
) -> None:
    conversation = md.Conversation(channel="telegram", chat_id="give-up")
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        with write_lock(server.home / "memory.db"):  # held until every attempt failed
            results = await asyncio.gather(
                *(append(memory, conversation, user(f"m{i}")) for i in range(5)),
                return_exceptions=True,
            )
        for result in results:
            assert isinstance(result, grpc.aio.AioRpcError)
            assert result.code() == grpc.StatusCode.UNAVAILABLE
            assert result.details() == (
                "the database is busy (BusyError); nothing was written, retry later"
            )
        listed = await memory.conversations.ListMessages(
            md.ListMessagesRequest(conversation=conversation, all_history=True)
        )
        assert list(listed.messages) == []
        # The lock is gone: the same writes now succeed.
        response = await append(memory, conversation, user("after the lock"))
        assert response.results[0].outcome == md.APPEND_OUTCOME_STORED
    # The log line comes through the server's stderr, which may still be on its way.
    await asyncio.to_thread(server.wait_for_event, Event.WRITE_FAILED)
    failures = server.events(Event.WRITE_FAILED)
    assert failures[0]["level"] == "error"
    assert failures[0]["attempts"] == 3
