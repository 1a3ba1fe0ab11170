"""No answer is larger than a default gRPC client accepts (4 MiB): a committed write is always
answered readably, and listings end pages by bytes as well as by count."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

import memoryd_client as md
from memoryd.api.registration import _readable
from memoryd.domain.answers import MAX_ANSWER_BYTES
from memoryd.errors import ResourceExhausted
from tests.helpers import fresh_conversation, owner_of, rpc_error, store, user

# Builds answers of megabytes: run by `make test`, not by `make check`.
pytestmark = pytest.mark.slow

DEFAULT_CLIENT_LIMIT = 4 * 1024 * 1024
WIDE = "😀" * 256  # 1 KiB of UTF-8: every answer row repeats the conversation's identifiers


async def walk(call: Any, request: Any, field: str) -> list[list[Any]]:
    """Every page of a listing, in order; each one readable by a default client."""
    pages = []
    while True:
        page = await call(request)
        assert page.ByteSize() <= DEFAULT_CLIENT_LIMIT
        pages.append(list(getattr(page, field)))
        if not page.next_page_token:
            return pages
        request.page_token = page.next_page_token


def wide_conversation(tag: str) -> md.Conversation:
    return md.Conversation(
        agent_id=WIDE, owner_id=WIDE[:-1] + tag, channel=WIDE, chat_id=WIDE, thread_scope=WIDE
    )


def just_under_the_request_limit(conversation: md.Conversation) -> list[md.NewMessage]:
    """100 messages whose request is 8 KiB under the server's 4 MiB limit."""
    probe = md.AppendMessagesRequest(
        conversation=conversation, messages=[user("needle ")] * 100, echo_messages=True
    )
    room = DEFAULT_CLIENT_LIMIT - 8 * 1024 - probe.ByteSize()
    return [user("needle " + "x" * (room // 100), client_message_id=f"m{i}") for i in range(100)]


async def test_a_request_just_under_the_limit_is_answered_readably(
    memory: md.Stubs,
) -> None:
    conversation = wide_conversation("a")
    messages = just_under_the_request_limit(conversation)
    request = md.AppendMessagesRequest(
        conversation=conversation, messages=messages, echo_messages=True
    )
    assert DEFAULT_CLIENT_LIMIT - 8 * 1024 <= request.ByteSize() <= DEFAULT_CLIENT_LIMIT

    echoed = await memory.conversations.AppendMessages(
        request
    )  # the default client reads the answer
    assert [r.outcome for r in echoed.results] == [md.APPEND_OUTCOME_STORED] * 100
    assert echoed.echo_truncated
    assert all(r.id > 0 for r in echoed.results)
    assert 0 < sum(r.HasField("message") for r in echoed.results) < 100
    assert echoed.ByteSize() <= DEFAULT_CLIENT_LIMIT

    retry = await memory.conversations.AppendMessages(
        request
    )  # the retry of a committed write, too
    assert [r.outcome for r in retry.results] == [md.APPEND_OUTCOME_DUPLICATE] * 100
    assert [r.id for r in retry.results] == [r.id for r in echoed.results]

    plain = await memory.conversations.AppendMessages(
        md.AppendMessagesRequest(conversation=conversation, messages=messages)
    )
    assert not plain.echo_truncated
    assert plain.ByteSize() < 100 * 32
    committed = await memory.conversations.CommitTurn(
        md.CommitTurnRequest(conversation=conversation, messages=messages, echo_messages=True)
    )
    assert committed.echo_truncated
    assert committed.ByteSize() <= DEFAULT_CLIENT_LIMIT


async def test_large_pages_end_by_bytes_and_the_walk_finds_everything(
    memory: md.Stubs,
) -> None:
    conversation = wide_conversation("b")
    messages = just_under_the_request_limit(conversation)
    stored = await memory.conversations.AppendMessages(
        md.AppendMessagesRequest(conversation=conversation, messages=messages)
    )
    pages = await walk(
        memory.conversations.ListMessages,
        md.ListMessagesRequest(conversation=conversation, page_size=1000),
        "messages",
    )
    assert len(pages) == 2
    oldest_first = [m.id for page in reversed(pages) for m in page]  # newest page comes first
    assert oldest_first == [r.id for r in stored.results]

    found = await memory.conversations.SearchHistory(
        md.SearchHistoryRequest(query="needle", conversation=conversation, limit=100)
    )
    assert found.truncated
    assert 0 < len(found.hits) < 100
    # Recall's 50 hits, each a message of 84 KB, would be 4.2 MB (whatever the snippets hold).
    recalling = wide_conversation("r")
    for batch in range(2):
        await memory.conversations.AppendMessages(
            md.AppendMessagesRequest(
                conversation=recalling,
                messages=[
                    user("needle " + "y" * 84_000, client_message_id=f"r{batch}-{i}")
                    for i in range(25)
                ],
            )
        )
    recalled = await memory.memory.Recall(
        md.RecallRequest(
            conversation=recalling, query="needle", source=md.RECALL_SOURCE_HISTORY, limit=50
        )
    )
    assert recalled.truncated
    assert 0 < len(recalled.hits) < 50
    assert recalled.ByteSize() <= DEFAULT_CLIENT_LIMIT


async def test_memory_listings_end_pages_by_bytes(memory: md.Stubs) -> None:
    chat = fresh_conversation()
    metadata = '{"blob":"' + "m" * 60_000 + '"}'
    for index in range(80):  # 80 rows of 60 KB: one page of 80 would be 4.8 MB
        await store(memory, chat, f"note-{index:02d}", "v", metadata=metadata)
    pages = await walk(
        memory.memory.ListMemories,
        md.ListMemoriesRequest(conversation=chat, page_size=1000),
        "memories",
    )
    assert len(pages) == 2
    keys = sorted(item.memory.key for page in pages for item in page)
    assert keys == [f"note-{index:02d}" for index in range(80)]


@pytest.mark.parametrize("page_size", [1, 2, 0])
async def test_sources_resources_and_revisions_come_in_pages(
    memory: md.Stubs, page_size: int
) -> None:
    base = fresh_conversation()
    for index in range(3):
        chat = md.Conversation(agent_id=base.agent_id, channel="t", chat_id=f"c{index}")
        await store(memory, chat, "k", f"note {index}")  # a conversation source each
        owned = md.Conversation(
            agent_id=base.agent_id, owner_id=f"o{index}", channel="t", chat_id="1"
        )
        await store(memory, owned, "name", f"Name {index}", md.CATEGORY_IDENTITY)
    owner = owner_of(md.Conversation(agent_id=base.agent_id))

    pages = await walk(
        memory.memory.ListMemorySources,
        md.ListMemorySourcesRequest(owner=owner, page_size=page_size),
        "sources",
    )
    assert all(len(page) == page_size for page in pages[:-1])
    assert sorted(source.id for page in pages for source in page) == [
        "conversation:t:c0:root",
        "conversation:t:c1:root",
        "conversation:t:c2:root",
    ]
    pages = await walk(
        memory.resources.ListResources,
        md.ListResourcesRequest(agent_id=base.agent_id, page_size=page_size),
        "resources",
    )
    assert all(len(page) == page_size for page in pages[:-1])
    assert [r.ref.scope_id for page in pages for r in page] == ["o0", "o1", "o2"]

    ref = md.ResourceRef(agent_id=base.agent_id, type=md.RESOURCE_TYPE_USER_MD, scope_id="o0")
    for index in range(3):
        await store(
            memory,
            md.Conversation(agent_id=base.agent_id, owner_id="o0", channel="t", chat_id="1"),
            "name",
            f"Renamed {index}",
            md.CATEGORY_IDENTITY,
        )
    numbers: list[int] = []
    before = 0
    while True:
        page = await memory.resources.ListRevisions(
            md.ListRevisionsRequest(ref=ref, limit=page_size, before_revision=before)
        )
        numbers += [revision.revision for revision in page.revisions]
        before = page.next_before_revision
        if not before:
            break
    assert numbers == [4, 3, 2, 1]


async def test_a_token_of_one_source_listing_is_refused_by_another(
    memory: md.Stubs,
) -> None:
    base = fresh_conversation()
    for index in range(2):
        chat = md.Conversation(agent_id=base.agent_id, channel="t", chat_id=f"c{index}")
        await store(memory, chat, "k", "note")
    owner = owner_of(md.Conversation(agent_id=base.agent_id))
    first = await memory.memory.ListMemorySources(
        md.ListMemorySourcesRequest(owner=owner, page_size=1)
    )
    error = await rpc_error(
        memory.memory.ListMemorySources(
            md.ListMemorySourcesRequest(
                owner=owner, page_size=1, status="paused", page_token=first.next_page_token
            )
        )
    )
    assert (error.code(), error.details()) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "page_token was issued for a different request",
    )


def test_the_last_guard_refuses_an_answer_a_default_client_cannot_read() -> None:
    small = md.ListMessagesResponse(next_page_token="t")
    assert _readable(small) is small
    huge = md.ListMessagesResponse(messages=[md.Message(content="x" * MAX_ANSWER_BYTES)])
    with pytest.raises(ResourceExhausted, match=r"the answer would be 4,194,\d+ bytes, more than"):
        _readable(huge)
