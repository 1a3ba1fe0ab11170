"""Embeddings from an OpenAI-compatible endpoint, failures, a change of model, reindex, off.

The endpoint is a real local HTTP server (memoryd.testing.fake_embeddings) whose vectors are bags
of words: texts sharing a word are near, texts sharing none are orthogonal. So a semantic hit
tells from outside which vectors the search compared.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import grpc
import pytest

import memoryd_client as md
from memoryd.testing.configs import embedding_config
from memoryd.testing.fake_embeddings import FakeEmbeddings
from memoryd.testing.server_process import ServerProcess
from tests.backends import on_postgres
from tests.helpers import append, rpc_error, run_memoryd, store, user

# Exercises storage: make test runs it on PostgreSQL too.
pytestmark = pytest.mark.storage

TIMEOUT = 60.0


async def caught_up(memory: md.Stubs, *, least: int = 1) -> md.GetEmbeddingStatusResponse:
    """The status once nothing waits and at least `least` messages have a vector."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + TIMEOUT
    while True:
        status = await memory.admin.GetEmbeddingStatus(md.GetEmbeddingStatusRequest())
        waiting = status.pending_messages + status.pending_memories
        if waiting == 0 and status.embedded_messages >= least:
            return status
        assert loop.time() < deadline, status
        await asyncio.sleep(0.05)


async def semantic(memory: md.Stubs, conversation: md.Conversation, query: str) -> list[str]:
    response = await memory.conversations.SearchHistory(
        md.SearchHistoryRequest(
            query=query, conversation=conversation, mode=md.SEARCH_MODE_SEMANTIC, limit=3
        )
    )
    return [hit.message.content for hit in response.hits]


TEXTS = ("zebra crossing downtown", "violin lessons on monday", "quarterly report deadline")


async def test_an_endpoint_makes_the_vectors_and_searches_compare_them(
    tmp_path: Path, endpoint: FakeEmbeddings, conversation: md.Conversation
) -> None:
    server = ServerProcess(tmp_path / "home", config=embedding_config(endpoint)).start()
    try:
        async with md.connect(server.address) as channel:
            memory = md.Stubs(channel)
            await append(memory, conversation, *(user(text) for text in TEXTS))
            status = await caught_up(memory, least=3)
            assert (status.provider, status.model, status.dimension) == (
                "vectors",
                "fake-embed",
                64,
            )
            assert status.embedded_messages == 3
            # Only the last message's vector holds "deadline" (each vector holds the message
            # before it too, as context, so "violin" is in two).
            assert (await semantic(memory, conversation, "deadline"))[0] == TEXTS[2]
            sent = [request for request in endpoint.requests if request["model"] == "fake-embed"]
            texts = [text for request in sent for text in request["input"]]
            # Each text is the message, then the end of the one before it.
            assert any(
                text == "ada: violin lessons on monday\nada: zebra crossing downtown"
                for text in texts
            ), texts
    finally:
        assert server.stop() == 0, server.output


async def test_a_failing_endpoint_is_retried_and_words_still_find_meanwhile(
    tmp_path: Path, endpoint: FakeEmbeddings, conversation: md.Conversation
) -> None:
    endpoint.fail(500, times=2)
    server = ServerProcess(tmp_path / "home", config=embedding_config(endpoint)).start()
    try:
        async with md.connect(server.address) as channel:
            memory = md.Stubs(channel)
            await append(memory, conversation, user("the zebra crossing is closed"))
            failed = server.wait_for_event("embedding_failed", timeout=TIMEOUT)
            assert "could not embed" in failed["msg"]
            status = await memory.admin.GetEmbeddingStatus(md.GetEmbeddingStatusRequest())
            assert "could not embed" in status.last_error or status.pending_messages == 0
            # Without a vector, the default search finds the message by its words.
            response = await memory.conversations.SearchHistory(
                md.SearchHistoryRequest(query="zebra", conversation=conversation)
            )
            assert [hit.message.content for hit in response.hits] == [
                "the zebra crossing is closed"
            ]
            recovered = await caught_up(memory)
            assert recovered.last_error == ""
            assert await semantic(memory, conversation, "zebra") == ["the zebra crossing is closed"]
    finally:
        assert server.stop() == 0, server.output


async def test_answers_count_what_has_no_vector_yet_until_the_embedder_reaches_it(
    tmp_path: Path, endpoint: FakeEmbeddings
) -> None:
    """A bulk load's searches are by words alone for what is not embedded yet: the answers of
    SearchHistory and Recall say how much of their scope that is, before the first vector (no
    model yet), after it, and when the query itself cannot be embedded (all of the scope); 0
    once the embedder has caught up."""
    endpoint.fail(503, times=1_000_000)
    server = ServerProcess(tmp_path / "home", config=embedding_config(endpoint)).start()
    conversation, other = (
        md.Conversation(agent_id="bot", owner_id="ada", channel="telegram", chat_id=chat)
        for chat in ("lessons", "errands")
    )
    owner = md.OwnerScope(agent_id="bot", owner_id="ada")

    async def unembedded(
        mode: md.SearchMode.ValueType, query: str = "violin lessons", **scope: Any
    ) -> int:
        request = md.SearchHistoryRequest(query=query, mode=mode, **scope)
        answer = await memory.conversations.SearchHistory(request)
        if mode != md.SEARCH_MODE_SEMANTIC:  # the words find it whatever the vectors
            assert TEXTS[1] in [hit.message.content for hit in answer.hits]
        return int(answer.unembedded)

    async def recalled(mode: md.SearchMode.ValueType, query: str = "violin lessons") -> int:
        answer = await memory.memory.Recall(
            md.RecallRequest(
                conversation=conversation,
                query=query,
                source=md.RECALL_SOURCE_ALL,
                scope=md.RECALL_SCOPE_ALL,
                mode=mode,
            )
        )
        return int(answer.unembedded)

    try:
        async with md.connect(server.address) as channel:
            memory = md.Stubs(channel)
            await append(memory, conversation, *(user(text) for text in TEXTS))
            await append(memory, other, user("violin lessons moved to tuesday"))
            # No vector at all yet: every message of the scope is counted.
            assert await unembedded(md.SEARCH_MODE_HYBRID, conversation=conversation) == 3
            assert await unembedded(md.SEARCH_MODE_SEMANTIC, conversation=conversation) == 3
            assert await unembedded(md.SEARCH_MODE_UNSPECIFIED, owner=owner) == 4
            assert await unembedded(md.SEARCH_MODE_LEXICAL, conversation=conversation) == 0
            endpoint.recover()
            await caught_up(memory, least=4)
            # A row with its vector: counted only when the query has none.
            await memory.memory.StoreMemory(
                md.StoreMemoryRequest(
                    owner=owner, key="practice", value="practises daily", category=md.CATEGORY_GOAL
                )
            )
            await caught_up(memory, least=4)
            # The embedder is stuck on what mentions the teacher; queries are embedded.
            endpoint.hold("teacher")
            await append(memory, conversation, user("violin lessons with the new teacher"))
            await append(memory, other, user("violin strings for the teacher"))
            await memory.memory.StoreMemory(
                md.StoreMemoryRequest(
                    owner=owner,
                    key="instrument",
                    value="plays the violin for her teacher",
                    category=md.CATEGORY_INTEREST,
                )
            )
            assert await unembedded(md.SEARCH_MODE_HYBRID, conversation=conversation) == 1
            assert await unembedded(md.SEARCH_MODE_HYBRID, owner=owner) == 2
            assert await unembedded(md.SEARCH_MODE_SEMANTIC, conversation=conversation) == 1
            # The owner's history (2 messages) and the owner's row.
            assert await recalled(md.SEARCH_MODE_HYBRID) == 3
            assert await recalled(md.SEARCH_MODE_LEXICAL) == 0
            address = ("--address", server.address)
            found = await asyncio.to_thread(
                run_memoryd, "search", "violin", "--agent", "bot", "--owner", "ada", *address
            )
            assert found.stdout.splitlines()[-1].startswith("note: 2 messages of this scope have")
            watched = await asyncio.to_thread(
                run_memoryd,
                "embeddings",
                "--watch",
                "--interval",
                "0.1",
                "--timeout",
                "0.3",
                "--json",
                *address,
            )
            assert watched.returncode == 1, watched.stderr  # still waiting at the timeout
            reports = [json.loads(line) for line in watched.stdout.splitlines()]
            assert len(reports) >= 2
            assert {report["waiting"] for report in reports} == {3}
            assert reports[-1]["per_second"] == 0
            # The provider is down: a new query has no vector, so nothing is seen by meaning (a
            # query asked before keeps its vector).
            endpoint.fail(503, times=1_000_000)
            new = "violin lessons again"
            assert await unembedded(md.SEARCH_MODE_HYBRID, new, conversation=conversation) == 4
            assert await unembedded(md.SEARCH_MODE_HYBRID, conversation=conversation) == 1
            assert await recalled(md.SEARCH_MODE_HYBRID, new) == 6 + 2
            error = await rpc_error(
                memory.conversations.SearchHistory(
                    md.SearchHistoryRequest(
                        query=new, conversation=conversation, mode=md.SEARCH_MODE_SEMANTIC
                    )
                )
            )
            assert error.code() == grpc.StatusCode.UNAVAILABLE
            assert (error.details() or "").startswith("the query could not be embedded: provider")
            endpoint.recover()
            watched = await asyncio.to_thread(
                run_memoryd, "embeddings", "--watch", "--interval", "0.1", *address
            )
            assert watched.returncode == 0, watched.stderr
            assert watched.stdout.splitlines()[-1].startswith(
                "0 waiting (0 live, 0 in the backlog), 8 embedded"
            )
            await caught_up(memory, least=6)
            assert await unembedded(md.SEARCH_MODE_HYBRID, owner=owner) == 0
            assert await recalled(md.SEARCH_MODE_HYBRID) == 0
    finally:
        assert server.stop() == 0, server.output


async def test_a_new_model_embeds_again_and_never_compares_with_the_old_one(
    tmp_path: Path, endpoint: FakeEmbeddings, conversation: md.Conversation
) -> None:
    home = tmp_path / "home"
    first = ServerProcess(home, config=embedding_config(endpoint)).start()
    try:
        async with md.connect(first.address) as channel:
            memory = md.Stubs(channel)
            await append(memory, conversation, *(user(text) for text in TEXTS))
            await caught_up(memory, least=3)
    finally:
        assert first.stop() == 0, first.output
    # The new model cannot embed yet: the old vectors exist, but no search may use them.
    endpoint.fail(503, times=1000)
    second = ServerProcess(home, config=embedding_config(endpoint, "fake-embed-2")).start()
    try:
        async with md.connect(second.address) as channel:
            memory = md.Stubs(channel)
            second.wait_for_event("embedding_failed", timeout=TIMEOUT)
            status = await memory.admin.GetEmbeddingStatus(md.GetEmbeddingStatusRequest())
            assert status.model == "fake-embed-2"
            assert status.embedded_messages == 0
            assert status.pending_messages == 3
            assert status.other_model_vectors == 3
            assert await semantic(memory, conversation, "violin") == []
            hybrid = await memory.conversations.SearchHistory(
                md.SearchHistoryRequest(query="violin", conversation=conversation)
            )
            assert [list(hit.matches) for hit in hybrid.hits] == [[md.MATCH_KIND_WORD]]
    finally:
        assert second.stop() == 0, second.output


async def test_a_scope_too_large_for_the_cache_is_searched_by_words_or_by_the_index(
    tmp_path: Path, endpoint: FakeEmbeddings, conversation: md.Conversation
) -> None:
    # 0.01 MiB holds 124 vectors of 64 dimensions (84 bytes each).
    config = embedding_config(endpoint, vector_cache_mb=0.01)
    home = tmp_path / "home"
    server = ServerProcess(home, config=config).start()
    try:
        async with md.connect(server.address) as channel:
            memory = md.Stubs(channel)
            for start in range(0, 200, 100):
                await append(
                    memory, conversation, *(user(f"filler {n}") for n in range(start, start + 100))
                )
            await append(memory, conversation, user("the violin case"))
            await caught_up(memory, least=201)
            request = md.SearchHistoryRequest(
                query="violin", conversation=conversation, mode=md.SEARCH_MODE_SEMANTIC
            )
            if on_postgres():
                # The database answers instead of the cache: pgvector, through the model's HNSW
                # index once the table is large enough for the planner to prefer it
                # (tests/storage/test_postgres_operations.py shows it is).
                found = await memory.conversations.SearchHistory(request)
                assert found.hits[0].message.content == "the violin case"
                assert found.hits[0].matches == [md.MATCH_KIND_SEMANTIC]
                hybrid = await memory.conversations.SearchHistory(
                    md.SearchHistoryRequest(query="violin", conversation=conversation)
                )
                assert (hybrid.hits[0].message.content, list(hybrid.hits[0].matches)) == (
                    "the violin case",
                    [md.MATCH_KIND_WORD, md.MATCH_KIND_SEMANTIC],
                )
                return
            error = await rpc_error(memory.conversations.SearchHistory(request))
            assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert error.details() == (
                "this scope has more than 124 vectors, more than memoryd.search.vector_cache_mb "
                "(0.01 MiB) holds: search it by words (mode lexical), narrow the scope, or raise "
                "vector_cache_mb"
            )
            hybrid = await memory.conversations.SearchHistory(
                md.SearchHistoryRequest(query="violin", conversation=conversation)
            )
            assert [(h.message.content, list(h.matches)) for h in hybrid.hits] == [
                ("the violin case", [md.MATCH_KIND_WORD])
            ]
    finally:
        assert server.stop() == 0, server.output


async def test_reindex_embeds_everything_again(
    tmp_path: Path, endpoint: FakeEmbeddings, conversation: md.Conversation
) -> None:
    server = ServerProcess(tmp_path / "home", config=embedding_config(endpoint)).start()
    try:
        async with md.connect(server.address) as channel:
            memory = md.Stubs(channel)
            await append(memory, conversation, *(user(text) for text in TEXTS))
            await memory.memory.StoreMemory(
                md.StoreMemoryRequest(conversation=conversation, key="pet", value="a zebra")
            )
            await caught_up(memory, least=3)
            before = len(endpoint.requests)
            queued = await memory.admin.ReindexEmbeddings(md.ReindexEmbeddingsRequest())
            assert (queued.queued_messages, queued.queued_memories) == (3, 1)
            await asyncio.sleep(0.5)
            status = await caught_up(memory, least=3)
            assert (status.embedded_messages, status.embedded_memories) == (3, 1)
            again = [text for r in endpoint.requests[before:] for text in r["input"]]
            assert (
                sum(text.split("\n")[0].endswith(": violin lessons on monday") for text in again)
                == 1
            )
            assert "pet: a zebra" in again
    finally:
        assert server.stop() == 0, server.output


async def test_with_embeddings_off_search_is_by_words_and_meaning_is_refused(
    start_server: type[ServerProcess], tmp_path: Path, conversation: md.Conversation
) -> None:
    config = '[memoryd.search]\nembeddings = "off"\n'
    server = start_server(tmp_path / "home", config=config).start()
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        await append(memory, conversation, *(user(text) for text in TEXTS))
        status = await memory.admin.GetEmbeddingStatus(md.GetEmbeddingStatusRequest())
        assert not status.enabled
        response = await memory.conversations.SearchHistory(
            md.SearchHistoryRequest(query="violin", conversation=conversation)
        )
        assert [list(hit.matches) for hit in response.hits] == [[md.MATCH_KIND_WORD]]
        for call in (
            memory.conversations.SearchHistory(
                md.SearchHistoryRequest(
                    query="violin", conversation=conversation, mode=md.SEARCH_MODE_SEMANTIC
                )
            ),
            memory.memory.Recall(
                md.RecallRequest(
                    conversation=conversation, query="violin", mode=md.SEARCH_MODE_SEMANTIC
                )
            ),
            memory.admin.ReindexEmbeddings(md.ReindexEmbeddingsRequest()),
        ):
            error = await rpc_error(call)
            assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert 'memoryd.search.embeddings = "off"' in (error.details() or "")


@pytest.mark.parametrize(
    ("search", "message"),
    [
        (
            '[memoryd.search]\nembeddings = "provider"\n',
            'memoryd.search.embedding_model must name the model for embeddings = "provider"',
        ),
        (
            '[memoryd.search]\nembeddings = "provider"\nembedding_model = "m"\n',
            'memoryd.search.embeddings = "provider" needs a [[memoryd.providers]] entry',
        ),
        (
            (
                '[memoryd.search]\nembeddings = "provider"\nembedding_model = "m"\n'
                'embedding_provider = "nope"\n\n[[memoryd.providers]]\nname = "local"\n'
                'base_url = "http://127.0.0.1:9/v1"\nmodel = "x"\n'
            ),
            "memoryd.search.embedding_provider 'nope' is not a provider's name (local)",
        ),
        ('[memoryd.search]\nembeddings = "maybe"\n', "memoryd.search.embeddings must be one of"),
    ],
)
def test_bad_embedding_settings_stop_the_start(tmp_path: Path, search: str, message: str) -> None:
    server = ServerProcess(tmp_path / "home", config=search)
    assert server.wait_exit() != 0
    assert message in server.output


async def wait_until(check: object, what: str) -> None:
    """Wait (within TIMEOUT) until the coroutine function `check` answers true."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + TIMEOUT
    while not await check():  # type: ignore[operator]
        assert loop.time() < deadline, what
        await asyncio.sleep(0.05)


async def test_a_chat_is_embedded_before_a_bulk_load_and_its_facts_too(
    tmp_path: Path, endpoint: FakeEmbeddings
) -> None:
    """The live queue: a bulk load's backlog cannot be embedded (its texts are held back by the
    endpoint); a chat appending meanwhile, and a fact stored, get their vectors all the same, and
    the backlog is embedded once it can be, the chat's messages not again."""
    bulk = md.Conversation(owner_id="importer", channel="import", chat_id="bulk")
    chat = md.Conversation(owner_id="ada", channel="telegram", chat_id="live")
    endpoint.hold("archived")
    server = ServerProcess(tmp_path / "home", config=embedding_config(endpoint)).start()
    try:
        async with md.connect(server.address) as channel:
            memory = md.Stubs(channel)
            for start in range(0, 300, 100):
                await append(
                    memory,
                    bulk,
                    *(
                        user(f"archived note {n} about the old project")
                        for n in range(start, start + 100)
                    ),
                )
            await append(memory, chat, user("the espresso machine broke again"))

            async def chat_embedded() -> bool:
                answer = await memory.conversations.SearchHistory(
                    md.SearchHistoryRequest(
                        query="espresso", conversation=chat, mode=md.SEARCH_MODE_HYBRID
                    )
                )
                return answer.unembedded == 0

            await wait_until(chat_embedded, "the chat's message never got its vector")
            status = await memory.admin.GetEmbeddingStatus(md.GetEmbeddingStatusRequest())
            assert status.pending_messages == 300  # the backlog still waits, all of it
            assert status.live_messages == 0
            hits = await semantic(memory, chat, "espresso machine")
            assert hits == ["the espresso machine broke again"]

            owner = md.OwnerScope(owner_id="ada")
            await memory.memory.StoreMemory(
                md.StoreMemoryRequest(
                    owner=owner, category=md.CATEGORY_PREFERENCE, value="Likes oat milk"
                )
            )

            async def fact_embedded() -> bool:
                found = await memory.admin.GetEmbeddingStatus(md.GetEmbeddingStatusRequest())
                return found.pending_memories == 0 and found.embedded_memories == 1

            await wait_until(fact_embedded, "the fact never got its vector")
            assert (
                await memory.admin.GetEmbeddingStatus(md.GetEmbeddingStatusRequest())
            ).pending_messages == 300

            endpoint.recover()
            status = await caught_up(memory, least=301)
            assert status.embedded_messages == 301
            sent = [text for request in endpoint.requests for text in request["input"]]
            assert sum(text.startswith("ada: the espresso machine") for text in sent) == 1
    finally:
        assert server.stop() == 0, server.output


async def test_a_recall_of_both_sources_makes_the_querys_vector_once(
    tmp_path: Path, endpoint: FakeEmbeddings, conversation: md.Conversation
) -> None:
    """Recall with source=all searches the rows and the history side by side; both compare the
    query's one vector."""
    server = ServerProcess(tmp_path / "home", config=embedding_config(endpoint)).start()
    try:
        async with md.connect(server.address) as channel:
            memory = md.Stubs(channel)
            await append(memory, conversation, *(user(text) for text in TEXTS))
            await store(memory, conversation, "lesson_day", "violin lessons are on monday")
            await caught_up(memory, least=3)
            response = await memory.memory.Recall(
                md.RecallRequest(
                    conversation=conversation,
                    query="violin monday",
                    source=md.RECALL_SOURCE_ALL,
                    mode=md.SEARCH_MODE_HYBRID,
                )
            )
            sources = {hit.source for hit in response.hits}
            assert sources == {md.RECALL_SOURCE_MEMORIES, md.RECALL_SOURCE_HISTORY}
            asked = [
                request for request in endpoint.requests if request["input"] == ["violin monday"]
            ]
            assert len(asked) == 1
    finally:
        assert server.stop() == 0, server.output
