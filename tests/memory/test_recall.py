"""Recall (memory_recall): query, key and listing modes, scopes, sources, jobs, hostile text,
the partial-word fallback and OpenHermit's search examples."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memoryd_client as md
from memoryd.testing.server_process import ServerProcess
from tests.helpers import append, fresh_conversation, owner_of, rpc_error, store, user
from tests.history.test_search import CORPUS, HOSTILE, MEANINGLESS


async def recall(
    memory: md.Stubs, conversation: md.Conversation, **fields: Any
) -> list[md.RecallHit]:
    """Recall by words (tests/memory/test_retrieval.py tests recall by meaning)."""
    fields.setdefault("mode", md.SEARCH_MODE_LEXICAL)
    response = await memory.memory.Recall(md.RecallRequest(conversation=conversation, **fields))
    return list(response.hits)


def values(hits: list[md.RecallHit]) -> list[str]:
    return [
        hit.memory.value if hit.HasField("memory") else hit.message.message.content for hit in hits
    ]


@pytest.fixture(scope="module")
async def noted(memory: md.Stubs) -> md.Conversation:
    """A conversation whose notes are CORPUS, one row each."""
    conversation = fresh_conversation()
    for index, text in enumerate(CORPUS):
        await store(memory, conversation, f"note-{chr(ord('a') + index)}", text)
    return conversation


@pytest.mark.parametrize(("query", "snippet", "match"), HOSTILE, ids=[h[0] for h in HOSTILE])
async def test_hostile_queries_are_plain_text(
    memory: md.Stubs, noted: md.Conversation, query: str, snippet: str, match: int
) -> None:
    hits = await recall(memory, noted, query=query)
    expected = snippet.replace("**", "")
    found = {hit.memory.value: hit.match for hit in hits}
    assert found.get(expected) == match, query
    if match == md.MATCH_KIND_SUBSTRING:
        # Literal: `%` and `_` are no wildcards, so only rows containing the text match.
        assert all(query.lower() in value.lower() for value in values(hits))


@pytest.mark.parametrize("query", MEANINGLESS)
async def test_words_that_carry_no_meaning_recall_nothing(
    memory: md.Stubs, noted: md.Conversation, query: str
) -> None:
    assert await recall(memory, noted, query=query) == []
    assert await recall(memory, noted, query=query, mode=md.SEARCH_MODE_HYBRID) == []


async def test_query_takes_priority_over_key_and_key_looks_up_exactly(
    memory: md.Stubs, noted: md.Conversation
) -> None:
    by_query = await recall(memory, noted, query="Bob", key="note-b")
    assert values(by_query) == [CORPUS[0]]
    by_key = await recall(memory, noted, key="note-b")
    assert [(hit.memory.key, hit.match) for hit in by_key] == [
        ("note-b", md.MATCH_KIND_UNSPECIFIED)
    ]
    assert await recall(memory, noted, key="note") == []


async def test_neither_lists_the_conversations_notes_newest_first(
    memory: md.Stubs, noted: md.Conversation
) -> None:
    listed = await recall(memory, noted, limit=3)
    assert values(listed) == list(reversed(CORPUS))[:3]


async def test_fallback_ranks_by_matching_words_and_fills_only_up_to_the_limit(
    memory: md.Stubs,
) -> None:
    conversation = fresh_conversation()
    await store(memory, conversation, "a", "alpha only")
    await store(memory, conversation, "greekletters", "alpha/beta, gamma")
    await store(memory, conversation, "c", "nothing relevant")
    # No row has every word as a whole word, so the fallback ranks partial matches.
    hits = await recall(memory, conversation, query="alph bet")
    assert values(hits) == ["alpha/beta, gamma", "alpha only"]
    assert all(hit.match == md.MATCH_KIND_SUBSTRING for hit in hits)
    assert values(await recall(memory, conversation, query="alph bet", limit=1)) == [
        "alpha/beta, gamma"
    ]
    # Keys are searched too, and a piece of a word must be a real term: "b" is none.
    assert values(await recall(memory, conversation, query="letters")) == ["alpha/beta, gamma"]
    assert await recall(memory, conversation, query="b") == []


async def test_archived_rows_never_appear(memory: md.Stubs) -> None:
    conversation = fresh_conversation()
    row = await store(memory, conversation, "lang", "Speaks Portuguese")
    assert values(await recall(memory, conversation, query="portuguese")) == ["Speaks Portuguese"]
    await memory.memory.ArchiveMemory(md.ArchiveMemoryRequest(conversation=conversation, id=row.id))
    for fields in ({"query": "portuguese"}, {"query": "portug"}, {"key": "lang"}, {}):
        for scope in (md.RECALL_SCOPE_CURRENT, md.RECALL_SCOPE_ALL):
            assert await recall(memory, conversation, scope=scope, **fields) == []


async def test_scopes(memory: md.Stubs) -> None:
    conversation = fresh_conversation()
    other_chat = md.Conversation(
        agent_id=conversation.agent_id, channel="slack", chat_id="elsewhere"
    )
    await store(memory, conversation, "here", "Kiwi note here")
    await store(memory, other_chat, "there", "Kiwi note there")
    await store(
        memory, conversation, "fruit", "Kiwi is the favourite fruit", md.CATEGORY_PREFERENCE
    )
    await store(memory, conversation, "repo", "Kiwi repo is the monorepo", md.CATEGORY_CONTEXT)
    current = values(await recall(memory, conversation, query="kiwi"))
    owner = values(await recall(memory, conversation, query="kiwi", scope=md.RECALL_SCOPE_OWNER))
    everything = values(await recall(memory, conversation, query="kiwi", scope=md.RECALL_SCOPE_ALL))
    assert current == ["Kiwi note here"]
    assert owner == ["Kiwi is the favourite fruit"]
    assert sorted(everything) == sorted(
        [
            "Kiwi note here",
            "Kiwi note there",
            "Kiwi is the favourite fruit",
            "Kiwi repo is the monorepo",
        ]
    )


async def test_source_all_takes_turns_between_memories_and_history(
    memory: md.Stubs,
) -> None:
    conversation = fresh_conversation()
    for index in range(3):
        await store(memory, conversation, f"m{index}", f"mango fact {index}")
    await append(memory, conversation, *(user(f"mango message {index}") for index in range(3)))
    hits = await recall(memory, conversation, query="mango", source=md.RECALL_SOURCE_ALL, limit=4)
    assert [hit.source for hit in hits] == [
        md.RECALL_SOURCE_MEMORIES,
        md.RECALL_SOURCE_HISTORY,
        md.RECALL_SOURCE_MEMORIES,
        md.RECALL_SOURCE_HISTORY,
    ]
    history = await recall(memory, conversation, query="mango", source=md.RECALL_SOURCE_HISTORY)
    assert len(history) == 3
    assert all(hit.message.match == md.MATCH_KIND_WORD and hit.rank < 0 for hit in history)
    only_memories = await recall(memory, conversation, query="mango", limit=10)
    assert len(only_memories) == 3
    assert all(h.source == md.RECALL_SOURCE_MEMORIES for h in only_memories)


async def test_inside_a_job_only_the_jobs_rows_are_readable(memory: md.Stubs) -> None:
    conversation = fresh_conversation()
    owner = owner_of(conversation)
    await store(memory, conversation, "note", "Quarterly report draft")
    await memory.memory.StoreMemory(
        md.StoreMemoryRequest(
            owner=owner, job_id="reports", key="last", value="Quarterly report sent"
        )
    )
    inside = await recall(memory, conversation, query="quarterly report", job_id="reports")
    assert values(inside) == ["Quarterly report sent"]
    outside = await recall(
        memory, conversation, query="quarterly report", scope=md.RECALL_SCOPE_ALL
    )
    assert values(outside) == ["Quarterly report draft"]  # job rows are not for conversations
    for source in (md.RECALL_SOURCE_HISTORY, md.RECALL_SOURCE_ALL):
        error = await rpc_error(
            memory.memory.Recall(
                md.RecallRequest(
                    conversation=conversation, query="x", source=source, job_id="reports"
                )
            )
        )
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED
        assert error.details() == (
            "Scheduled jobs cannot access conversation history; use source=memories scoped to "
            "job:self."
        )
    error = await rpc_error(
        memory.memory.Recall(
            md.RecallRequest(
                conversation=conversation, query="x", scope=md.RECALL_SCOPE_OWNER, job_id="reports"
            )
        )
    )
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"limit": 51}, "limit must be between 0 and 50, got 51"),
        ({"limit": -1}, "limit must be between 0 and 50, got -1"),
        ({"query": "x" * 1025}, "query is 1025 characters long; the limit is 1024"),
        ({"scope": 7}, "scope has unknown value 7"),
        ({"source": 7}, "source has unknown value 7"),
    ],
)
async def test_bad_recalls_are_invalid_arguments(
    memory: md.Stubs, fields: dict[str, Any], message: str
) -> None:
    error = await rpc_error(
        memory.memory.Recall(md.RecallRequest(conversation=fresh_conversation(), **fields))
    )
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == message


async def test_recall_needs_a_conversation(memory: md.Stubs) -> None:
    error = await rpc_error(memory.memory.Recall(md.RecallRequest(query="x")))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_an_owner_recalls_without_a_conversation(memory: md.Stubs) -> None:
    """An operator's search over everything of an owner (the console's): rows of every scope
    of the owner, and its conversations' messages; another owner's never."""
    conversation = fresh_conversation()
    other_chat = md.Conversation(
        agent_id=conversation.agent_id, channel="slack", chat_id="elsewhere"
    )
    stranger = md.Conversation(
        agent_id=conversation.agent_id, owner_id="stranger", channel="slack", chat_id="x"
    )
    await store(memory, conversation, "here", "Papaya note here")
    await store(memory, other_chat, "there", "Papaya note there")
    await store(memory, conversation, "fruit", "Papaya is the favourite", md.CATEGORY_PREFERENCE)
    await store(memory, stranger, "theirs", "Papaya of a stranger", md.CATEGORY_PREFERENCE)
    await append(memory, other_chat, user("we talked about papaya"))
    owner = owner_of(conversation)

    async def by_owner(**fields: Any) -> list[str]:
        request = md.RecallRequest(owner=owner, query="papaya", mode=md.SEARCH_MODE_LEXICAL)
        for name, value in fields.items():
            setattr(request, name, value)
        return values(list((await memory.memory.Recall(request)).hits))

    assert sorted(await by_owner()) == [
        "Papaya is the favourite",
        "Papaya note here",
        "Papaya note there",
    ]
    assert await by_owner(scope=md.RECALL_SCOPE_OWNER) == ["Papaya is the favourite"]
    assert "we talked about papaya" in await by_owner(source=md.RECALL_SOURCE_ALL)


@pytest.mark.parametrize(
    ("fields", "code", "message"),
    [
        (
            {"conversation": md.Conversation(channel="c", chat_id="c")},
            grpc.StatusCode.INVALID_ARGUMENT,
            "set conversation or owner, not both",
        ),
        (
            {"scope": md.RECALL_SCOPE_CURRENT},
            grpc.StatusCode.INVALID_ARGUMENT,
            (
                "RECALL_SCOPE_CURRENT recalls within a conversation: set conversation, "
                "or another scope"
            ),
        ),
        ({"trust": md.TRUST_GUEST}, grpc.StatusCode.PERMISSION_DENIED, None),
        ({"job_id": "nightly"}, grpc.StatusCode.PERMISSION_DENIED, None),
    ],
    ids=["both", "current", "guest", "job"],
)
async def test_an_owners_recall_refuses_what_needs_a_conversation(
    memory: md.Stubs,
    fields: dict[str, Any],
    code: grpc.StatusCode,
    message: str | None,
) -> None:
    request = md.RecallRequest(owner=md.OwnerScope(owner_id="someone"), query="x")
    for name, value in fields.items():
        if isinstance(value, md.Conversation):
            getattr(request, name).CopyFrom(value)
        else:
            setattr(request, name, value)
    error = await rpc_error(memory.memory.Recall(request))
    assert error.code() == code
    if message is not None:
        assert error.details() == message


# --- OpenHermit's search examples, through memory_add (agent scope) and Recall ----------------


async def add(memory: md.Stubs, owner: md.OwnerScope, key: str, content: str) -> md.Memory:
    response = await memory.memory.StoreMemory(
        md.StoreMemoryRequest(owner=owner, scope_type=md.SCOPE_TYPE_AGENT, key=key, value=content)
    )
    return response.memory


async def find(
    memory: md.Stubs, conversation: md.Conversation, query: str, limit: int = 10
) -> list[str]:
    hits = await recall(memory, conversation, query=query, scope=md.RECALL_SCOPE_ALL, limit=limit)
    return [hit.memory.key for hit in hits]


async def test_openhermit_search_examples(memory: md.Stubs) -> None:
    conversation = fresh_conversation()
    owner = owner_of(conversation)
    await add(memory, owner, "agent/quota", "We hit the Anthropic quota twice this week")
    await add(memory, owner, "project/api", "The backend API needs a redesign for v2")
    await add(memory, owner, "agent/habit", "The user is running every morning")
    assert await find(memory, conversation, "anthropic quota") == ["agent/quota"]
    assert await find(memory, conversation, "api redesign") == ["project/api"]
    assert (await find(memory, conversation, "backend v2"))[:1] == ["project/api"]
    assert (await find(memory, conversation, "runs"))[:1] == ["agent/habit"]


async def test_openhermit_same_key_under_two_agents_is_visible_only_to_its_own(
    memory: md.Stubs,
) -> None:
    first, second = fresh_conversation(), fresh_conversation()
    await add(memory, owner_of(first), "shared/key", "first agent secret zebra")
    await add(memory, owner_of(second), "shared/key", "second agent secret zebra")
    first_hits = await recall(memory, first, query="zebra", scope=md.RECALL_SCOPE_ALL)
    second_hits = await recall(memory, second, query="zebra", scope=md.RECALL_SCOPE_ALL)
    assert values(first_hits) == ["first agent secret zebra"]
    assert values(second_hits) == ["second agent secret zebra"]


async def test_openhermit_update_and_delete_change_what_matches(
    memory: md.Stubs,
) -> None:
    conversation = fresh_conversation()
    owner = owner_of(conversation)
    await add(memory, owner, "agent/db", "Primary database is postgres")
    updated = await memory.memory.UpdateMemory(
        md.UpdateMemoryRequest(
            owner=owner,
            scope_type=md.SCOPE_TYPE_AGENT,
            key="agent/db",
            value="Primary database is sqlite",
        )
    )
    assert updated.memory.value == "Primary database is sqlite"
    assert await find(memory, conversation, "postgres") == []
    assert await find(memory, conversation, "sqlite") == ["agent/db"]
    deleted = await memory.memory.DeleteMemory(
        md.DeleteMemoryRequest(owner=owner, scope_type=md.SCOPE_TYPE_AGENT, key="agent/db")
    )
    assert deleted.deleted
    assert await find(memory, conversation, "sqlite") == []
    assert await find(memory, conversation, "agent/db") == []
    again = await memory.memory.DeleteMemory(
        md.DeleteMemoryRequest(owner=owner, scope_type=md.SCOPE_TYPE_AGENT, key="agent/db")
    )
    assert (again.deleted, again.id) == (False, 0)


async def test_openhermit_limit_two_of_five_returns_two(memory: md.Stubs) -> None:
    conversation = fresh_conversation()
    for index in range(5):
        await add(memory, owner_of(conversation), f"agent/n{index}", f"walrus fact number {index}")
    assert len(await find(memory, conversation, "walrus", limit=2)) == 2
    assert len(await find(memory, conversation, "walrus")) == 5


# --- any text ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sync_stub(server: ServerProcess) -> Iterator[md.SyncStubs]:
    with grpc.insecure_channel(server.address) as channel:
        yield md.SyncStubs(channel)


@pytest.fixture(scope="module")
def sync_noted(sync_stub: md.SyncStubs) -> md.Conversation:
    conversation = fresh_conversation()
    for index, text in enumerate(CORPUS):
        sync_stub.memory.StoreMemory(
            md.StoreMemoryRequest(conversation=conversation, key=f"n{index}", value=text)
        )
    return conversation


@pytest.mark.slow  # hundreds of calls through the server
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(query=st.text(max_size=80))
def test_any_text_is_a_valid_recall(
    sync_stub: md.SyncStubs, sync_noted: md.Conversation, query: str
) -> None:
    response = sync_stub.memory.Recall(
        md.RecallRequest(
            conversation=sync_noted,
            query=query,
            source=md.RECALL_SOURCE_ALL,
            scope=md.RECALL_SCOPE_ALL,
        )
    )
    for hit in response.hits:
        assert hit.memory.value in CORPUS


async def test_partial_words_ignore_case_in_every_script(memory: md.Stubs) -> None:
    conversation = fresh_conversation()
    await store(memory, conversation, "city", "Я живу в Москве")
    await store(memory, conversation, "greek", "Ταξίδι στην ΑΘΗΝΑ")
    await store(memory, conversation, "german", "Grüße aus STRASSE")
    for query, expected in (
        ("моск", "Я живу в Москве"),
        ("МОСК", "Я живу в Москве"),
        ("αθην", "Ταξίδι στην ΑΘΗΝΑ"),
        ("GRÜ", "Grüße aus STRASSE"),
    ):
        hits = await recall(memory, conversation, query=query)
        assert values(hits) == [expected], query
        assert hits[0].match == md.MATCH_KIND_SUBSTRING
