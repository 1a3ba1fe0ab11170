"""The server as an operator sees it: start, restart, stop under load, refusals, health."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2

import memoryd_client as md
from memoryd.api import contract
from memoryd.log_events import Event
from memoryd.storage.migrations import bundled_migrations
from memoryd.testing.server_process import ServerProcess
from tests.helpers import append, health_stub, user
from tests.review_helpers import eventually


@pytest.mark.sqlite_only("SQLite's database file in the data directory")
async def test_first_start_creates_the_data_directory_and_database(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    home = tmp_path / "deep" / "new" / "home"
    server = start_server(home).start()
    assert (home / "memory.db").is_file()
    assert (home / "memory.db").stat().st_size > 0
    assert server.events(Event.SERVING)[0]["schema_version"] == len(bundled_migrations())
    assert server.stop() == 0


async def test_restart_with_the_same_home_keeps_everything(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    conversation = md.Conversation(channel="telegram", chat_id="persist")
    first = start_server(home).start()
    async with md.connect(first.address) as channel:
        memory = md.Stubs(channel)
        await append(memory, conversation, user("before the clear", client_message_id="a"))
        await memory.conversations.ClearConversation(
            md.ClearConversationRequest(conversation=conversation)
        )
        await append(memory, conversation, user("after the clear lighthouse"))
        before = await memory.conversations.GetConversation(
            md.GetConversationRequest(conversation=conversation)
        )
    assert first.stop() == 0

    second = start_server(home).start()
    assert second.events(Event.MIGRATED) == []  # nothing left to migrate
    async with md.connect(second.address) as channel:
        memory = md.Stubs(channel)
        after = await memory.conversations.GetConversation(
            md.GetConversationRequest(conversation=conversation)
        )
        assert after == before
        window = await memory.conversations.ListMessages(
            md.ListMessagesRequest(conversation=conversation)
        )
        assert [m.content for m in window.messages] == ["after the clear lighthouse"]
        history = await memory.conversations.ListMessages(
            md.ListMessagesRequest(conversation=conversation, all_history=True)
        )
        assert [m.content for m in history.messages] == [
            "before the clear",
            "after the clear lighthouse",
        ]
        retry = await append(memory, conversation, user("before the clear", client_message_id="a"))
        assert retry.results[0].outcome == md.APPEND_OUTCOME_DUPLICATE
        hits = await memory.conversations.SearchHistory(
            md.SearchHistoryRequest(
                query="lighthouse", conversation=conversation, mode=md.SEARCH_MODE_LEXICAL
            )
        )
        assert len(hits.hits) == 1


@pytest.mark.sqlite_only("counts rows in SQLite's file")
async def test_stopping_under_load_loses_no_acknowledged_write(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    server = start_server(home).start()
    conversation = md.Conversation(channel="telegram", chat_id="shutdown")
    acknowledged: list[int] = []
    refused: list[grpc.StatusCode] = []
    busy = asyncio.Event()

    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)

        async def writer(task: int) -> None:
            for index in range(1000):
                try:
                    response = await append(memory, conversation, user(f"{task}-{index}"))
                except grpc.aio.AioRpcError as error:
                    refused.append(error.code())
                    return
                acknowledged.append(response.results[0].id)
                if len(acknowledged) >= 200:
                    busy.set()

        writers = [asyncio.create_task(writer(task)) for task in range(16)]
        await busy.wait()
        server.process.terminate()  # SIGTERM while 16 callers are writing
        await asyncio.gather(*writers)

    assert server.stop() == 0, server.output
    assert refused, "the writers ran past the stop"
    assert set(refused) <= {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED}
    assert [event["msg"] for event in server.events(Event.STOPPING)]

    # Every acknowledged row is on disk.
    database = sqlite3.connect(home / "memory.db")
    stored = {row[0] for row in database.execute("SELECT id FROM messages")}
    database.close()
    assert set(acknowledged) <= stored

    restarted = start_server(home).start()
    async with md.connect(restarted.address) as channel:
        state = await md.Stubs(channel).conversations.GetConversation(
            md.GetConversationRequest(conversation=conversation)
        )
        assert state.message_count == len(stored) >= len(acknowledged)


async def test_signals_repeated_until_exit_still_exit_zero(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    """An impatient operator (or a test's stop after its own SIGTERM) signals again and again:
    each one after the first is "already stopping", up to the process's last instruction."""
    server = start_server(tmp_path / "home").start()
    chat = md.Conversation(channel="cli", chat_id="c")
    finish = asyncio.Event()

    async def batches() -> AsyncIterator[md.IngestMessagesRequest]:
        message = md.NewMessage(role=md.ROLE_USER, sender="ada", content="in flight")
        ingested = md.IngestedMessage(conversation=chat, message=message)
        yield md.IngestMessagesRequest(messages=[ingested])
        await finish.wait()

    async with grpc.aio.insecure_channel(server.address) as channel:
        # A call in flight holds the drain open: a signal repeated then is surely seen while
        # stopping (two signals sent before the process runs merge into one).
        memory = md.Stubs(channel)
        ingest = asyncio.ensure_future(memory.conversations.IngestMessages(batches()))

        async def in_flight() -> bool:  # its first batch stored: the call is the server's
            listed = await memory.conversations.ListMessages(
                md.ListMessagesRequest(conversation=chat)
            )
            return len(listed.messages) == 1

        await eventually(in_flight)
        server.process.send_signal(signal.SIGTERM)
        await asyncio.to_thread(server.wait_for_event, Event.STOPPING)
        server.process.send_signal(signal.SIGTERM)
        await asyncio.to_thread(server.wait_for_event, Event.STOP_REPEATED)
        finish.set()
        assert (await ingest).stored == 1
    # And every signal until the process has gone leaves it exiting 0.
    while server.process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            server.process.send_signal(signal.SIGTERM)
        await asyncio.sleep(0.001)
    assert server.stop() == 0, server.output


async def test_health_and_reflection(server: ServerProcess, channel: grpc.aio.Channel) -> None:
    health = health_stub(channel)
    for service in ("", *contract.service_names()):
        response = await health.Check(health_pb2.HealthCheckRequest(service=service))
        assert response.status == health_pb2.HealthCheckResponse.SERVING
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await health.Check(health_pb2.HealthCheckRequest(service="nope.Service"))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


async def test_one_server_per_home(start_server: type[ServerProcess], tmp_path: Path) -> None:
    home = tmp_path / "home"
    start_server(home).start()
    second = start_server(home)
    assert second.wait_exit() == 1
    assert "another memoryd" in second.output
    assert f"is already serving {home}" in second.output


async def test_a_taken_port_is_refused(start_server: type[ServerProcess], tmp_path: Path) -> None:
    first = start_server(tmp_path / "a").start()
    second = start_server(tmp_path / "b", listen=first.address)
    assert second.wait_exit() == 1
    assert f"cannot listen on {first.address}: address already in use" in second.output
    assert "GRPC_VERBOSITY" not in second.output


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("[memoryd.server]\nlisten = 'nowhere'\n", "memoryd.server.listen must be HOST:PORT"),
        (
            "[memoryd.storage]\nsynchronous = 'sometimes'\n",
            "memoryd.storage.synchronous must be one of 'normal', 'full', got 'sometimes'",
        ),
        (
            "[memoryd.history]\nmax_conversation_history = -3\n",
            "memoryd.history.max_conversation_history must be positive, got -3",
        ),
        ("[memoryd.history]\nmax_histroy = 3\n", "unknown setting memoryd.history.max_histroy"),
        ("[memoryd.server\n", "is not valid TOML"),
    ],
)
async def test_bad_config_is_refused_before_starting(
    start_server: type[ServerProcess], tmp_path: Path, config: str, message: str
) -> None:
    server = start_server(tmp_path / "home", config=config)
    assert server.wait_exit() == 2
    assert message in server.output
    assert "Traceback" not in server.output


async def test_environment_overrides_the_config_file(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    server = start_server(
        tmp_path / "home",
        config="[memoryd.history]\nmax_messages_per_call = 50\n",
        env={"MEMORYD_HISTORY_MAX_MESSAGES_PER_CALL": "2"},
    ).start()
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        conversation = md.Conversation(channel="telegram", chat_id="env")
        await append(memory, conversation, user("a"), user("b"))
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await append(memory, conversation, user("a"), user("b"), user("c"))
        assert caught.value.details() == (
            "messages has 3 messages; the limit is 2 per call "
            "(memoryd.history.max_messages_per_call)"
        )


@pytest.mark.sqlite_only("SQLite's journal and synchronous modes")
async def test_full_synchronous_mode_is_applied(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    server = start_server(tmp_path / "home", config="[memoryd.storage]\nsynchronous = 'full'\n")
    server.start()
    async with md.connect(server.address) as channel:
        response = await append(
            md.Stubs(channel), md.Conversation(channel="t", chat_id="1"), user("x")
        )
        assert response.results[0].outcome == md.APPEND_OUTCOME_STORED
    database = sqlite3.connect(tmp_path / "home" / "memory.db")
    assert database.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    database.close()


async def test_one_structured_log_line_per_rpc(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    server = start_server(tmp_path / "home").start()
    conversation = md.Conversation(channel="telegram", chat_id="logs")
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        await append(memory, conversation, user("logged"))
        with pytest.raises(grpc.aio.AioRpcError):
            await memory.conversations.ListMessages(md.ListMessagesRequest())
        await health_stub(channel).Check(health_pb2.HealthCheckRequest())
    assert server.stop() == 0
    lines = server.events(Event.RPC)  # every line parsed as JSON
    assert [(line["method"], line["status"]) for line in lines] == [
        ("/memoryd.v2.ConversationService/AppendMessages", "OK"),
        ("/memoryd.v2.ConversationService/ListMessages", "INVALID_ARGUMENT"),
    ]  # health checks are logged at debug level only
    for line in lines:
        assert line["level"] == "info"
        assert line["logger"] == "memoryd.rpc"
        assert isinstance(line["duration_ms"], float)
        assert line["duration_ms"] >= 0
        assert line["msg"].startswith(line["method"] + " " + line["status"] + " ")


async def test_health_turns_not_serving_when_stopping(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    server = start_server(tmp_path / "home").start()
    async with md.connect(server.address) as channel:
        watch = health_stub(channel).Watch(
            health_pb2.HealthCheckRequest(service="memoryd.v2.ConversationService")
        )
        first = await watch.read()
        assert first.status == health_pb2.HealthCheckResponse.SERVING
        server.process.terminate()
        second = await asyncio.wait_for(watch.read(), timeout=10)
        assert second.status == health_pb2.HealthCheckResponse.NOT_SERVING
        watch.cancel()
    assert server.stop() == 0
    assert server.events(Event.STOPPING)
