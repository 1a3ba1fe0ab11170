"""The Python client's conveniences: through the real server (the conversation helper, the
resumable transcript, errors), and against a scripted gRPC peer for what memoryd cannot be made
to do on demand (answer UNAVAILABLE, answer slowly, show the metadata it received)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

import memoryd_client as md
from memoryd.testing.server_process import ServerProcess
from memoryd_client.v2 import conversation_service_pb2_grpc


@pytest.fixture
async def voice(
    start_server: type[ServerProcess], tmp_path: Path
) -> AsyncIterator[grpc.aio.Channel]:
    server = start_server(
        tmp_path / "home", config="[memoryd.realtime]\npersist_transcripts = true\n"
    ).start()
    async with md.connect(server.address) as channel:
        yield channel


async def test_the_conversation_helper_appends_lists_searches_stores_and_recalls(
    server: ServerProcess,
) -> None:
    owner = f"py-{uuid.uuid4().hex[:8]}"
    async with md.connect(server.address, token="ignored-until-auth") as channel:
        chat = md.ConversationClient(
            channel, md.Conversation(owner_id=owner, channel="telegram", chat_id="c")
        )
        text = "Meet me in 東京 at 🍣 time"
        appended = await chat.append(md.user("ada", text), md.assistant("bot", "Booked."))
        assert [r.outcome for r in appended.results] == [md.APPEND_OUTCOME_STORED] * 2
        assert [m.content for m in (await chat.list(10)).messages] == [text, "Booked."]
        # The word match first; hybrid search may add the other message by its meaning.
        assert (await chat.search("東京")).hits[0].message.content == text
        await chat.store(md.CATEGORY_PREFERENCE, "Vegetarian, no fish", key="diet")
        recalled = await chat.recall("vegetarian", scope=md.RECALL_SCOPE_OWNER)
        assert [hit.memory.value for hit in recalled.hits] == ["Vegetarian, no fish"]
        assert "Vegetarian, no fish" in (await chat.prompt_context()).user_md
        await chat.commit_turn(md.user("ada", "what should I cook?"), md.assistant("bot", "Dal."))
        composed = await chat.compose(8000)
        assert composed.parts[-1].content == "Dal."
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await md.ConversationClient(channel, md.Conversation(chat_id="x")).append(
                md.user("ada", "hi")
            )
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert caught.value.details() == "conversation.channel is required"


def test_the_sync_client_does_the_same_without_asyncio(server: ServerProcess) -> None:
    owner = f"py-sync-{uuid.uuid4().hex[:8]}"
    with md.connect_sync(server.address, token="ignored-until-auth") as channel:
        chat = md.SyncConversationClient(
            channel, md.Conversation(owner_id=owner, channel="notebook", chat_id="c")
        )
        text = "Meet me in 東京 at 🍣 time"
        appended = chat.append(md.user("ada", text), md.assistant("bot", "Booked."))
        assert [r.outcome for r in appended.results] == [md.APPEND_OUTCOME_STORED] * 2
        assert [m.content for m in chat.list(10).messages] == [text, "Booked."]
        assert chat.search("東京").hits[0].message.content == text
        chat.store(md.CATEGORY_PREFERENCE, "Vegetarian, no fish", key="diet")
        recalled = chat.recall("vegetarian", scope=md.RECALL_SCOPE_OWNER)
        assert [hit.memory.value for hit in recalled.hits] == ["Vegetarian, no fish"]
        assert "Vegetarian, no fish" in chat.prompt_context().user_md
        chat.commit_turn(md.user("ada", "what should I cook?"), md.assistant("bot", "Dal."))
        assert chat.compose(8000).parts[-1].content == "Dal."
        with pytest.raises(grpc.RpcError) as caught:
            md.SyncConversationClient(channel, md.Conversation(chat_id="x")).append(
                md.user("ada", "hi")
            )
        assert isinstance(caught.value, grpc.Call)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        details = md.error_details(caught.value)
        assert details is not None
        assert details.field == "conversation.channel"


async def test_a_transcript_cut_mid_stream_resumes_without_loss_or_duplicate(
    voice: grpc.aio.Channel,
) -> None:
    device = f"kitchen-{uuid.uuid4().hex[:8]}"
    opening = md.TranscriptOpen(device_id=device, session_id="s-1", owner_id="py", model="rt")
    async with md.Transcript.open(voice, opening) as session:
        assert session.persisted
        session.partial(1, md.SPEAKER_USER, "what's the")
        await session.final(1, md.SPEAKER_USER, "what's the weather")
        await session.final(2, md.SPEAKER_ASSISTANT, "sunny, 21°C")
        session.send_without_waiting(3, md.SPEAKER_USER, "and tomorrow?")
        session.cut()
        await session.final(4, md.SPEAKER_ASSISTANT, "rain 雨")
        assert (session.committed, session.reconnects, session.resumed) == (4, 1, True)
        await session.end()
    listed = await md.Stubs(voice).conversations.ListMessages(
        md.ListMessagesRequest(
            conversation=md.Conversation(
                owner_id="py", channel="realtime", chat_id=f"local:{device}"
            ),
            page_size=100,
        )
    )
    assert [m.content for m in listed.messages] == [
        "what's the weather",
        "sunny, 21°C",
        "and tomorrow?",
        "rain 雨",
    ]


class Scripted(conversation_service_pb2_grpc.ConversationServiceServicer):
    """A peer that answers ListMessages and AppendMessages UNAVAILABLE `failures` times, then
    OK; GetConversation slowly; and records the metadata of every call."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls: dict[str, int] = {}
        self.metadata: list[dict[str, str]] = []

    async def _answer(self, name: str, context: Any, response: Any) -> Any:
        self.calls[name] = self.calls.get(name, 0) + 1
        self.metadata.append(dict(context.invocation_metadata()))
        if self.calls[name] <= self.failures:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "try again")
        return response

    async def ListMessages(self, _request: Any, context: Any) -> Any:  # noqa: N802
        return await self._answer("ListMessages", context, md.ListMessagesResponse())

    async def AppendMessages(self, _request: Any, context: Any) -> Any:  # noqa: N802
        return await self._answer("AppendMessages", context, md.AppendMessagesResponse())

    async def GetConversation(self, _request: Any, _context: Any) -> Any:  # noqa: N802
        await asyncio.sleep(2)
        return md.GetConversationResponse()


@pytest.fixture
async def scripted() -> AsyncIterator[tuple[Scripted, str]]:
    peer = Scripted(failures=2)  # type: ignore[abstract]  # the base answers the rest UNIMPLEMENTED
    server = grpc.aio.server()
    conversation_service_pb2_grpc.add_ConversationServiceServicer_to_server(peer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield peer, f"127.0.0.1:{port}"
    await server.stop(None)


async def test_idempotent_calls_are_retried_writes_never_and_the_token_is_sent(
    scripted: tuple[Scripted, str],
) -> None:
    peer, address = scripted
    async with md.connect(address, token="s3cret") as channel:
        memory = md.Stubs(channel)
        await memory.conversations.ListMessages(md.ListMessagesRequest())
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await memory.conversations.AppendMessages(md.AppendMessagesRequest())
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    assert peer.calls == {"ListMessages": 3, "AppendMessages": 1}
    assert {entry.get("authorization") for entry in peer.metadata} == {"Bearer s3cret"}


async def test_the_sync_channel_retries_idempotent_calls_and_sends_the_token(
    scripted: tuple[Scripted, str],
) -> None:
    peer, address = scripted

    def calls() -> grpc.RpcError:
        with md.connect_sync(address, token="s3cret") as channel:
            memory = md.SyncStubs(channel)
            memory.conversations.ListMessages(md.ListMessagesRequest())
            with pytest.raises(grpc.RpcError) as caught:
                memory.conversations.AppendMessages(md.AppendMessagesRequest())
            return caught.value

    refused = await asyncio.to_thread(calls)  # the scripted peer runs on this event loop
    assert isinstance(refused, grpc.Call)
    assert refused.code() == grpc.StatusCode.UNAVAILABLE
    assert peer.calls == {"ListMessages": 3, "AppendMessages": 1}
    assert {entry.get("authorization") for entry in peer.metadata} == {"Bearer s3cret"}


@pytest.mark.slow  # waits out the default deadline
async def test_unary_calls_get_the_default_deadline(scripted: tuple[Scripted, str]) -> None:
    _, address = scripted
    async with md.connect(address, timeout=0.3) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await md.Stubs(channel).conversations.GetConversation(md.GetConversationRequest())
        assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        # A deadline the caller sets wins.
        answered = await md.Stubs(channel).conversations.GetConversation(
            md.GetConversationRequest(), timeout=5
        )
        assert answered == md.GetConversationResponse()


@pytest.mark.slow  # waits out the default deadline
async def test_sync_unary_calls_get_the_default_deadline(scripted: tuple[Scripted, str]) -> None:
    _, address = scripted

    def call() -> grpc.RpcError:
        with (
            md.connect_sync(address, timeout=0.3) as channel,
            pytest.raises(grpc.RpcError) as caught,
        ):
            md.SyncStubs(channel).conversations.GetConversation(md.GetConversationRequest())
        return caught.value

    late = await asyncio.to_thread(call)
    assert isinstance(late, grpc.Call)
    assert late.code() == grpc.StatusCode.DEADLINE_EXCEEDED
