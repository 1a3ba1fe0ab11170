"""LangGraph's long-term store over memoryd (memoryd_client.integrations.langgraph), through a
compiled graph invoked as LangGraph runs it, against a real memoryd, the model being ChatOpenAI
on a local chat-completions server with scripted answers: what a node puts in the store for a
user, a later thread of that user finds by meaning, another user never; and every store method
answers as LangGraph's own InMemoryStore does."""

from __future__ import annotations

import uuid
from typing import Any

import grpc
import pytest
from langchain_core.runnables import RunnableConfig
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.store.base import BaseStore, InvalidNamespaceError
from langgraph.store.memory import InMemoryStore

import memoryd_client as md
from memoryd.domain import search_query as server_query
from memoryd.testing.fake_model import FakeModel
from memoryd_client.integrations._kept import (
    MAX_QUERY_CHARS,
    MAX_QUERY_WORDS,
    MemorydRefused,
    search_query,
)
from memoryd_client.integrations.langgraph import MemorydStore, searched_text
from tests.helpers import load_example, sent_text
from tests.memory.test_retrieval import embedded

# On both backends: items are memory rows.
pytestmark = pytest.mark.storage


def agent() -> str:
    """An agent no other test uses, so that its owners and namespaces are this test's."""
    return f"lg-{uuid.uuid4().hex[:8]}"


example = load_example("langgraph_store")


def async_memory_graph(model: FakeModel, store: BaseStore) -> Any:
    """The example's graph with an async node: the store's async methods, on its async channel."""
    llm = ChatOpenAI(model="fake-model", base_url=model.base_url, api_key="unused")  # type: ignore[arg-type]

    async def call_model(state: MessagesState, config: RunnableConfig, *, store: BaseStore) -> Any:
        namespace = (config["configurable"]["user_id"], "memories")
        said = str(state["messages"][-1].content)
        known = await store.asearch(namespace, query=said, limit=5)
        info = "; ".join(item.value["data"] for item in known) or "nothing"
        if said.lower().startswith("remember"):
            await store.aput(namespace, str(uuid.uuid4()), {"data": said.split(":", 1)[1].strip()})
        system = {"role": "system", "content": f"What you know of the user: {info}"}
        return {"messages": [await llm.ainvoke([system, *state["messages"]])]}

    builder = StateGraph(MessagesState)
    builder.add_node("call_model", call_model)
    builder.add_edge(START, "call_model")
    return builder.compile(store=store)


def config_of(user: str) -> RunnableConfig:
    return {"configurable": {"user_id": user, "thread_id": uuid.uuid4().hex}}


async def test_a_graph_remembers_a_user_across_threads_and_never_for_another(
    blocking: grpc.Channel, channel: grpc.aio.Channel, model: FakeModel
) -> None:
    store = MemorydStore(channel=blocking, agent_id=agent())
    llm = ChatOpenAI(model="fake-model", base_url=model.base_url, api_key="unused")  # type: ignore[arg-type]
    graph = example.memory_graph(llm, store)

    model.reply("I'll remember.")
    graph.invoke(
        {"messages": [("user", "Remember: is vegetarian and cooks Sichuan dishes")]},
        config_of("ada"),
    )
    await embedded(md.Stubs(channel))
    model.reply("You are vegetarian.")
    graph.invoke({"messages": [("user", "Am I vegetarian?")]}, config_of("ada"))
    assert "is vegetarian and cooks Sichuan dishes" in sent_text(model.requests[-1])

    model.reply("I don't know.")
    graph.invoke({"messages": [("user", "Am I vegetarian?")]}, config_of("ben"))
    assert "What you know of the user: nothing" in sent_text(model.requests[-1])

    # The item is Ada's memory row: memoryd's own recall finds it too.
    recalled = await md.Stubs(channel).memory.Recall(
        md.RecallRequest(
            owner=md.OwnerScope(agent_id=store.agent_id, owner_id="ada"),
            query="Sichuan",
            scope=md.RECALL_SCOPE_OWNER,
            source=md.RECALL_SOURCE_MEMORIES,
        )
    )
    assert [hit.memory.value for hit in recalled.hits] == ["is vegetarian and cooks Sichuan dishes"]


async def test_the_async_graph_on_the_async_channel(
    channel: grpc.aio.Channel, model: FakeModel
) -> None:
    store = MemorydStore(async_channel=channel, agent_id=agent())
    graph = async_memory_graph(model, store)
    model.reply("Noted.")
    await graph.ainvoke(
        {"messages": [("user", "Remember: has a sister called Inês")]}, config_of("ada")
    )
    await embedded(md.Stubs(channel))
    model.reply("Inês.")
    await graph.ainvoke({"messages": [("user", "What is my sister called?")]}, config_of("ada"))
    assert "has a sister called Inês" in sent_text(model.requests[-1])
    with pytest.raises(RuntimeError, match="need channel="):
        store.get(("ada", "memories"), "x")


def fill(store: BaseStore) -> None:
    store.put(("ada", "memories"), "diet", {"data": "Is vegetarian", "rank": 3, "tags": ["food"]})
    store.put(("ada", "memories"), "city", {"data": "Lives in Porto", "rank": 7})
    store.put(("ada", "memories", "work"), "team", {"data": "Billing team", "rank": 5})
    store.put(
        ("ada", "profile"), "name", {"data": "Ada — 東京 🍣", "nested": {"lang": "pt"}, "rank": 0}
    )
    store.put(("ben", "memories"), "diet", {"data": "Eats everything", "rank": 1})
    store.put(("ada", "memories"), "city", {"data": "Lives in Lisbon", "rank": 8})


def keyed(items: list[Any]) -> list[tuple[tuple[str, ...], str, Any]]:
    return sorted((item.namespace, item.key, item.value) for item in items)


async def test_every_method_answers_as_langgraph_s_in_memory_store(
    blocking: grpc.Channel, channel: grpc.aio.Channel
) -> None:
    ours = MemorydStore(channel=blocking, async_channel=channel, agent_id=agent())
    theirs = InMemoryStore()
    for store in (ours, theirs):
        fill(store)

    for namespace, key in (
        (("ada", "memories"), "diet"),
        (("ada", "memories"), "city"),
        (("ada", "memories", "work"), "team"),
        (("ada", "memories"), "nothing"),
    ):
        mine, reference = ours.get(namespace, key), theirs.get(namespace, key)
        assert (mine is None) == (reference is None), (namespace, key)
        if mine is not None and reference is not None:
            assert (mine.namespace, mine.key, mine.value) == (
                reference.namespace,
                reference.key,
                reference.value,
            )
            assert mine.updated_at >= mine.created_at
    # (InMemoryStore's get makes the namespace it looks in: asked only of ours.)
    assert ours.get(("carol", "memories"), "diet") is None
    searches: list[dict[str, Any]] = [
        {"namespace_prefix": ("ada",)},
        {"namespace_prefix": ("ada", "memories")},
        {"namespace_prefix": ("ada", "memories", "work")},
        {"namespace_prefix": ("ada",), "filter": {"rank": {"$gte": 5}}},
        {"namespace_prefix": ("ada",), "filter": {"rank": {"$gt": 3, "$lt": 8}}},
        {"namespace_prefix": ("ada",), "filter": {"tags": ["food"]}},
        {"namespace_prefix": ("ada",), "filter": {"nested": {"lang": "pt"}}},
        {"namespace_prefix": ("ada",), "filter": {"data": {"$ne": "Is vegetarian"}}},
        {"namespace_prefix": ("ada",), "filter": {"missing": 1}},
        {"namespace_prefix": ("ben",)},
        {"namespace_prefix": ("ada",), "limit": 2, "offset": 10},
    ]
    for search in searches:
        prefix = search.pop("namespace_prefix")
        assert keyed(ours.search(prefix, **search)) == keyed(theirs.search(prefix, **search)), (
            prefix,
            search,
        )
        assert keyed(await ours.asearch(prefix, **search)) == keyed(
            await theirs.asearch(prefix, **search)
        )
    # Without a query, the most recently updated first; pages of it.
    assert [item.key for item in ours.search(("ada", "memories"))][:1] == ["city"]
    everything = ours.search(("ada",), limit=100)
    paged = ours.search(("ada",), limit=2) + ours.search(("ada",), limit=2, offset=2)
    assert [i.key for i in paged] == [i.key for i in everything]

    listings: list[dict[str, Any]] = [
        {},
        {"prefix": ("ada",)},
        {"prefix": ("ada", "memories")},
        {"suffix": ("memories",)},
        {"prefix": ("*", "memories")},
        {"max_depth": 2},
        {"prefix": ("ada",), "max_depth": 1},
        {"limit": 2, "offset": 1},
    ]
    for listing in listings:
        assert ours.list_namespaces(**listing) == theirs.list_namespaces(**listing), listing
        assert await ours.alist_namespaces(**listing) == await theirs.alist_namespaces(**listing)

    for store in (ours, theirs):
        store.delete(("ada", "memories"), "diet")
        await store.adelete(("ada", "memories", "work"), "team")
        store.delete(("ada", "memories"), "never-there")
    assert keyed(ours.search(("ada",))) == keyed(theirs.search(("ada",)))
    # A namespace whose last item went is gone, as in LangGraph's PostgresStore (InMemoryStore
    # keeps listing it, empty).
    assert ours.list_namespaces(prefix=("ada",)) == [("ada", "memories"), ("ada", "profile")]


async def test_a_query_finds_by_meaning_and_words_within_one_owner_only(
    blocking: grpc.Channel, channel: grpc.aio.Channel
) -> None:
    store = MemorydStore(channel=blocking, agent_id=agent())
    fill(store)
    store.put(("ada", "memories"), "hidden", {"data": "Vegetarian secret"}, index=False)
    await embedded(md.Stubs(channel))
    found = store.search(("ada",), query="vegetarian")
    assert [item.key for item in found] == ["diet"]
    assert found[0].score is not None
    assert 0 < found[0].score <= 1
    assert store.search(("ada",), query="vegetarian", filter={"rank": {"$gt": 5}}) == []
    assert store.search(("ada", "profile"), query="vegetarian") == []
    assert [i.key for i in store.search(("ben",), query="Eats everything")] == ["diet"]
    assert store.search(("carol",), query="vegetarian") == []
    # Without an async channel, the async methods run the blocking ones in a thread.
    diet = await store.aget(("ada", "memories"), "diet")
    assert diet is not None
    assert diet.value["data"] == "Is vegetarian"
    # The hidden item is there, by its key and by a filter, never by a query.
    hidden = store.get(("ada", "memories"), "hidden")
    assert hidden is not None
    assert hidden.value == {"data": "Vegetarian secret"}
    assert [i.key for i in store.search(("ada",), filter={"data": "Vegetarian secret"})] == [
        "hidden"
    ]


async def test_a_long_query_is_searched_by_its_last_words(
    blocking: grpc.Channel, channel: grpc.aio.Channel
) -> None:
    store = MemorydStore(channel=blocking, agent_id=agent())
    store.put(("ada", "memories"), "boat", {"data": "Owns a sailing boat called Ariel"})
    await embedded(md.Stubs(channel))
    # More distinct words than memoryd searches at once (it refuses such a query).
    rambling = " ".join(f"aside{number}" for number in range(60)) + " "
    asked = rambling + "where is my sailing boat moored?"
    # As a query of its own, memoryd refuses it; the store searches its last words instead.
    with pytest.raises(grpc.RpcError, match="words; the limit is 32"):
        md.SyncStubs(blocking).memory.Recall(
            md.RecallRequest(
                owner=md.OwnerScope(agent_id=store.agent_id, owner_id="ada"),
                query=asked,
                scope=md.RECALL_SCOPE_OWNER,
            )
        )
    assert isinstance(store.search(("ada",), query=asked), list)
    query = search_query(rambling + "where is my sailing boat moored?")
    assert len(query.split()) == MAX_QUERY_WORDS
    assert query.endswith("where is my sailing boat moored?")
    # The client's limits are the server's.
    assert (server_query.MAX_QUERY_WORDS, server_query.MAX_QUERY_CHARS) == (
        MAX_QUERY_WORDS,
        MAX_QUERY_CHARS,
    )


async def test_what_memoryd_cannot_hold_is_refused_with_its_reason(
    blocking: grpc.Channel,
) -> None:
    store = MemorydStore(channel=blocking, agent_id=agent())
    second = MemorydStore(channel=blocking, agent_id=store.agent_id, owner_at=1)
    with pytest.raises(InvalidNamespaceError, match="names no owner"):
        second.put(("memories",), "k", {"data": "x"})
    with pytest.raises(InvalidNamespaceError, match="names no owner"):
        second.search(("memories",))
    with pytest.raises(InvalidNamespaceError, match="names no owner"):
        second.get(("memories", " "), "k")
    with pytest.raises(MemorydRefused) as refused:
        store.put(("ada", "memories"), "k" * 300, {"data": "x"})
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(MemorydRefused) as refused:
        store.put(("ada", "memories"), "big", {"data": "x" * (70 * 1024)})
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert store.search(("ada",)) == []
    with pytest.raises(ValueError, match="needs a channel"):
        MemorydStore()


def test_an_item_s_searched_text_is_its_index_or_its_longest_text() -> None:
    value = {"data": "short", "notes": {"long": "a  much\\nlonger text " * 3}, "n": 5}
    assert searched_text(value, None) == " ".join(("a much\\nlonger text " * 3).split())
    assert searched_text(value, ["data"]) == "short"
    assert searched_text({"data": "x" * 500}, None) == "x" * 200
    assert searched_text({"n": 5}, None) == ""
