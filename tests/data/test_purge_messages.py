"""PurgeMessages through the real server: messages of a window erased by id, with their index
entries, vectors and the review exchanges that may quote them; the refusals, and what stays."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import grpc
import pytest

import memoryd_client as md
from memoryd.testing.configs import review_config
from memoryd.testing.fake_model import FakeModel
from memoryd.testing.server_process import ServerProcess
from tests.backends import on_postgres, postgres_rows
from tests.data.test_verified_erasure import raw, vectors_of
from tests.helpers import append, assistant, rpc_error, user
from tests.memory.test_retrieval import embedded
from tests.review_helpers import review_now

# Exercises storage: make test runs it on PostgreSQL too.
pytestmark = pytest.mark.storage


async def purge(
    memory: md.Stubs,
    conversation: md.Conversation,
    *ids: int,
    trust: md.Trust.ValueType = md.TRUST_UNSPECIFIED,
) -> md.PurgeMessagesResponse:
    """PurgeMessages of these ids."""
    return await memory.conversations.PurgeMessages(
        md.PurgeMessagesRequest(conversation=conversation, message_ids=list(ids), trust=trust)
    )


async def contents(memory: md.Stubs, conversation: md.Conversation) -> list[str]:
    """Every stored message of the conversation, oldest first."""
    listed = await memory.conversations.ListMessages(
        md.ListMessagesRequest(conversation=conversation, all_history=True)
    )
    return [message.content for message in listed.messages]


async def found_by_words(memory: md.Stubs, conversation: md.Conversation, query: str) -> list[str]:
    """What a word search of the conversation finds."""
    response = await memory.conversations.SearchHistory(
        md.SearchHistoryRequest(query=query, conversation=conversation, mode=md.SEARCH_MODE_LEXICAL)
    )
    return [hit.message.content for hit in response.hits]


async def test_named_messages_go_with_their_index_entries_and_the_rest_stays(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    sent = await append(
        memory,
        conversation,
        user("I like herons"),
        assistant("Noted: herons"),
        user("my locker code is 7731 quokka"),
        assistant("I will keep quokka in mind"),
    )
    ids = [result.id for result in sent.results]
    # Out of order and repeated: erased once each, reported ascending.
    purged = await purge(memory, conversation, ids[3], ids[2], ids[3])
    assert list(purged.purged_message_ids) == [ids[2], ids[3]]
    assert purged.history_version > sent.history_version
    assert await contents(memory, conversation) == ["I like herons", "Noted: herons"]
    for query in ("quokka", "7731", "uokk"):
        assert await found_by_words(memory, conversation, query) == []
    assert await found_by_words(memory, conversation, "herons") != []
    error = await rpc_error(
        memory.conversations.GetMessage(md.GetMessageRequest(owner=md.OwnerScope(), id=ids[2]))
    )
    assert error.code() == grpc.StatusCode.NOT_FOUND
    state = await memory.conversations.GetConversation(
        md.GetConversationRequest(conversation=conversation)
    )
    assert (state.message_count, state.history_version) == (2, purged.history_version)

    # A retry erases nothing more and leaves the version where it is.
    again = await purge(memory, conversation, ids[2], ids[3])
    assert list(again.purged_message_ids) == []
    assert again.history_version == purged.history_version


async def test_a_message_of_another_conversation_or_owner_is_never_erased(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    mine = await append(memory, conversation, user("mine"))
    other = md.Conversation(channel=conversation.channel, chat_id=conversation.chat_id + "-x")
    another_owner = md.Conversation(
        owner_id="someone-else", channel=conversation.channel, chat_id=conversation.chat_id
    )
    theirs = await append(memory, other, user("the other chat's"))
    owned = await append(memory, another_owner, user("another owner's"))
    purged = await purge(memory, conversation, theirs.results[0].id, owned.results[0].id)
    assert list(purged.purged_message_ids) == []
    assert purged.history_version == mine.history_version
    assert await contents(memory, other) == ["the other chat's"]
    assert await contents(memory, another_owner) == ["another owner's"]


async def test_a_message_before_the_window_or_a_checkpoint_refuses_the_whole_call(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    before = await append(memory, conversation, user("said before /new"))
    await memory.conversations.ClearConversation(
        md.ClearConversationRequest(conversation=conversation)
    )
    after = await append(memory, conversation, user("said after /new"))
    error = await rpc_error(purge(memory, conversation, after.results[0].id, before.results[0].id))
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert f"message {before.results[0].id} is before the conversation's window" in (
        error.details() or ""
    )
    assert await contents(memory, conversation) == ["said before /new", "said after /new"]


@pytest.mark.parametrize(
    ("ids", "code", "words"),
    [
        ([], grpc.StatusCode.INVALID_ARGUMENT, "message_ids must name at least one message"),
        (list(range(1, 102)), grpc.StatusCode.INVALID_ARGUMENT, "the limit is 100 per call"),
        ([5, 0], grpc.StatusCode.INVALID_ARGUMENT, "message_ids[1] is 0"),
        ([-(2**63)], grpc.StatusCode.INVALID_ARGUMENT, "message ids are positive"),
    ],
)
async def test_bad_ids_are_refused_precisely(
    memory: md.Stubs,
    conversation: md.Conversation,
    ids: list[int],
    code: grpc.StatusCode,
    words: str,
) -> None:
    await append(memory, conversation, user("stays"))
    error = await rpc_error(purge(memory, conversation, *ids))
    assert error.code() == code
    assert words in (error.details() or "")
    assert await contents(memory, conversation) == ["stays"]


async def test_a_guest_may_not_and_a_conversation_is_required(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    sent = await append(memory, conversation, user("stays"))
    guest = await rpc_error(purge(memory, conversation, sent.results[0].id, trust=md.TRUST_GUEST))
    assert guest.code() == grpc.StatusCode.PERMISSION_DENIED
    unnamed = await rpc_error(
        memory.conversations.PurgeMessages(md.PurgeMessagesRequest(message_ids=[1]))
    )
    assert unnamed.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert await contents(memory, conversation) == ["stays"]


async def test_a_memory_row_learnt_from_an_erased_message_stays_without_its_link(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    sent = await append(memory, conversation, user("call me Ada"))
    stored = await memory.memory.StoreMemory(
        md.StoreMemoryRequest(
            conversation=conversation,
            category=md.CATEGORY_IDENTITY,
            key="name",
            value="Goes by Ada",
            source_message_id=sent.results[0].id,
        )
    )
    assert stored.memory.provenance.source_message_id == sent.results[0].id
    await purge(memory, conversation, sent.results[0].id)
    row = await memory.memory.GetMemory(md.GetMemoryRequest(id=stored.memory.id))
    assert row.memory.value == "Goes by Ada"
    assert row.memory.provenance.source_message_id == 0


async def test_vectors_and_the_review_exchanges_that_may_quote_it_go_and_no_byte_stays(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    marker = f"zq{uuid.uuid4().hex[:12]}msg"
    with FakeModel() as model:
        config = review_config(model, enabled=False, keep_review_exchanges=True)
        server = start_server(tmp_path / "home", config=config).start()
        chat = md.Conversation(owner_id="ada", channel="telegram", chat_id="pop")
        async with md.connect(server.address) as channel:
            memory = md.Stubs(channel)
            kept = await append(memory, chat, user("an earlier message that stays"))
            model.reply(json.dumps({"operations": []}))
            earlier_run = (await review_now(memory, chat)).review_run_id
            sent = await append(memory, chat, user(f"my code word is {marker}"))
            model.reply(json.dumps({"operations": []}))
            quoting_run = (await review_now(memory, chat)).review_run_id
            exchange = await memory.reviews.GetReviewExchange(
                md.GetReviewExchangeRequest(conversation=chat, run_id=quoting_run)
            )
            assert marker in exchange.prompt[1].content
            await embedded(memory)
            if not on_postgres():
                assert marker.encode() in raw(server.home)
                assert vectors_of(server.home, "ada") == 2

            purged = await purge(memory, chat, sent.results[0].id)
            assert list(purged.purged_message_ids) == [sent.results[0].id]

            error = await rpc_error(
                memory.reviews.GetReviewExchange(
                    md.GetReviewExchangeRequest(conversation=chat, run_id=quoting_run)
                )
            )
            assert error.code() == grpc.StatusCode.NOT_FOUND
            # The run before the erased message could not quote it: its exchange stays.
            earlier = await memory.reviews.GetReviewExchange(
                md.GetReviewExchangeRequest(conversation=chat, run_id=earlier_run)
            )
            assert "an earlier message that stays" in earlier.prompt[1].content
            assert await contents(memory, chat) == ["an earlier message that stays"]
            assert kept.results[0].id not in purged.purged_message_ids
            if on_postgres():
                assert postgres_rows(
                    server.home,
                    "SELECT count(*) FROM message_vectors WHERE message_id = %s",
                    (sent.results[0].id,),
                ) == [(0,)]
                return
            assert purged.wal_truncated
            assert marker.encode() not in raw(server.home)
            assert vectors_of(server.home, "ada") == 1
