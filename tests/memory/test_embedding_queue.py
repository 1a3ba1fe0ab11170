"""The live queue's sorting (memoryd.domain.embedding_queue), counted by the database
(memoryd.storage.vector_store): of what arrived since the embedder last looked, a
conversation's messages are live when it brought at most LIVE_BACKLOG of them; the rest stay in
the backlog, and a look takes at most ARRIVALS."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.domain.conversation import ConversationKey, conversation_key
from memoryd.domain.embedding_queue import LIVE_BACKLOG
from memoryd.runtime import Runtime
from memoryd.storage import vector_store as store
from memoryd.testing.configs import embedding_config
from memoryd.testing.fake_embeddings import FakeEmbeddings
from tests.in_process import use_cases
from tests.memory.test_backfill import said

# Exercises storage: make test runs it on PostgreSQL too.
pytestmark = pytest.mark.storage


def chat(name: str) -> ConversationKey:
    return conversation_key(
        agent_id="main", owner_id="ada", channel="queue", chat_id=name, thread_scope=""
    )


async def append(runtime: Runtime, name: str, count: int) -> list[int]:
    """`count` messages appended to the chat `name` in one call; their ids."""
    appended = await runtime.services.history.append(
        chat(name), [said(f"{name} says {n}") for n in range(count)]
    )
    return [message.id for message in appended.stored]


async def live(runtime: Runtime) -> list[int]:
    """The live queue's messages still without a vector, oldest first."""
    model = runtime.services.embedding.model
    texts = await runtime.readers.read(
        lambda connection: store.live_messages(connection, model, 1_000)
    )
    return [text.id for text in texts]


async def test_a_conversation_that_brought_few_is_live_and_one_that_brought_many_waits(
    tmp_path: Path, endpoint: FakeEmbeddings
) -> None:
    async with use_cases(tmp_path / "home", config=embedding_config(endpoint)) as runtime:
        embedding = runtime.services.embedding
        first = await append(runtime, "first", 1)
        assert await embedding.step()  # the first vector makes the model's row
        assert embedding.model is not None

        bulk = await append(runtime, "bulk", LIVE_BACKLOG + 1)
        edge = await append(runtime, "edge", LIVE_BACKLOG)
        small = await append(runtime, "small", 2)
        # Before a look, nothing is sorted; the model's row does not know them.
        assert await runtime.readers.read(
            lambda connection: store.arrivals_count(connection, embedding.model)
        ) == len(first + bulk + edge + small)

        sorting = embedding.model
        through = await runtime.writer.run(
            "sort", lambda transaction: store.sort_arrivals(transaction, sorting)
        )
        assert through == small[-1]
        model = await runtime.readers.read(
            lambda connection: store.find_model(connection, sorting.provider, sorting.model)
        )
        assert model is not None
        assert model.arrived_through == small[-1]
        # The first message has its vector; of the rest, the chats that brought at most
        # LIVE_BACKLOG are live, the bulk's stay in the backlog.
        assert await live(runtime) == edge + small
        waiting = await runtime.readers.read(
            lambda connection: store.waiting_messages(connection, model, 1_000)
        )
        assert [text.id for text in waiting] == bulk + edge + small

        # Nothing arrived since: a second look sorts nothing and moves nothing.
        assert (
            await runtime.readers.read(lambda connection: store.arrivals_count(connection, model))
            == 0
        )
        assert (
            await runtime.writer.run(
                "sort", lambda transaction: store.sort_arrivals(transaction, model)
            )
            is None
        )

        # The live queue is embedded first.
        before = len(endpoint.requests)
        assert await embedding.step()
        sent = [text for request in endpoint.requests[before:] for text in request["input"]]
        assert sent
        assert all(text.startswith(("ada: edge says", "ada: small says")) for text in sent)


async def test_before_the_first_vector_the_live_arrivals_are_found_at_each_look(
    tmp_path: Path, endpoint: FakeEmbeddings
) -> None:
    async with use_cases(tmp_path / "home", config=embedding_config(endpoint)) as runtime:
        await append(runtime, "bulk", LIVE_BACKLOG + 3)
        small = await append(runtime, "small", 3)
        for _ in range(2):  # not stored: found again
            assert (
                await runtime.readers.read(lambda connection: store.live_arrivals(connection, None))
                == small
            )
            assert await runtime.readers.read(
                lambda connection: store.live_count(connection, None)
            ) == len(small)
        # The first step embeds them (the model's row is made with the first vector).
        assert await runtime.services.embedding.step()
        sent = [text for request in endpoint.requests for text in request["input"]]
        said_first = sorted(text.split("\n")[0] for text in sent)  # each with the one before
        assert said_first == [f"ada: small says {n}" for n in range(3)]


async def test_a_look_sorts_at_most_arrivals_messages(
    tmp_path: Path, endpoint: FakeEmbeddings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store, "ARRIVALS", 4)
    async with use_cases(tmp_path / "home", config=embedding_config(endpoint)) as runtime:
        embedding = runtime.services.embedding
        await append(runtime, "first", 1)
        assert await embedding.step()
        model = embedding.model
        assert model is not None
        one, two = await append(runtime, "one", 2), await append(runtime, "two", 3)
        assert (
            await runtime.readers.read(lambda connection: store.arrivals_count(connection, model))
            == 4
        )  # at most ARRIVALS
        through = await runtime.writer.run(
            "sort", lambda transaction: store.sort_arrivals(transaction, model)
        )
        # The first four arrivals: the first message (it has its vector), "one"'s two, and
        # one of "two"'s; each chat brought few of them, so all are live.
        assert through == two[0]
        assert await live(runtime) == [*one, two[0]]
