"""Input that once reached INTERNAL: hostile JSON metadata, forged page tokens, and a first turn
with nothing to store. Each is INVALID_ARGUMENT with a precise message, or accepted, and a
refusal writes nothing."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import grpc
import pytest

import memoryd_client as md
from memoryd.testing.server_process import ServerProcess
from tests.helpers import append, fresh_conversation, owner_of, rpc_error, store, user

HOSTILE_METADATA = [
    pytest.param(
        '{"a":"\\ud800"}',
        "holds an unpaired UTF-16 surrogate (\\ud800), which is not a Unicode character",
        id="lone-high-surrogate",
    ),
    pytest.param(
        '{"\\udfff":1}',
        "holds an unpaired UTF-16 surrogate (\\udfff), which is not a Unicode character",
        id="lone-low-surrogate-in-a-key",
    ),
    pytest.param('{"a":NaN}', "is not valid JSON: NaN is not a JSON number", id="nan"),
    pytest.param(
        '{"a":-Infinity}', "is not valid JSON: -Infinity is not a JSON number", id="infinity"
    ),
    pytest.param(
        '{"a":1e999}',
        "is not valid JSON: the number '1e999' is out of range (not a finite double)",
        id="overflowing-float",
    ),
    pytest.param(
        '{"a":' + "9" * 5000 + "}",
        "is not valid JSON: an integer of 5000 digits is longer than the 4300 digits accepted",
        id="5000-digit-integer",
    ),
    pytest.param(
        '{"a":' + "[" * 64 + "]" * 64 + "}", "is nested more than 64 levels deep", id="depth-65"
    ),
    pytest.param(
        "[" * 30_000 + "]" * 30_000, "is nested more than 64 levels deep", id="depth-30000"
    ),
    pytest.param(
        '{"a":' + "[" * 5000, "is nested more than 64 levels deep", id="deep-and-unterminated"
    ),
]
ACCEPTED_METADATA = [
    '{"a":"\\ud83d\\ude00"}',  # a surrogate pair is an ordinary character (an emoji)
    '{"a":' + "9" * 4300 + "}",
    '{"a":' + "[" * 63 + "]" * 63 + "}",
    '{"a":1e308,"b":-0.0,"c":"\\u0000"}',
]


@pytest.mark.parametrize(("metadata", "reason"), HOSTILE_METADATA)
async def test_hostile_message_metadata_is_refused_precisely(
    memory: md.Stubs, conversation: md.Conversation, metadata: str, reason: str
) -> None:
    for call in (
        memory.conversations.AppendMessages(
            md.AppendMessagesRequest(
                conversation=conversation, messages=[user("hi", metadata=metadata)]
            )
        ),
        memory.conversations.CommitTurn(
            md.CommitTurnRequest(
                conversation=conversation, messages=[user("hi", metadata=metadata)]
            )
        ),
    ):
        error = await rpc_error(call)
        assert (error.code(), error.details()) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            f"messages[0].metadata {reason}",
        )
    error = await rpc_error(
        memory.conversations.GetConversation(md.GetConversationRequest(conversation=conversation))
    )
    assert error.code() == grpc.StatusCode.NOT_FOUND  # nothing was written


@pytest.mark.parametrize(("metadata", "reason"), HOSTILE_METADATA)
async def test_hostile_memory_metadata_is_refused_precisely(
    memory: md.Stubs, metadata: str, reason: str
) -> None:
    chat = fresh_conversation()
    stored = await store(memory, chat, "k", "kept", md.CATEGORY_IDENTITY)
    for call in (
        memory.memory.StoreMemory(
            md.StoreMemoryRequest(
                conversation=chat,
                category=md.CATEGORY_IDENTITY,
                key="k",
                value="replaced",
                metadata=metadata,
            )
        ),
        memory.memory.UpdateMemory(
            md.UpdateMemoryRequest(conversation=chat, id=stored.id, metadata=metadata)
        ),
    ):
        error = await rpc_error(call)
        assert (error.code(), error.details()) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            f"metadata {reason}",
        )
    row = await memory.memory.GetMemory(md.GetMemoryRequest(conversation=chat, id=stored.id))
    assert (row.memory.value, row.memory.metadata) == ("kept", "{}")


@pytest.mark.parametrize("metadata", ACCEPTED_METADATA)
async def test_unusual_but_valid_metadata_round_trips(
    memory: md.Stubs, conversation: md.Conversation, metadata: str
) -> None:
    await append(memory, conversation, user("hi", metadata=metadata))
    listed = await memory.conversations.ListMessages(
        md.ListMessagesRequest(conversation=conversation)
    )
    assert [m.metadata for m in listed.messages] == [metadata]
    chat = fresh_conversation()
    row = await store(memory, chat, "k", "v", md.CATEGORY_GOAL, metadata=metadata)
    assert json.loads(row.metadata) == json.loads(metadata)
    updated = await memory.memory.UpdateMemory(
        md.UpdateMemoryRequest(conversation=chat, id=row.id, metadata='{"z":1}')
    )
    assert json.loads(updated.memory.metadata) == json.loads(metadata) | {"z": 1}


def _forged(payload: bytes, mac: bytes = b"0" * 16) -> str:
    encode = base64.urlsafe_b64encode
    return f"{encode(payload).decode().rstrip('=')}.{encode(mac).decode().rstrip('=')}"


FORGED_TOKENS = [
    pytest.param("not-a-token", "page_token is malformed", id="garbage"),
    pytest.param("eyJ2IjoxfQ", "page_token is malformed", id="unsigned-v1-shape"),
    pytest.param("é.é", "page_token is malformed", id="not-base64"),
    pytest.param("x" * 5000, "page_token is malformed", id="huge"),
    pytest.param(_forged(b"[" * 700), "not-issued", id="deeply-nested-json"),
    pytest.param(_forged(b'{"v":2,"b":1,"f":0,"h":"\\ud800"}'), "not-issued", id="lone-surrogate"),
    pytest.param(_forged(b'{"v":2,"b":' + b"9" * 700 + b"}"), "not-issued", id="huge-number"),
    pytest.param(_forged(b'{"v":2,"b":-1,"f":0,"h":"x"}'), "not-issued", id="recreated-plain"),
]
NOT_ISSUED = (
    "page_token was not issued by this server for this listing (altered, or from another "
    "database); list again without a token"
)


@pytest.mark.parametrize(("token", "message"), FORGED_TOKENS)
async def test_forged_page_tokens_are_refused_before_they_are_read(
    memory: md.Stubs, conversation: md.Conversation, token: str, message: str
) -> None:
    expected = NOT_ISSUED if message == "not-issued" else message
    for call in (
        memory.conversations.ListMessages(
            md.ListMessagesRequest(conversation=conversation, page_token=token)
        ),
        memory.memory.ListMemories(
            md.ListMemoriesRequest(owner=owner_of(conversation), page_token=token)
        ),
    ):
        error = await rpc_error(call)
        assert (error.code(), error.details()) == (grpc.StatusCode.INVALID_ARGUMENT, expected)


async def test_a_token_of_one_listing_is_refused_by_another(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    await append(memory, conversation, user("a"), user("b"))
    page = await memory.conversations.ListMessages(
        md.ListMessagesRequest(conversation=conversation, page_size=1)
    )
    error = await rpc_error(
        memory.memory.ListMemories(
            md.ListMemoriesRequest(owner=owner_of(conversation), page_token=page.next_page_token)
        )
    )
    assert (error.code(), error.details()) == (grpc.StatusCode.INVALID_ARGUMENT, NOT_ISSUED)


async def test_tokens_outlive_a_restart_and_never_cross_databases(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    chat = md.Conversation(channel="t", chat_id="1")
    server = start_server(tmp_path / "one").start()
    async with md.connect(server.address) as channel:
        stub = md.Stubs(channel)
        await append(stub, chat, user("a"), user("b"), user("c"))
        first = await stub.conversations.ListMessages(
            md.ListMessagesRequest(conversation=chat, page_size=1)
        )
    assert server.stop() == 0
    restarted = start_server(tmp_path / "one").start()
    other = start_server(tmp_path / "two").start()
    async with md.connect(restarted.address) as channel:
        stub = md.Stubs(channel)
        second = await stub.conversations.ListMessages(
            md.ListMessagesRequest(conversation=chat, page_size=1, page_token=first.next_page_token)
        )
        assert [m.content for m in second.messages] == ["b"]
    async with md.connect(other.address) as channel:
        stub = md.Stubs(channel)
        await append(stub, chat, user("a"), user("b"), user("c"))
        error = await rpc_error(
            stub.conversations.ListMessages(
                md.ListMessagesRequest(
                    conversation=chat, page_size=1, page_token=first.next_page_token
                )
            )
        )
        assert (error.code(), error.details()) == (grpc.StatusCode.INVALID_ARGUMENT, NOT_ISSUED)


async def test_a_first_turn_with_only_blank_text_records_the_turn(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    # A first turn that was only an image: no text to store, but the turn and its usage count.
    response = await memory.conversations.CommitTurn(
        md.CommitTurnRequest(
            conversation=conversation,
            messages=[user("  \n ")],
            usage=md.TurnUsage(peak_prompt_tokens=1200, context_window=8000),
        )
    )
    assert [r.outcome for r in response.results] == [md.APPEND_OUTCOME_SKIPPED_BLANK]
    assert response.review_pending is False
    described = await memory.conversations.GetConversation(
        md.GetConversationRequest(conversation=conversation)
    )
    assert (described.message_count, described.completed_turns) == (0, 1)
    assert (described.peak_prompt_tokens, described.context_window) == (1200, 8000)
    state = await memory.reviews.GetReviewState(md.GetReviewStateRequest(conversation=conversation))
    assert state.pending_input is False
