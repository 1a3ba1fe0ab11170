"""Every bad input gets a precise status and message, never INTERNAL, and writes nothing; a
defect gets INTERNAL with a reference to the log, and never shows the server's internals."""

from __future__ import annotations

import re
from pathlib import Path

import grpc
import pytest
from google.protobuf import timestamp_pb2

import memoryd_client as md
from memoryd import errors
from memoryd.api.status import STATUS, status_of
from memoryd.log_events import Event
from memoryd.storage.connection import SqliteConnection
from memoryd.testing.server_process import ServerProcess
from tests.helpers import append, rpc_error, user


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (errors.InvalidArgument("x"), grpc.StatusCode.INVALID_ARGUMENT),
        (errors.NotFound("x"), grpc.StatusCode.NOT_FOUND),
        (errors.PermissionDenied("x"), grpc.StatusCode.PERMISSION_DENIED),
        (errors.FailedPrecondition("x"), grpc.StatusCode.FAILED_PRECONDITION),
        (errors.ResourceExhausted("x"), grpc.StatusCode.RESOURCE_EXHAUSTED),
        (errors.Unavailable("x"), grpc.StatusCode.UNAVAILABLE),
        (errors.MemorydError("x"), grpc.StatusCode.INTERNAL),
    ],
)
def test_every_error_maps_to_its_status(
    error: errors.MemorydError, status: grpc.StatusCode
) -> None:
    assert status_of(error) == status


def test_the_mapping_covers_every_code() -> None:
    assert set(STATUS) == set(errors.Code)
    assert all(STATUS[code].name == code.name for code in errors.Code)


def _conversation(**fields: str) -> md.Conversation:
    values = {"channel": "telegram", "chat_id": "c-errors"}
    values.update(fields)
    return md.Conversation(**values)


BAD_APPENDS = [
    pytest.param(
        md.AppendMessagesRequest(messages=[user("hi")]),
        "conversation is required (with channel and chat_id)",
        id="no-conversation",
    ),
    pytest.param(
        md.AppendMessagesRequest(conversation=_conversation(channel=""), messages=[user("hi")]),
        "conversation.channel is required",
        id="missing-channel",
    ),
    pytest.param(
        md.AppendMessagesRequest(conversation=_conversation(chat_id=""), messages=[user("hi")]),
        "conversation.chat_id is required",
        id="missing-chat-id",
    ),
    pytest.param(
        md.AppendMessagesRequest(conversation=_conversation(chat_id=" 42"), messages=[user("hi")]),
        "conversation.chat_id must not start or end with whitespace, got ' 42'",
        id="padded-chat-id",
    ),
    pytest.param(
        md.AppendMessagesRequest(conversation=_conversation(channel="a:b"), messages=[user("hi")]),
        "conversation.channel must not contain ':', got 'a:b'",
        id="colon-in-channel",
    ),
    pytest.param(
        md.AppendMessagesRequest(
            conversation=_conversation(agent_id="x" * 257), messages=[user("h")]
        ),
        "conversation.agent_id is 257 characters long; the limit is 256",
        id="long-agent-id",
    ),
    pytest.param(
        md.AppendMessagesRequest(conversation=_conversation(), messages=[]),
        "messages must contain at least one message",
        id="no-messages",
    ),
    pytest.param(
        md.AppendMessagesRequest(conversation=_conversation(), messages=[user("x")] * 101),
        "messages has 101 messages; the limit is 100 per call "
        "(memoryd.history.max_messages_per_call)",
        id="too-many-messages",
    ),
    pytest.param(
        md.AppendMessagesRequest(
            conversation=_conversation(), messages=[md.NewMessage(content="no role")]
        ),
        "messages[0].role is required",
        id="missing-role",
    ),
    pytest.param(
        md.AppendMessagesRequest(
            conversation=_conversation(),
            messages=[md.NewMessage(role=md.Role.ValueType(9), content="x")],
        ),
        "messages[0].role has unknown value 9",
        id="unknown-role",
    ),
    pytest.param(
        md.AppendMessagesRequest(
            conversation=_conversation(), messages=[user("ok"), user("x", trust=7)]
        ),
        "messages[1].trust has unknown value 7",
        id="unknown-trust",
    ),
    pytest.param(
        md.AppendMessagesRequest(conversation=_conversation(), messages=[user("x", metadata="7")]),
        "messages[0].metadata must be a JSON object, got a number",
        id="metadata-number",
    ),
    pytest.param(
        md.AppendMessagesRequest(conversation=_conversation(), messages=[user("x", metadata="{")]),
        "messages[0].metadata is not valid JSON: Expecting property name enclosed in double "
        "quotes at line 1 column 2",
        id="metadata-broken",
    ),
    pytest.param(
        md.AppendMessagesRequest(
            conversation=_conversation(), messages=[user("x", metadata='{"a": NaN}')]
        ),
        "messages[0].metadata is not valid JSON: NaN is not a JSON number",
        id="metadata-nan",
    ),
    pytest.param(
        md.AppendMessagesRequest(
            conversation=_conversation(), messages=[user("x", metadata="[" * 5000 + "]" * 5000)]
        ),
        "messages[0].metadata is nested more than 64 levels deep",
        id="metadata-deep",
    ),
    pytest.param(
        md.AppendMessagesRequest(
            conversation=_conversation(), messages=[user("x" * (256 * 1024 + 1))]
        ),
        "messages[0].content is 262145 bytes; the limit is 262144 "
        "(memoryd.history.max_content_bytes)",
        id="content-too-large",
    ),
    pytest.param(
        md.AppendMessagesRequest(
            conversation=_conversation(), messages=[user("é" * (128 * 1024 + 1))]
        ),
        "messages[0].content is 262146 bytes; the limit is 262144 "
        "(memoryd.history.max_content_bytes)",
        id="content-too-large-in-utf8-bytes",
    ),
    pytest.param(
        md.AppendMessagesRequest(conversation=_conversation(), messages=[user("x", kind="Chat")]),
        "messages[0].kind must be lowercase letters, digits and '_', starting with a letter, "
        "at most 64 characters; got 'Chat'",
        id="bad-kind",
    ),
    pytest.param(
        md.AppendMessagesRequest(
            conversation=_conversation(), messages=[user("x", kind="checkpoint_summary")]
        ),
        "messages[0].kind 'checkpoint_summary' is reserved for the server",
        id="reserved-kind",
    ),
    pytest.param(
        md.AppendMessagesRequest(
            conversation=_conversation(), messages=[user("x", client_message_id=" id")]
        ),
        "messages[0].client_message_id must not start or end with whitespace, got ' id'",
        id="padded-client-id",
    ),
    pytest.param(
        md.AppendMessagesRequest(
            conversation=_conversation(), messages=[user("x", sender="a\x00b")]
        ),
        "messages[0].sender must not contain control characters",
        id="control-in-sender",
    ),
    pytest.param(
        md.AppendMessagesRequest(
            conversation=_conversation(),
            messages=[user("x", created_at=timestamp_pb2.Timestamp(seconds=-(10**12)))],
        ),
        "messages[0].created_at is out of range (seconds -1000000000000, nanos 0)",
        id="created-at-out-of-range",
    ),
    pytest.param(
        md.AppendMessagesRequest(
            conversation=_conversation(), messages=[user(" ", metadata="nope")]
        ),
        "messages[0].metadata is not valid JSON: Expecting value at line 1 column 1",
        id="blank-but-malformed",
    ),
]


@pytest.mark.parametrize(("request_", "message"), BAD_APPENDS)
async def test_bad_appends_are_refused_precisely(
    memory: md.Stubs, request_: md.AppendMessagesRequest, message: str
) -> None:
    error = await rpc_error(memory.conversations.AppendMessages(request_))
    assert (error.code(), error.details()) == (grpc.StatusCode.INVALID_ARGUMENT, message)


async def test_refused_appends_wrote_nothing(memory: md.Stubs) -> None:
    # Runs after the table above (same module): none of those calls created the conversation.
    error = await rpc_error(
        memory.conversations.GetConversation(
            md.GetConversationRequest(conversation=_conversation())
        )
    )
    assert error.code() == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        pytest.param(
            md.ListMessagesRequest(conversation=_conversation(), page_token="not-a-token"),
            "page_token is malformed",
            id="garbage-token",
        ),
        pytest.param(
            md.ListMessagesRequest(conversation=_conversation(), page_token="eyJ2IjoxfQ"),
            "page_token is malformed",
            id="token-missing-fields",
        ),
        pytest.param(
            md.ListMessagesRequest(conversation=_conversation(), page_size=-1),
            "page_size must not be negative, got -1",
            id="negative-page-size",
        ),
        pytest.param(
            md.ListMessagesRequest(conversation=_conversation(), page_size=1001),
            "page_size is 1001; the limit is 1000",
            id="huge-page-size",
        ),
        pytest.param(
            md.ListMessagesRequest(conversation=_conversation(), kinds=["ok", ""]),
            "kinds[1] must not be empty",
            id="empty-kind-filter",
        ),
        pytest.param(
            md.ListMessagesRequest(),
            "conversation is required (with channel and chat_id)",
            id="no-conversation",
        ),
    ],
)
async def test_bad_list_requests(
    memory: md.Stubs, request_: md.ListMessagesRequest, message: str
) -> None:
    error = await rpc_error(memory.conversations.ListMessages(request_))
    assert (error.code(), error.details()) == (grpc.StatusCode.INVALID_ARGUMENT, message)


async def test_a_token_cannot_be_used_on_another_conversation(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    await append(memory, conversation, *(user(f"m{i}") for i in range(3)))
    first = await memory.conversations.ListMessages(
        md.ListMessagesRequest(conversation=conversation, page_size=1)
    )
    other = md.Conversation(channel=conversation.channel, chat_id=conversation.chat_id + "x")
    for request_ in (
        md.ListMessagesRequest(conversation=other, page_token=first.next_page_token),
        md.ListMessagesRequest(
            conversation=conversation, page_token=first.next_page_token, all_history=True
        ),
        md.ListMessagesRequest(
            conversation=conversation, page_token=first.next_page_token, kinds=["voice_turn"]
        ),
    ):
        error = await rpc_error(memory.conversations.ListMessages(request_))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error.details() == (
            "page_token was issued for a different conversation, kind filter or history mode"
        )


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        pytest.param(
            md.SearchHistoryRequest(query="x"),
            "one of conversation, owner or agent is required",
            id="no-scope",
        ),
        pytest.param(
            md.SearchHistoryRequest(query="x", conversation=md.Conversation(channel="t")),
            "conversation.chat_id is required",
            id="incomplete-conversation",
        ),
        pytest.param(
            md.SearchHistoryRequest(query="x", agent=md.AgentScope(), limit=-1),
            "limit must not be negative, got -1",
            id="negative-limit",
        ),
        pytest.param(
            md.SearchHistoryRequest(query="x", agent=md.AgentScope(), limit=101),
            "limit is 101; the limit is 100",
            id="huge-limit",
        ),
        pytest.param(
            md.SearchHistoryRequest(query="x" * 1025, agent=md.AgentScope()),
            "query is 1025 characters long; the limit is 1024",
            id="huge-query",
        ),
        pytest.param(
            md.SearchHistoryRequest(query="x", owner=md.OwnerScope(owner_id="\tbob")),
            "owner.owner_id must not start or end with whitespace, got '\\tbob'",
            id="bad-owner",
        ),
    ],
)
async def test_bad_searches(
    memory: md.Stubs, request_: md.SearchHistoryRequest, message: str
) -> None:
    error = await rpc_error(memory.conversations.SearchHistory(request_))
    assert (error.code(), error.details()) == (grpc.StatusCode.INVALID_ARGUMENT, message)


async def test_bytes_that_are_not_a_valid_request_get_invalid_argument(
    channel: grpc.aio.Channel,
) -> None:
    raw = channel.unary_unary(
        "/memoryd.v2.ConversationService/AppendMessages",
        request_serializer=lambda payload: payload,
        response_deserializer=lambda payload: payload,
    )
    # Field 1 (conversation), length-delimited, containing field 3 (channel) with invalid UTF-8.
    invalid_utf8 = bytes([0x0A, 0x04, 0x1A, 0x02, 0xC3, 0x28])
    truncated = bytes([0x0A, 0x10, 0x1A])
    for payload in (invalid_utf8, truncated):
        error = await rpc_error(raw(payload))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (error.details() or "").startswith("the request is not a valid protobuf message")


async def test_unknown_conversation_is_not_found(memory: md.Stubs) -> None:
    error = await rpc_error(
        memory.conversations.GetConversation(
            md.GetConversationRequest(conversation=md.Conversation(channel="x", chat_id="nobody"))
        )
    )
    assert error.code() == grpc.StatusCode.NOT_FOUND
    assert error.details() == "conversation x:nobody:root (agent main, owner default) has no record"


async def test_requests_over_the_size_limit_are_refused(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    # 15 messages of 256 KiB fit the default 4 MiB request limit, and so does the echoed answer.
    response = await append(memory, conversation, *[user("y" * 256 * 1024) for _ in range(15)])
    assert len(response.results) == 15
    error = await rpc_error(
        append(memory, conversation, *[user("z" * 256 * 1024) for _ in range(17)])
    )
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    listed = await memory.conversations.ListMessages(
        md.ListMessagesRequest(conversation=conversation)
    )
    assert len(listed.messages) == 15


@pytest.mark.sqlite_only("breaks SQLite's file to cause a failure")
async def test_an_unexpected_failure_is_internal_with_a_reference_and_no_internals(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    # A defect the server cannot foresee: its schema changed under it (another process dropped
    # a table). The caller gets INTERNAL, a reference id and nothing of the server's internals;
    # the log has the details under the same reference.
    server = start_server(tmp_path / "home").start()
    owner = md.OwnerScope(agent_id="main", owner_id="default")
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        await memory.memory.ListMemorySources(md.ListMemorySourcesRequest(owner=owner))
        database = SqliteConnection(str(server.home / "memory.db"))
        database.execute("DROP TABLE memory_sources")
        database.close()
        error = await rpc_error(
            memory.memory.ListMemorySources(md.ListMemorySourcesRequest(owner=owner))
        )
    assert error.code() == grpc.StatusCode.INTERNAL
    found = re.fullmatch(
        r"internal error \(reference ([0-9a-f]{8})\); the server log has the details",
        error.details() or "",
    )
    assert found is not None, error.details()
    logged = server.wait_for_event(Event.RPC_ERROR)
    assert logged["ref"] == found.group(1)
    assert logged["method"] == "/memoryd.v2.MemoryService/ListMemorySources"
    assert "memory_sources" in logged["exception"]  # the details stay in the log
