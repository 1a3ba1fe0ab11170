"""AppendMessages through the real server: storing, idempotent retries, blanks, atomicity."""

from __future__ import annotations

import grpc
from google.protobuf import timestamp_pb2

import memoryd_client as md
from tests.helpers import append, assistant, rpc_error, user


async def test_append_returns_committed_rows_with_ids_and_timestamps(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    response = await append(
        memory,
        conversation,
        user("I moved to Lisbon last spring", metadata='{"lang": "en"}'),
        assistant("Lisbon is lovely."),
        echo=True,
    )
    first, second = response.results
    assert not response.echo_truncated
    assert (first.id, first.created_at) == (first.message.id, first.message.created_at)
    assert [r.outcome for r in response.results] == [md.APPEND_OUTCOME_STORED] * 2
    assert [r.index for r in response.results] == [0, 1]
    assert 0 < first.message.id < second.message.id
    assert first.message.content == "I moved to Lisbon last spring"
    assert first.message.metadata == '{"lang": "en"}'
    assert first.message.kind == "chat_message"
    assert first.message.trust == md.TRUST_OPERATOR
    assert first.message.created_at.seconds > 0
    assert first.message.conversation == md.Conversation(
        agent_id="main",
        owner_id="default",
        channel=conversation.channel,
        chat_id=conversation.chat_id,
        thread_scope="root",
    )
    assert second.message.role == md.ROLE_ASSISTANT
    assert response.history_version > 0

    listed = await memory.conversations.ListMessages(
        md.ListMessagesRequest(conversation=conversation)
    )
    assert [m.id for m in listed.messages] == [first.message.id, second.message.id]
    assert listed.messages[0] == first.message


async def test_without_echo_the_answer_carries_ids_and_times_only(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    response = await append(memory, conversation, user("x" * 200_000), user(" "))
    stored, blank = response.results
    assert not stored.HasField("message")
    assert stored.id > 0
    assert stored.created_at.seconds > 0
    assert (blank.id, blank.HasField("created_at")) == (0, False)
    assert response.ByteSize() < 100


async def test_client_message_id_makes_retries_safe(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    original = await append(
        memory, conversation, user("book the dentist", client_message_id="tg-1"), echo=True
    )
    retry = await append(
        memory, conversation, user("book the dentist", client_message_id="tg-1"), echo=True
    )
    assert retry.results[0].outcome == md.APPEND_OUTCOME_DUPLICATE
    assert retry.results[0].message == original.results[0].message
    # Nothing new was stored, so the window did not change.
    assert retry.history_version == original.history_version
    # The same key twice in one call stores it once.
    both = await append(
        memory,
        conversation,
        user("first", client_message_id="tg-2"),
        user("second", client_message_id="tg-2"),
        echo=True,
    )
    assert [r.outcome for r in both.results] == [
        md.APPEND_OUTCOME_STORED,
        md.APPEND_OUTCOME_DUPLICATE,
    ]
    assert both.results[1].message.content == "first"
    listed = await memory.conversations.ListMessages(
        md.ListMessagesRequest(conversation=conversation)
    )
    assert [m.content for m in listed.messages] == ["book the dentist", "first"]


async def test_client_message_id_is_scoped_to_its_conversation(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    other = md.Conversation(channel=conversation.channel, chat_id=conversation.chat_id + "-b")
    a = await append(memory, conversation, user("one", client_message_id="same"))
    b = await append(memory, other, user("two", client_message_id="same"))
    assert b.results[0].outcome == md.APPEND_OUTCOME_STORED
    assert a.results[0].id != b.results[0].id


async def test_blank_content_is_skipped_and_reported(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    response = await append(memory, conversation, user("  \n\t "), user("real"), user(""))
    assert [r.outcome for r in response.results] == [
        md.APPEND_OUTCOME_SKIPPED_BLANK,
        md.APPEND_OUTCOME_STORED,
        md.APPEND_OUTCOME_SKIPPED_BLANK,
    ]
    assert not response.results[0].HasField("message")
    listed = await memory.conversations.ListMessages(
        md.ListMessagesRequest(conversation=conversation)
    )
    assert [m.content for m in listed.messages] == ["real"]


async def test_only_blank_messages_create_nothing(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    response = await append(memory, conversation, user(" "))
    assert response.results[0].outcome == md.APPEND_OUTCOME_SKIPPED_BLANK
    error = await rpc_error(
        memory.conversations.GetConversation(md.GetConversationRequest(conversation=conversation))
    )
    assert error.code() == grpc.StatusCode.NOT_FOUND


async def test_a_call_with_one_invalid_message_stores_nothing(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    error = await rpc_error(
        append(memory, conversation, user("valid"), user("bad", metadata="[1, 2]"), user("also"))
    )
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == "messages[1].metadata must be a JSON object, got an array"
    listed = await memory.conversations.ListMessages(
        md.ListMessagesRequest(conversation=conversation, all_history=True)
    )
    assert list(listed.messages) == []


async def test_defaults_and_explicit_fields_round_trip(
    memory: md.Stubs,
) -> None:
    conversation = md.Conversation(
        agent_id="helper", owner_id="bob", channel="slack", chat_id="C042", thread_scope="170.1"
    )
    said_at = timestamp_pb2.Timestamp(seconds=1_700_000_000, nanos=123_000_000)
    response = await append(
        memory,
        conversation,
        md.NewMessage(
            role=md.ROLE_TOOL,
            sender="weather",
            kind="tool_result",
            content="22°C and sunny ☀️",
            created_at=said_at,
            trust=md.TRUST_GUEST,
            client_message_id="x-1",
        ),
        echo=True,
    )
    stored = response.results[0].message
    assert stored.conversation == conversation
    assert stored.kind == "tool_result"
    assert stored.trust == md.TRUST_GUEST
    assert stored.created_at == said_at  # millisecond precision is kept exactly
    assert stored.metadata == "{}"
    listed = await memory.conversations.ListMessages(
        md.ListMessagesRequest(conversation=conversation)
    )
    assert listed.messages[0] == stored


async def test_unicode_and_large_content_round_trip(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    text = "🙂 東京 café\u200b — " + "x" * (256 * 1024 - 30)
    assert len(text.encode()) <= 256 * 1024
    response = await append(memory, conversation, user(text), echo=True)
    listed = await memory.conversations.ListMessages(
        md.ListMessagesRequest(conversation=conversation)
    )
    assert listed.messages[0].content == text == response.results[0].message.content
