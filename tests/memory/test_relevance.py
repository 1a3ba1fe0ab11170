"""Relevance an agent can trust, through the real server: nothing returned that does not match.

The fixture of tests/relevance_fixture.py, in the shared server (the embedded model): questions
about nothing held get no hit from SearchHistory (hybrid, semantic) or Recall (default mode);
words that mean nothing find nothing in any mode; a turn that says nothing never comes before
the turn holding what was asked; every hit says how relevant it is and how it matched. What
comes back and what does not is asserted, never a score (the floor itself is the one score:
every hit reaches it).
"""

from __future__ import annotations

import uuid

import pytest

import memoryd_client as md
from tests import relevance_fixture as fixture
from tests.helpers import append, said
from tests.memory.test_retrieval import embedded

# [memoryd.search] min_relevance, the default: every hit reaches it.
FLOOR = 0.5


@pytest.fixture(scope="module")
async def held(memory: md.Stubs) -> md.Conversation:
    """The fixture's chat and facts of one owner, embedded; client ids are the chat's indexes."""
    conversation = md.Conversation(
        agent_id="relevance",
        owner_id=f"o-{uuid.uuid4().hex[:8]}",
        channel="telegram",
        chat_id=f"r-{uuid.uuid4().hex[:8]}",
    )
    await append(memory, conversation, *said(fixture.CHAT, fixture.MAYA))
    owner = md.OwnerScope(agent_id=conversation.agent_id, owner_id=conversation.owner_id)
    for key, value in fixture.FACTS:
        await memory.memory.StoreMemory(
            md.StoreMemoryRequest(
                owner=owner,
                key=key,
                value=value,
                category=md.CATEGORY_FACT,
                scope_type=md.SCOPE_TYPE_OWNER,
            )
        )
    await embedded(memory)
    return conversation


async def searched(
    memory: md.Stubs, conversation: md.Conversation, query: str, mode: md.SearchMode.ValueType
) -> md.SearchHistoryResponse:
    answer: md.SearchHistoryResponse = await memory.conversations.SearchHistory(
        md.SearchHistoryRequest(query=query, conversation=conversation, limit=20, mode=mode)
    )
    return answer


async def recalled(
    memory: md.Stubs,
    conversation: md.Conversation,
    query: str,
    mode: md.SearchMode.ValueType = md.SEARCH_MODE_UNSPECIFIED,
) -> md.RecallResponse:
    answer: md.RecallResponse = await memory.memory.Recall(
        md.RecallRequest(
            conversation=conversation,
            query=query,
            scope=md.RECALL_SCOPE_OWNER,
            source=md.RECALL_SOURCE_MEMORIES,
            limit=20,
            mode=mode,
        )
    )
    return answer


@pytest.mark.parametrize("question", fixture.OFF_TOPIC)
async def test_a_question_about_nothing_held_gets_no_hit(
    memory: md.Stubs, held: md.Conversation, question: str
) -> None:
    for mode in (md.SEARCH_MODE_HYBRID, md.SEARCH_MODE_SEMANTIC):
        answer = await searched(memory, held, question, mode)
        assert [hit.message.content for hit in answer.hits] == [], (question, mode)
    facts = await recalled(memory, held, question)
    assert [hit.memory.value for hit in facts.hits] == [], question


@pytest.mark.parametrize("query", fixture.MEANINGLESS)
async def test_words_that_mean_nothing_find_nothing_in_any_mode(
    memory: md.Stubs, held: md.Conversation, query: str
) -> None:
    for mode in (md.SEARCH_MODE_LEXICAL, md.SEARCH_MODE_SEMANTIC, md.SEARCH_MODE_HYBRID):
        assert list((await searched(memory, held, query, mode)).hits) == [], (query, mode)
        assert list((await recalled(memory, held, query, mode)).hits) == [], (query, mode)


@pytest.mark.parametrize(("query", "answer"), fixture.CONTENT_FIRST)
async def test_filler_never_comes_before_the_turn_that_holds_the_answer(
    memory: md.Stubs, held: md.Conversation, query: str, answer: int
) -> None:
    for mode in (md.SEARCH_MODE_HYBRID, md.SEARCH_MODE_SEMANTIC):
        hits = list((await searched(memory, held, query, mode)).hits)
        assert hits, (query, mode)
        assert hits[0].message.client_message_id == str(answer), (query, mode)
        # Filler is context at most: never a match of its own.
        for hit in hits:
            if int(hit.message.client_message_id) % 2:  # the filler turns
                assert list(hit.matches) == [md.MATCH_KIND_NEIGHBOUR], (query, mode)


@pytest.mark.parametrize(("query", "holding"), fixture.FILLER_ASKED)
async def test_filler_is_found_when_it_is_what_was_asked(
    memory: md.Stubs, held: md.Conversation, query: str, holding: frozenset[int]
) -> None:
    for mode in (md.SEARCH_MODE_HYBRID, md.SEARCH_MODE_LEXICAL):
        hits = list((await searched(memory, held, query, mode)).hits)
        by_words = {
            int(hit.message.client_message_id) for hit in hits if md.MATCH_KIND_WORD in hit.matches
        }
        assert by_words == holding, (query, mode)


@pytest.mark.parametrize(("query", "answer"), fixture.FACT_FOUND)
async def test_a_fact_answers_what_it_holds(
    memory: md.Stubs, held: md.Conversation, query: str, answer: int
) -> None:
    hits = list((await recalled(memory, held, query)).hits)
    assert [hit.memory.value for hit in hits][:1] == [fixture.FACTS[answer][1]], query
    # No other fact matches by its words: "is", "the", "of", "a" inside them are no match (one
    # may be near in meaning: "a cappella" to "theater").
    for hit in hits[1:]:
        assert list(hit.matches) == [md.MATCH_KIND_SEMANTIC], hit.memory.value
        assert hit.scores.coverage == 0, hit.memory.value


async def test_every_hit_says_how_relevant_it_is_and_how_it_matched(
    memory: md.Stubs, held: md.Conversation
) -> None:
    for query, _ in fixture.CONTENT_FIRST:
        for mode in (md.SEARCH_MODE_HYBRID, md.SEARCH_MODE_LEXICAL, md.SEARCH_MODE_SEMANTIC):
            for hit in (await searched(memory, held, query, mode)).hits:
                assert hit.scores.relevance >= FLOOR, (query, mode)
                assert list(hit.matches), (query, mode)
    for query, _ in fixture.FACT_FOUND:
        for fact in (await recalled(memory, held, query)).hits:
            assert fact.scores.relevance >= FLOOR, query
            assert 0 <= hit.scores.coverage <= 1, query
            assert list(hit.matches), query
