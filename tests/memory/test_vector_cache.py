"""The vector cache (memoryd.services.semantic.VectorCache) holds the scopes searched by meaning
within its budget, each counted with what it costs beside its vectors: scopes with no vector
yet (a backlog's) leave like the others, and a scope that left is read again when searched."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryd.domain.conversation import ConversationKey, HistoryScope, conversation_key
from memoryd.domain.fusion import SearchMode
from memoryd.domain.messages import Trust
from memoryd.runtime import Runtime
from memoryd.services.semantic import SCOPE_BYTES
from memoryd.storage import vector_reads
from memoryd.storage.sql import Row
from memoryd.storage.transaction import Transaction
from memoryd.testing.configs import embedding_config
from memoryd.testing.fake_embeddings import FakeEmbeddings
from tests.in_process import use_cases
from tests.memory.test_backfill import said

# Exercises storage: make test runs it on PostgreSQL too.
pytestmark = pytest.mark.storage

BUDGET_MB = 0.01
BUDGET = int(BUDGET_MB * (1 << 20))
CHATS = 30
# The longest a test waits for a search or a read it started (never reached when it passes).
TIMEOUT = 30.0


def chat(number: int) -> ConversationKey:
    return conversation_key(
        agent_id="main", owner_id="ada", channel="cache", chat_id=f"c{number}", thread_scope=""
    )


async def meaning(runtime: Runtime, key: ConversationKey, query: str) -> list[str]:
    """A search of one chat by meaning alone: the texts found."""
    found = await runtime.services.search.search(
        key, query, kinds=[], requested_limit=3, mode=SearchMode.SEMANTIC
    )
    return [hit.message.content for hit in found.hits]


async def test_scopes_without_vectors_count_against_the_budget_and_leave(
    tmp_path: Path, endpoint: FakeEmbeddings
) -> None:
    config = embedding_config(endpoint, vector_cache_mb=BUDGET_MB)
    async with use_cases(tmp_path / "home", config=config) as runtime:
        embedding, cache = runtime.services.embedding, runtime.services.search.vectors.cache
        await runtime.services.history.append(chat(0), [said("the violin case")])
        while await embedding.step():  # the model's row, and chat 0's vector
            pass
        for number in range(1, CHATS):  # messages the embedder has not reached yet
            await runtime.services.history.append(chat(number), [said(f"violin {number}")])
        for number in range(1, CHATS):
            assert await meaning(runtime, chat(number), "violin") == []
            scopes, held = cache.held()
            assert held <= BUDGET
            assert scopes <= BUDGET // SCOPE_BYTES
        assert cache.held()[0] == BUDGET // SCOPE_BYTES

        # Chat 0's scope left long ago; searched again, it is read again.
        assert await meaning(runtime, chat(0), "violin") == ["the violin case"]
        while await embedding.step():
            pass
        assert await meaning(runtime, chat(CHATS - 1), "violin") == [f"violin {CHATS - 1}"]


async def test_a_scope_brought_up_to_date_is_counted_once(
    tmp_path: Path, endpoint: FakeEmbeddings
) -> None:
    async with use_cases(tmp_path / "home", config=embedding_config(endpoint)) as runtime:
        embedding, cache = runtime.services.embedding, runtime.services.search.vectors.cache
        first = 0
        for round_ in range(3):
            await runtime.services.history.append(chat(0), [said(f"violin {round_}")])
            while await embedding.step():
                pass
            found = await meaning(runtime, chat(0), "violin")
            assert len(found) == round_ + 1
            scopes, held = cache.held()
            assert scopes == 1
            first = first or held
            # One scope, what it costs beside its vectors and their arrays (room for 16, so a
            # vector more adds a few bytes of its id's order): counted twice, it would be twice.
            assert SCOPE_BYTES < first <= held < first + 100
        cache.clear()
        assert cache.held() == (0, 0)


class PausedLoad:
    """The real reading of one scope's vectors (vector_reads.scope_vectors), held at its start
    until released: what another search does meanwhile can be seen."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, scope: ConversationKey) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        read = vector_reads.scope_vectors

        def paused(
            connection: Transaction, searched: HistoryScope, model_id: int, after_seq: int
        ) -> Iterator[list[Row]]:
            if searched == scope:
                self.started.set()
                assert self.release.wait(TIMEOUT)
            yield from read(connection, searched, model_id, after_seq)

        monkeypatch.setattr(vector_reads, "scope_vectors", paused)

    async def begun(self) -> None:
        assert await asyncio.to_thread(self.started.wait, TIMEOUT)


async def embedded_chats(runtime: Runtime, count: int) -> None:
    """Chats 0 to count - 1, one message each, every one with its vector."""
    for number in range(count):
        await runtime.services.history.append(chat(number), [said(f"violin {number}")])
    while await runtime.services.embedding.step():
        pass


async def test_a_scope_read_from_the_database_holds_up_no_search_of_another(
    tmp_path: Path, endpoint: FakeEmbeddings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scope is read outside the cache's lock: while one search waits on its scope's read,
    a search of another scope is answered."""
    async with use_cases(tmp_path / "home", config=embedding_config(endpoint)) as runtime:
        await embedded_chats(runtime, 2)
        load = PausedLoad(monkeypatch, chat(0))
        first = asyncio.ensure_future(meaning(runtime, chat(0), "violin"))
        try:
            await load.begun()
            other = await asyncio.wait_for(meaning(runtime, chat(1), "violin"), TIMEOUT)
            assert other == ["violin 1"]
        finally:
            load.release.set()
        assert await first == ["violin 0"]
        assert runtime.services.search.vectors.cache.held()[0] == 2


async def test_a_scope_read_across_an_erasure_is_not_kept(
    tmp_path: Path, endpoint: FakeEmbeddings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An erasure clears the cache on the writer's thread after its commit: it does not wait
    for a scope being read from the snapshot before it, and that copy (which holds the erased
    vectors) is not held after its search, which finds nothing erased."""
    async with use_cases(tmp_path / "home", config=embedding_config(endpoint)) as runtime:
        await embedded_chats(runtime, 2)
        cache = runtime.services.search.vectors.cache
        load = PausedLoad(monkeypatch, chat(0))
        first = asyncio.ensure_future(meaning(runtime, chat(0), "violin"))
        try:
            await load.begun()
            purged = runtime.services.erasure.purge_conversation(chat(0), Trust.OPERATOR)
            assert (await asyncio.wait_for(purged, TIMEOUT)).messages_deleted == 1
        finally:
            load.release.set()
        assert await first == []
        assert cache.held() == (0, 0)
        # The cache holds what is searched after the erasure.
        assert await meaning(runtime, chat(1), "violin") == ["violin 1"]
        assert cache.held()[0] == 1
