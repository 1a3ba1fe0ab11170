"""Read-only mode through the real server: every RPC that writes, by its declared access, is
refused with FAILED_PRECONDITION saying why, and changes nothing; every read keeps working,
search included; no background writer runs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import cast

import apsw
import grpc
import pytest

import memoryd_client as md
from memoryd.api import contract
from memoryd.api.access import declarations
from memoryd.api.registration import READ_ONLY
from memoryd.log_events import Event
from memoryd.storage.connection import SqliteConnection
from memoryd.testing.server_process import ServerProcess
from tests.helpers import append, client_stream, user

CHAT = md.Conversation(channel="telegram", chat_id="read-only")
WRITING = sorted(
    path for path, item in contract.routed(declarations(contract.methods())).items() if item.writes
)


def counts(home: Path) -> tuple[int, ...]:
    connection = SqliteConnection(str(home / "memory.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return tuple(
            cast("int", connection.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0])
            for table in ("messages", "memories", "resource_revisions", "conversations")
        )
    finally:
        connection.close()


async def empty_call(
    channel: grpc.aio.Channel, address: str, path: str, streaming: tuple[bool, bool]
) -> tuple[grpc.StatusCode, str] | None:
    """Call `path` with empty requests, whatever its shape; the status it ends with (None: OK)."""
    client_streaming, server_streaming = streaming
    if client_streaming:  # the synchronous client reports the server's status
        code, details, _ = await asyncio.to_thread(
            client_stream, address, path, [b""], server_streaming=server_streaming
        )
        return None if code == grpc.StatusCode.OK else (code, details)
    try:
        if server_streaming:
            streamed: grpc.aio.UnaryStreamMultiCallable[bytes, bytes] = channel.unary_stream(path)
            async for _ in streamed(b"", timeout=15):
                pass
        else:
            unary: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(path)
            await unary(b"", timeout=15)
    except grpc.aio.AioRpcError as error:
        return error.code(), error.details() or ""
    return None


def shapes() -> dict[str, tuple[bool, bool]]:
    """Whether each RPC, of memoryd.v2 and memoryd.v1, streams its requests and its answers."""
    return {
        contract.path(method): (method.client_streaming, method.server_streaming)
        for method in (*contract.methods(), *contract.legacy_methods())
    }


@pytest.mark.sqlite_only("compares SQLite's file before and after")
async def test_a_read_only_server_refuses_every_write_and_keeps_every_read(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    writable = start_server(home).start()
    async with md.connect(writable.address) as channel:
        memory = md.Stubs(channel)
        await append(memory, CHAT, user("I love sushi"))
        await memory.memory.StoreMemory(
            md.StoreMemoryRequest(category=md.CATEGORY_PREFERENCE, key="food", value="sushi")
        )
    assert writable.stop() == 0
    before = counts(home)

    server = start_server(home, config="[memoryd.server]\nread_only = true\n").start()
    server.wait_for_event(Event.READ_ONLY)  # logged right after `serving`
    assert len(server.events(Event.READ_ONLY)) == 1
    assert not server.events(Event.NO_PROVIDER)  # nothing would run anyway
    assert len(WRITING) >= 40  # every write of both versions, read from their declarations
    async with md.connect(server.address) as channel:
        every = shapes()
        for path in WRITING:
            ended = await empty_call(channel, server.address, path, every[path])
            assert ended is not None, path
            code, details = ended
            assert code == grpc.StatusCode.FAILED_PRECONDITION, (path, details)
            assert details == READ_ONLY, path
        memory = md.Stubs(channel)
        listed = await memory.conversations.ListMessages(md.ListMessagesRequest(conversation=CHAT))
        assert [m.content for m in listed.messages] == ["I love sushi"]
        found = await memory.conversations.SearchHistory(
            md.SearchHistoryRequest(query="sushi", conversation=CHAT)
        )
        assert [hit.message.content for hit in found.hits] == ["I love sushi"]
        rows = await memory.memory.ListMemories(md.ListMemoriesRequest())
        assert [item.memory.value for item in rows.memories] == ["sushi"]
        context = await memory.context.GetPromptContext(md.GetPromptContextRequest())
        assert "sushi" in context.context_block
        composed = await md.Stubs(channel).context.ComposeContext(
            md.ComposeContextRequest(conversation=CHAT, context_window=8000)
        )
        assert any("I love sushi" in part.content for part in composed.parts)
    assert server.stop() == 0
    assert counts(home) == before
