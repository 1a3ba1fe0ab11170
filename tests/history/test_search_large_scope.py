"""Substring search over scopes too large to scan: the trigram path, still exact and isolated."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import apsw
import pytest

import memoryd_client as md
from memoryd.domain.conversation import AgentKey, ConversationKey, HistoryScope, OwnerKey
from memoryd.storage import search_reads as reads
from memoryd.storage import vector_reads
from memoryd.storage.connection import SqliteConnection
from memoryd.storage.search_reads import INDEX_FIRST, SCAN_LIMIT
from memoryd.storage.sql import one
from memoryd.testing.server_process import ServerProcess
from tests.helpers import append, user

# Builds scopes of tens of thousands of messages: run by `make test`, not by `make check`.
# Exercises storage: make test runs it on PostgreSQL too.
pytestmark = [pytest.mark.slow, pytest.mark.storage]

BIG = md.Conversation(agent_id="big", owner_id="ada", channel="telegram", chat_id="1")
BIG_OTHER_OWNER = md.Conversation(agent_id="big", owner_id="bob", channel="slack", chat_id="2")
OTHER_AGENT = md.Conversation(agent_id="other", owner_id="ada", channel="telegram", chat_id="1")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("large") / "home"


@pytest.fixture(scope="module")
async def memory(home: Path) -> AsyncIterator[md.Stubs]:
    server = ServerProcess(home).start()
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        filler = [user(f"filler message number {n} about nothing") for n in range(100)]
        for _ in range((SCAN_LIMIT // 100) + 1):
            await append(memory, BIG, *filler)
        await append(memory, BIG, user("an old zebrafishy note"), user("100% sure, a_b"))
        await append(memory, BIG, *filler)
        await append(memory, BIG, user("a newer zebrafishy note"))
        await append(memory, BIG_OTHER_OWNER, user("bob's zebrafishy note"))
        # Ranks far below every short filler message: outside the index's best INDEX_FIRST.
        await append(memory, BIG_OTHER_OWNER, user("a filler in " + "a very long message " * 40))
        await append(memory, OTHER_AGENT, user("other agent zebrafishy note"))
        yield memory
    assert server.stop() == 0


async def substrings(memory: md.Stubs, query: str, **scope: Any) -> list[str]:
    """Contents found; partial words (no whole-word match) must come from the substring stage."""
    response = await memory.conversations.SearchHistory(
        md.SearchHistoryRequest(query=query, mode=md.SEARCH_MODE_LEXICAL, **scope)
    )
    if query in ("ebrafish", "umbe"):
        assert all(hit.match == md.MATCH_KIND_SUBSTRING for hit in response.hits)
    return [hit.message.content for hit in response.hits]


async def test_partial_words_in_a_large_conversation(memory: md.Stubs) -> None:
    assert await substrings(memory, "ebrafish", conversation=BIG) == [
        "a newer zebrafishy note",
        "an old zebrafishy note",
    ]


async def test_large_agent_scope_stays_within_the_agent(memory: md.Stubs) -> None:
    assert await substrings(memory, "ebrafish", agent=md.AgentScope(agent_id="big")) == [
        "bob's zebrafishy note",
        "a newer zebrafishy note",
        "an old zebrafishy note",
    ]
    assert await substrings(
        memory, "ebrafish", owner=md.OwnerScope(agent_id="big", owner_id="bob")
    ) == ["bob's zebrafishy note"]
    assert await substrings(memory, "ebrafish", agent=md.AgentScope(agent_id="other")) == [
        "other agent zebrafishy note"
    ]


async def test_the_limit_and_exact_wildcard_words(memory: md.Stubs) -> None:
    assert len(await substrings(memory, "umbe", agent=md.AgentScope(agent_id="big"), limit=7)) == 7
    # "sure" is a whole word of it (the words are alternatives: "0" finds the fillers after it).
    assert (await substrings(memory, "0% sure", conversation=BIG))[0] == "100% sure, a_b"
    assert await substrings(memory, "a_b", conversation=BIG) == ["100% sure, a_b"]
    # No whole word, and no message holding both pieces: the substring stage needs every one.
    assert await substrings(memory, "ebrafishy illerzz", conversation=BIG) == []


async def test_no_match_in_a_large_scope_is_quick_and_empty(
    memory: md.Stubs,
) -> None:
    # Every trigram of this word is common in the scope, the word itself is not: the whole
    # trigram candidate set is checked. (Driven from the scope instead, this took seconds.)
    response = await memory.conversations.SearchHistory(
        md.SearchHistoryRequest(
            query="umberfill", conversation=BIG, limit=5, mode=md.SEARCH_MODE_LEXICAL
        ),
        timeout=2,
    )
    assert list(response.hits) == []


# The scopes the tests that read the SQLite file directly ask about.
READ_SCOPES: dict[str, HistoryScope] = {
    "conversation": ConversationKey("big", "ada", "telegram", "1", "root"),
    "agent": AgentKey("big"),
    "bob: appended last, few of the index's best": OwnerKey("big", "bob"),
    "another agent": AgentKey("other"),
}


@pytest.mark.sqlite_only("FTS5's index-first ranking (PostgreSQL's planner chooses for itself)")
async def test_ranking_in_the_index_first_finds_exactly_what_the_join_finds(
    memory: md.Stubs, home: Path
) -> None:
    """A large scope's common words are ranked in the word index alone, then checked against
    the scope; when too few are in it, the join answers. Either way: the join's answer."""
    await memory.conversations.SearchHistory(
        md.SearchHistoryRequest(query="filler", conversation=BIG)
    )
    scopes = READ_SCOPES
    expressions = ['"filler"', '"filler" OR "zebrafishy"', '"number" OR "note"', '"nothing"']
    connection = SqliteConnection(str(home / "memory.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        (filler,) = one(
            connection, "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'filler'"
        )
        assert filler > INDEX_FIRST  # the index's best do not hold every match
        bob = reads.rank_words(
            connection, scopes["bob: appended last, few of the index's best"], '"filler"', (), 10
        )
        assert len(bob) == 1  # found by the join, after the index's best held none of bob's
        for name, scope in scopes.items():
            for expression in expressions:
                for limit, excluded in ((10, []), (50, [1, 2, 3]), (100, [])):
                    first = reads.rank_words(
                        connection,
                        scope,
                        expression,
                        (),
                        limit,
                        exclude_ids=excluded,
                        narrow=False,
                        index_first=True,
                    )
                    joined = reads.rank_words(
                        connection, scope, expression, (), limit, exclude_ids=excluded, narrow=False
                    )
                    assert first == joined, (name, expression, limit)
                    assert all(item not in excluded for item, _ in first)
    finally:
        connection.close()


@pytest.mark.sqlite_only("reads the shared SQLite file directly (the SQL is the same on both)")
async def test_messages_without_a_vector_are_counted_alike_whatever_waits_in_all(
    memory: md.Stubs, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the first vector every message waits. With fewer waiting in all than the walk's
    limit, the waiting are walked by id; with more, each scope's own are counted: a scope whose
    messages come after the walk's worth of others is counted all the same, up to the count's
    limit."""
    await memory.conversations.SearchHistory(
        md.SearchHistoryRequest(query="filler", conversation=BIG)
    )
    scopes = READ_SCOPES
    connection = SqliteConnection(str(home / "memory.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        (total,) = one(connection, "SELECT count(*) FROM messages")
        (bob,) = one(
            connection, "SELECT count(*) FROM messages WHERE agent_id = 'big' AND owner_id = 'bob'"
        )
        (first_of_bob,) = one(
            connection, "SELECT min(id) FROM messages WHERE agent_id = 'big' AND owner_id = 'bob'"
        )
        limit = 5
        assert bob < limit < first_of_bob  # walked by id, the first `limit` hold none of bob's
        for name, scope in scopes.items():
            condition, params = vector_reads._scope_condition(scope)
            (truth,) = one(
                connection, f"SELECT count(*) FROM messages AS m WHERE {condition}", params
            )
            monkeypatch.setattr(vector_reads, "UNEMBEDDED_COUNT_LIMIT", total)
            for walk in (total, limit):  # every waiting message walked; the scope's own counted
                monkeypatch.setattr(vector_reads, "UNEMBEDDED_WALK_LIMIT", walk)
                found = vector_reads.unembedded_messages(connection, scope, None)
                assert found == truth, (name, walk)
            monkeypatch.setattr(vector_reads, "UNEMBEDDED_COUNT_LIMIT", limit)
            assert vector_reads.unembedded_messages(connection, scope, None) == min(truth, limit)
    finally:
        connection.close()
