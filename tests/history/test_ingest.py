"""IngestMessages through the real server: batches for many conversations, times kept,
duplicates skipped on a re-send, invalid messages rejected one by one, and a stream that goes
wrong keeps every batch stored before."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Iterable

import grpc
import pytest
from google.protobuf import timestamp_pb2

import memoryd_client as md
from memoryd.testing.server_process import ServerProcess
from tests.helpers import fresh_conversation, rpc_error

WHEN = dt.datetime(2024, 3, 1, 9, 30, tzinfo=dt.UTC)


def item(
    conversation: md.Conversation, content: str, *, client_id: str = "", minutes: int = 0
) -> md.IngestedMessage:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(WHEN + dt.timedelta(minutes=minutes))
    return md.IngestedMessage(
        conversation=conversation,
        message=md.NewMessage(
            role=md.ROLE_USER,
            sender="ada",
            content=content,
            client_message_id=client_id,
            created_at=stamp,
        ),
    )


async def stream(
    batches: Iterable[list[md.IngestedMessage]],
) -> AsyncIterator[md.IngestMessagesRequest]:
    for batch in batches:
        yield md.IngestMessagesRequest(messages=batch)


async def listed(memory: md.Stubs, conversation: md.Conversation) -> list[md.Message]:
    response = await memory.conversations.ListMessages(
        md.ListMessagesRequest(conversation=conversation, all_history=True, page_size=1000)
    )
    return list(response.messages)


async def test_batches_for_many_conversations_are_stored_in_order_with_their_times(
    memory: md.Stubs,
) -> None:
    first, second = fresh_conversation(), fresh_conversation()
    batches = [
        [item(first, f"first {n}", minutes=n) for n in range(3)]
        + [item(second, f"second {n}", minutes=n) for n in range(2)],
        [item(first, "first 3", minutes=3), item(second, "   ")],
    ]
    report = await memory.conversations.IngestMessages(stream(batches))
    assert (report.batches, report.received, report.stored, report.blank) == (2, 7, 6, 1)
    assert (report.duplicates, report.rejected) == (0, 0)
    stored = await listed(memory, first)
    assert [m.content for m in stored] == ["first 0", "first 1", "first 2", "first 3"]
    assert [m.created_at.ToDatetime(tzinfo=dt.UTC) for m in stored] == [
        WHEN + dt.timedelta(minutes=n) for n in range(4)
    ]
    assert [m.content for m in await listed(memory, second)] == ["second 0", "second 1"]


async def test_a_cut_off_import_sent_again_stores_nothing_twice(
    memory: md.Stubs,
) -> None:
    conversation = fresh_conversation()
    batch = [item(conversation, f"m{n}", client_id=f"import-{n}") for n in range(5)]
    first = await memory.conversations.IngestMessages(stream([batch[:3]]))
    assert first.stored == 3
    again = await memory.conversations.IngestMessages(stream([batch]))
    assert (again.stored, again.duplicates) == (2, 3)
    assert [m.content for m in await listed(memory, conversation)] == [f"m{n}" for n in range(5)]


async def test_invalid_messages_are_rejected_one_by_one_with_their_reason(
    memory: md.Stubs,
) -> None:
    conversation = fresh_conversation()
    no_role = item(conversation, "no role")
    no_role.message.role = md.ROLE_UNSPECIFIED
    huge = item(conversation, "x" * (300 * 1024))
    homeless = md.IngestedMessage(message=md.NewMessage(role=md.ROLE_USER, content="where?"))
    bad_chat = item(md.Conversation(channel="t", chat_id="a\x00b"), "nul in the chat id")
    batch = [item(conversation, "kept 1"), no_role, huge, homeless, bad_chat]
    report = await memory.conversations.IngestMessages(
        stream([batch, [item(conversation, "kept 2")]])
    )
    assert (report.received, report.stored, report.rejected) == (6, 2, 4)
    assert [(r.batch, r.index, r.reason) for r in report.rejections] == [
        (0, 1, "messages[1].message.role is required"),
        (
            0,
            2,
            (
                "messages[2].content is 307200 bytes; the limit is 262144 "
                "(memoryd.history.max_content_bytes)"
            ),
        ),
        (0, 3, "messages[3].conversation is required (with channel and chat_id)"),
        (0, 4, "messages[4].conversation.chat_id must not contain control characters"),
    ]
    assert [m.content for m in await listed(memory, conversation)] == ["kept 1", "kept 2"]


async def test_the_reasons_of_the_first_hundred_rejections_are_kept(
    memory: md.Stubs,
) -> None:
    homeless = md.IngestedMessage(message=md.NewMessage(role=md.ROLE_USER, content="x"))
    report = await memory.conversations.IngestMessages(stream([[homeless] * 150]))
    assert (report.rejected, len(report.rejections)) == (150, 100)


async def test_an_oversized_batch_ends_the_stream_and_keeps_what_came_before(
    memory: md.Stubs,
) -> None:
    conversation = fresh_conversation()
    before = [item(conversation, "before")]
    too_many = [item(conversation, f"n{n}") for n in range(1001)]
    error = await rpc_error(memory.conversations.IngestMessages(stream([before, too_many])))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == (
        "batch 1 has 1,001 messages; the limit is 1,000 (the 1 batches before it are stored)"
    )
    assert [m.content for m in await listed(memory, conversation)] == ["before"]


async def test_an_unparsable_batch_ends_the_stream_precisely(
    server: ServerProcess, memory: md.Stubs
) -> None:
    conversation = fresh_conversation()
    good = md.IngestMessagesRequest(messages=[item(conversation, "stored")]).SerializeToString()

    async def raw() -> AsyncIterator[bytes]:
        yield good
        yield b"\x0a\xff\xff\xff"  # a length prefix running past the end

    async with grpc.aio.insecure_channel(server.address) as channel:
        call = channel.stream_unary(
            "/memoryd.v2.ConversationService/IngestMessages",
            request_serializer=lambda payload: payload,
            response_deserializer=md.IngestMessagesResponse.FromString,
        )
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call(raw())
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (caught.value.details() or "").startswith("the request is not a valid protobuf message")
    assert [m.content for m in await listed(memory, conversation)] == ["stored"]
