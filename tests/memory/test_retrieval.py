"""Retrieval that finds what it holds: ranked words, meaning, and the two fused.

Through the shared server, whose embeddings are the default (the embedded model): the fixture of
tests/retrieval_fixture.py must rank each answer where it says, in hybrid search (the default);
lexical search must still find what words find, and never what they cannot; semantic search
finds paraphrases. Ranks are asserted, never scores.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import uuid
from pathlib import Path

import grpc
import pytest

import memoryd_client as md
from memoryd.llm.embeddings import EMBEDDED_CALIBRATION
from memoryd.testing.server_process import ServerProcess
from tests import retrieval_fixture as fixture
from tests.helpers import append, rpc_error, said
from tests.memory.test_resources import cli

EMBEDDING_TIMEOUT = 120.0


async def embedded(memory: md.Stubs) -> md.GetEmbeddingStatusResponse:
    """Wait until the background embedder has caught up with everything written so far."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + EMBEDDING_TIMEOUT
    while True:
        status = await memory.admin.GetEmbeddingStatus(md.GetEmbeddingStatusRequest())
        if status.pending_messages == 0 and status.pending_memories == 0:
            return status
        assert loop.time() < deadline, f"embedding did not catch up: {status}"
        await asyncio.sleep(0.1)


@pytest.fixture(scope="module")
async def story(memory: md.Stubs) -> md.Conversation:
    """The fixture's conversation, appended and embedded; client ids are the indexes."""
    conversation = md.Conversation(
        agent_id="retrieval", channel="telegram", chat_id=f"story-{uuid.uuid4().hex[:8]}"
    )
    await append(memory, conversation, *said(fixture.MESSAGES, fixture.MAYA))
    await embedded(memory)
    return conversation


async def ranked(
    memory: md.Stubs,
    conversation: md.Conversation,
    query: str,
    mode: md.SearchMode.ValueType = md.SEARCH_MODE_UNSPECIFIED,
) -> list[md.HistoryHit]:
    response = await memory.conversations.SearchHistory(
        md.SearchHistoryRequest(query=query, conversation=conversation, limit=10, mode=mode)
    )
    return list(response.hits)


def rank_of(hits: list[md.HistoryHit], answer: int) -> int | None:
    """The answer's place (1 = first), or None when it is not among the hits."""
    for place, hit in enumerate(hits, start=1):
        if hit.message.client_message_id == str(answer):
            return place
    return None


@pytest.mark.parametrize("question", fixture.QUESTIONS, ids=lambda q: q.query)
async def test_hybrid_ranks_each_answer_where_the_fixture_says(
    memory: md.Stubs, story: md.Conversation, question: fixture.Question
) -> None:
    response = await memory.conversations.SearchHistory(
        md.SearchHistoryRequest(query=question.query, conversation=story, limit=10)
    )
    hits = list(response.hits)
    place = rank_of(hits, question.answer)
    if not question.above_floor:
        assert place is None, [hit.message.content for hit in hits]
        assert response.below_floor > 0
        return
    assert place is not None, [hit.message.content for hit in hits]
    assert place <= question.within, [hit.message.content for hit in hits]


@pytest.mark.parametrize("question", fixture.QUESTIONS, ids=lambda q: q.query)
async def test_lexical_ranks_what_words_find_and_misses_what_they_cannot(
    memory: md.Stubs, story: md.Conversation, question: fixture.Question
) -> None:
    hits = await ranked(memory, story, question.query, md.SEARCH_MODE_LEXICAL)
    place = rank_of(hits, question.answer)
    found = place is not None and place <= question.within
    assert found is question.words_find_it, [hit.message.content for hit in hits]
    for hit in hits:
        assert list(hit.matches) in ([md.MATCH_KIND_WORD], [md.MATCH_KIND_SUBSTRING])
        assert hit.scores.semantic_rank == 0
        assert hit.scores.similarity == 0


async def test_a_question_as_typed_finds_its_answer_though_most_of_its_words_are_missing(
    memory: md.Stubs, story: md.Conversation
) -> None:
    # "When", "did", "go", "the" are in no message; before ranked words, nothing was found.
    hits = await ranked(
        memory, story, "When did Maya go to the pottery class?", md.SEARCH_MODE_LEXICAL
    )
    assert rank_of(hits, 8) == 1
    assert hits[0].match == md.MATCH_KIND_WORD
    assert "**pottery**" in hits[0].snippet


async def test_hits_holding_every_word_come_first(memory: md.Stubs, story: md.Conversation) -> None:
    # "balcony" is in messages 0 and 17, "tomato" only in 17: the one holding both is first,
    # then the one holding one of them.
    hits = await ranked(memory, story, "tomato balcony", md.SEARCH_MODE_LEXICAL)
    assert [hit.message.client_message_id for hit in hits[:2]] == ["17", "0"]
    assert hits[0].scores.lexical_rank == 1
    assert hits[0].scores.bm25 < 0


async def test_the_sender_is_searchable(memory: md.Stubs, story: md.Conversation) -> None:
    hits = await ranked(memory, story, "Tom", md.SEARCH_MODE_LEXICAL)
    tom = {str(i) for i, (sender, _) in enumerate(fixture.MESSAGES) if sender == fixture.TOM}
    assert {hit.message.client_message_id for hit in hits} <= tom
    assert len(hits) == min(10, len(tom))


async def test_semantic_finds_a_paraphrase_and_says_how(
    memory: md.Stubs, story: md.Conversation
) -> None:
    hits = await ranked(memory, story, "what food does she like", md.SEARCH_MODE_SEMANTIC)
    place = rank_of(hits, 3)
    assert place is not None
    assert place <= 3
    first = hits[0]
    assert first.match == md.MATCH_KIND_SEMANTIC
    assert list(first.matches) == [md.MATCH_KIND_SEMANTIC]
    assert first.scores.semantic_rank == 1
    assert 0 < first.scores.similarity <= 1
    assert first.scores.lexical_rank == 0
    similarities = [hit.scores.similarity for hit in hits]
    assert similarities == sorted(similarities, reverse=True)


async def test_hybrid_hits_say_every_way_they_matched(
    memory: md.Stubs, story: md.Conversation
) -> None:
    hits = await ranked(memory, story, "Berlin marathon")
    first = hits[0]
    assert first.message.client_message_id == "1"
    assert list(first.matches) == [md.MATCH_KIND_WORD, md.MATCH_KIND_SEMANTIC]
    assert first.scores.lexical_rank == 1
    assert first.scores.semantic_rank >= 1
    fused = [hit.scores.fused for hit in hits]
    assert fused == sorted(fused, reverse=True)


async def test_an_unknown_mode_is_refused(memory: md.Stubs, story: md.Conversation) -> None:
    error = await rpc_error(
        memory.conversations.SearchHistory(
            md.SearchHistoryRequest(
                query="sushi",
                conversation=story,
                mode=99,  # type: ignore[arg-type]
            )
        )
    )
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == "mode has unknown value 99"


async def test_recall_finds_a_row_by_meaning(memory: md.Stubs, story: md.Conversation) -> None:
    # The agent's memory_recall("what food does she like") found nothing while the user's own
    # words were "I love sushi".
    await memory.memory.StoreMemory(
        md.StoreMemoryRequest(
            conversation=story, key="favourite_dish", value="salmon nigiri and sushi"
        )
    )
    await embedded(memory)
    response = await memory.memory.Recall(
        md.RecallRequest(
            conversation=story,
            query="what food does she like",
            source=md.RECALL_SOURCE_ALL,
            limit=4,
        )
    )
    rows = [hit for hit in response.hits if hit.source == md.RECALL_SOURCE_MEMORIES]
    messages = [hit for hit in response.hits if hit.source == md.RECALL_SOURCE_HISTORY]
    assert rows[0].memory.key == "favourite_dish"
    assert md.MATCH_KIND_SEMANTIC in rows[0].matches
    assert "3" in [hit.message.message.client_message_id for hit in messages[:2]]
    lexical = await memory.memory.Recall(
        md.RecallRequest(
            conversation=story,
            query="what food does she like",
            source=md.RECALL_SOURCE_ALL,
            mode=md.SEARCH_MODE_LEXICAL,
        )
    )
    assert not lexical.hits


async def test_status_reports_the_embedded_model(memory: md.Stubs) -> None:
    status = await embedded(memory)
    assert status.enabled
    assert status.provider == "embedded"
    assert status.model == "bge-small-en-v1.5-int8"
    assert status.dimension == 384
    assert status.embedded_messages >= len(fixture.MESSAGES)
    assert status.last_error == ""


LOWEST_PRIORITY = 19


def thread_priorities(pid: int) -> list[int]:
    """The nice value of each thread of a process (Linux /proc)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):  # a thread that ended meanwhile
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            found.append(int(fields[16]))  # field 19 of stat; the first two are cut off
    return found


@pytest.mark.skipif(sys.platform != "linux", reason="per-thread priorities are Linux's")
async def test_the_background_embedder_runs_at_the_lowest_priority_and_searches_do_not(
    server: ServerProcess, memory: md.Stubs, story: md.Conversation
) -> None:
    await embedded(memory)
    await ranked(memory, story, "when is the dentist", md.SEARCH_MODE_SEMANTIC)
    pid = server.process.pid
    priorities = thread_priorities(pid)
    # Relative to the niceness the server was started at (a suite run under `nice` starts it
    # higher): up to embedding_threads (2 by default) threads embed in the background at the
    # lowest priority (a pool starts them as batches need them); no other thread is lowered,
    # those that embed queries included.
    base = os.getpriority(os.PRIO_PROCESS, pid)
    lowered = [p for p in priorities if p != base]
    if base < LOWEST_PRIORITY:
        assert 1 <= len(lowered) <= 2, (base, priorities)
        assert set(lowered) == {LOWEST_PRIORITY}, (base, priorities)
    else:  # started at the lowest priority already: nothing can be lowered further
        assert lowered == [], (base, priorities)


async def test_the_command_line_searches_and_reports(
    server: ServerProcess, story: md.Conversation
) -> None:
    chat = f"{story.channel}:{story.chat_id}"
    found = cli(
        server,
        "search",
        "what food does she like",
        "--agent",
        "retrieval",
        "--conversation",
        chat,
        "--mode",
        "semantic",
        "--limit",
        "3",
    )
    assert found.returncode == 0, found.stderr
    lines = found.stdout.splitlines()
    assert 1 <= len(lines) <= 3
    assert all("\tsemantic\t" in line for line in lines)
    assert "I love sushi" in lines[0]
    words = cli(
        server,
        "search",
        "pottery",
        "--agent",
        "retrieval",
        "--conversation",
        chat,
        "--mode",
        "lexical",
    )
    assert words.stdout.splitlines()[0].split("\t")[1] == "word"
    status = cli(server, "embeddings")
    assert status.returncode == 0, status.stderr
    assert status.stdout.startswith("model bge-small-en-v1.5-int8 (embedded, 384 dimensions)\n")


# --- the similarity floor: nothing found is an answer --------------------------------------------

OFF_TOPIC = ("quantum chromodynamics", "kernel scheduler latency")
# The similarity at which a message holding none of the query's words is relevant.
FLOOR = EMBEDDED_CALIBRATION.meaning_floor or 0.0


@pytest.mark.parametrize("query", OFF_TOPIC)
async def test_a_query_about_nothing_the_scope_holds_finds_nothing(
    memory: md.Stubs, story: md.Conversation, query: str
) -> None:
    """Every message has some similarity to any query; below the relevance floor a message
    found by meaning alone is no answer. The answer says how many it left out."""
    for mode in (md.SEARCH_MODE_HYBRID, md.SEARCH_MODE_SEMANTIC):
        response = await memory.conversations.SearchHistory(
            md.SearchHistoryRequest(query=query, conversation=story, limit=10, mode=mode)
        )
        assert list(response.hits) == [], (query, mode)
        assert response.below_floor > 0


@pytest.mark.parametrize("query", ["%", "???", "what is it?"])
async def test_a_query_that_means_nothing_is_not_searched(
    memory: md.Stubs, story: md.Conversation, query: str
) -> None:
    """Punctuation and function words alone mean nothing: neither their words nor their
    vector (about equally near every text) are compared."""
    for mode in (md.SEARCH_MODE_HYBRID, md.SEARCH_MODE_SEMANTIC, md.SEARCH_MODE_LEXICAL):
        response = await memory.conversations.SearchHistory(
            md.SearchHistoryRequest(query=query, conversation=story, limit=10, mode=mode)
        )
        assert (list(response.hits), response.below_floor) == ([], 0), (query, mode)


async def test_a_message_has_the_same_vector_embedded_alone_or_among_others(
    memory: md.Stubs,
) -> None:
    """The int8 model scales a call's activations by the whole call: a text's vector must come
    from a call of its own, or it depends on what it was embedded with."""
    said = "I finally finished the blue glaze on my pottery vase"
    alone = md.Conversation(agent_id="retrieval", channel="t", chat_id=f"a-{uuid.uuid4().hex[:8]}")
    among = md.Conversation(agent_id="retrieval", channel="t", chat_id=f"b-{uuid.uuid4().hex[:8]}")
    await memory.conversations.AppendMessages(
        md.AppendMessagesRequest(
            conversation=alone, messages=[md.NewMessage(role=md.ROLE_USER, content=said)]
        )
    )
    await embedded(memory)
    others = [f"{'a much longer message about something else entirely ' * n}" for n in range(1, 12)]
    await memory.conversations.AppendMessages(
        md.AppendMessagesRequest(
            conversation=among,
            messages=[md.NewMessage(role=md.ROLE_USER, content=said)]
            + [md.NewMessage(role=md.ROLE_ASSISTANT, content=text) for text in others],
        )
    )
    await embedded(memory)
    similarity = {}
    for name, conversation in (("alone", alone), ("among", among)):
        response = await memory.conversations.SearchHistory(
            md.SearchHistoryRequest(
                query="ceramics", conversation=conversation, mode=md.SEARCH_MODE_SEMANTIC
            )
        )
        (hit,) = [hit for hit in response.hits if hit.message.content == said]
        similarity[name] = hit.scores.similarity
    # Equal to float32's rounding (the scopes' similarities are computed in different sums); a
    # vector of a shared call differed by up to 0.025.
    assert similarity["alone"] == pytest.approx(similarity["among"], abs=1e-6)


async def test_recall_finds_nothing_about_nothing_and_what_it_holds_by_meaning(
    memory: md.Stubs,
) -> None:
    conversation = md.Conversation(
        agent_id="retrieval", owner_id=f"o-{uuid.uuid4().hex[:8]}", channel="t", chat_id="rows"
    )
    owner = md.OwnerScope(agent_id="retrieval", owner_id=conversation.owner_id)
    for key, value, category in (
        ("diet", "Is vegetarian", md.CATEGORY_PREFERENCE),
        ("city", "Lives in Porto", md.CATEGORY_IDENTITY),
        ("hobby", "Plays the cello", md.CATEGORY_INTEREST),
    ):
        await memory.memory.StoreMemory(
            md.StoreMemoryRequest(owner=owner, key=key, value=value, category=category)
        )
    await embedded(memory)

    async def recall(query: str) -> md.RecallResponse:
        answer: md.RecallResponse = await memory.memory.Recall(
            md.RecallRequest(conversation=conversation, query=query, scope=md.RECALL_SCOPE_ALL)
        )
        return answer

    nothing = await recall("quantum chromodynamics")
    assert list(nothing.hits) == []
    assert nothing.below_floor == 3
    assert list((await recall("%")).hits) == []
    found = await recall("which musical instrument")
    assert found.hits[0].memory.value == "Plays the cello"
    assert list(found.hits[0].matches) == [md.MATCH_KIND_SEMANTIC]
    assert found.hits[0].scores.similarity >= FLOOR
    assert found.hits[0].scores.relevance >= 0.5
    # A row holding every word of the query is kept, however far its meaning.
    worded = await recall("porto")
    assert worded.hits[0].memory.value == "Lives in Porto"
    assert md.MATCH_KIND_WORD in worded.hits[0].matches
    assert worded.hits[0].scores.coverage == 1.0


async def test_a_neighbour_of_a_word_match_stays_below_the_floor(
    memory: md.Stubs, story: md.Conversation
) -> None:
    """Conversation context: the reply next to a matching message is kept though its own
    similarity is low (the floor cuts what was found by meaning alone)."""
    hits = await ranked(memory, story, "pottery class", md.SEARCH_MODE_HYBRID)
    kinds = {hit.message.client_message_id: list(hit.matches) for hit in hits}
    assert md.MATCH_KIND_WORD in kinds["8"]
    neighbours = [hit for hit in hits if list(hit.matches) == [md.MATCH_KIND_NEIGHBOUR]]
    assert any(hit.scores.similarity < FLOOR for hit in neighbours), [
        (hit.message.content, hit.scores.similarity) for hit in hits
    ]
