"""What an agent framework's integration adds to a turn, against the same RPCs called directly.

    python bench/framework_overhead.py --locomo PATH/TO/locomo10.json [--turns 200] [--rounds 5]
                                       [--backend sqlite|postgres]

A turn is what the framework does with memoryd each time the user speaks, on LoCoMo's turns (a
user's line and the answer after it, the answer shaped as the framework's model gives it),
against a real server:
- openai_agents: Session.get_items, then add_items of the user and assistant items; directly:
  ListMessages of the window, made into the message items the SDK is handed, then
  AppendMessages of the two messages;
- langchain: the history's messages, then add_messages; directly, the same two calls on a
  blocking channel, the window made into LangChain messages;
- langgraph: BaseStore.search of the user's namespace by the user's words, then put of an item;
  directly: Recall and StoreMemory;
- llama_index: the memory block's aget for the new message; directly: GetPromptContext and
  Recall.
A direct arm sends what a client that knows memoryd's limits sends: a long message's query is its
last 32 distinct words, as the integrations make it. Each round runs `--turns` turns through the
integration and as many directly, each arm on a fresh conversation (or owner), turn by turn, each
arm first every other turn; every query is embedded once before (the server keeps query vectors),
so that neither arm pays for the model where the other does not. The figures are the medians and
99th percentiles of every turn, the difference of the medians (the issue's target: at most
1 ms), and the median of the differences of each turn with the other arm's same turn. The Vercel
AI SDK's middleware is TypeScript (bench/ai_sdk_overhead.py).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import backends
import datasets
from search_latency import percentile

import memoryd_client as md
from memoryd.testing.server_process import ServerProcess
from memoryd_client.integrations._kept import search_query

Turn = tuple[str, str]
ROLE_NAMES = {md.ROLE_USER: "user", md.ROLE_ASSISTANT: "assistant", md.ROLE_SYSTEM: "system"}
# One arm's turn: called with the turn's index and texts, on a fresh conversation per round.
Step = Callable[[int, Turn], Awaitable[None]]


def turns_of(path: Path, count: int) -> list[Turn]:
    """Consecutive (user line, answer) pairs of LoCoMo's conversations."""
    found: list[Turn] = []
    for turns in datasets.locomo(path).conversations.values():
        for said, answer in zip(turns[::2], turns[1::2], strict=False):
            found.append((said.text, answer.text))
            if len(found) == count:
                return found
    return found


def answer_as_the_sdk(text: str) -> Any:
    """An answer as the Agents SDK adds it to a session (a Responses output message)."""
    return {
        "id": "__fake_id__",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
    }


def answer_as_chat_openai(text: str) -> Any:
    """An answer as ChatOpenAI returns it: with its response metadata and usage."""
    from langchain_core.messages import AIMessage  # noqa: PLC0415

    return AIMessage(
        text,
        id=f"chatcmpl-{uuid.uuid4().hex[:24]}",
        response_metadata={"model_name": "gpt-4.1-mini", "finish_reason": "stop"},
        usage_metadata={"input_tokens": 812, "output_tokens": 41, "total_tokens": 853},
    )


async def timed(step: Step, turns: list[Turn]) -> list[float]:
    """Each turn's time in milliseconds."""
    spent = []
    for index, turn in enumerate(turns):
        started = time.perf_counter()
        await step(index, turn)
        spent.append((time.perf_counter() - started) * 1000)
    return spent


# --- the arms ---------------------------------------------------------------------------------


def openai_agents(channel: Any, stubs: md.Stubs) -> tuple[Callable[[], Step], Callable[[], Step]]:
    from memoryd_client.integrations.openai_agents import MemorydSession  # noqa: PLC0415

    def integration() -> Step:
        session = MemorydSession(channel, uuid.uuid4().hex, owner_id="bench")

        async def step(_: int, turn: Turn) -> None:
            await session.get_items()
            await session.add_items(
                [
                    {"role": "user", "content": turn[0]},
                    answer_as_the_sdk(turn[1]),
                ]
            )

        return step

    def direct() -> Step:
        key = md.Conversation(owner_id="bench", channel="direct", chat_id=uuid.uuid4().hex)

        async def step(_: int, turn: Turn) -> None:
            listed = await stubs.conversations.ListMessages(
                md.ListMessagesRequest(conversation=key, page_size=1000)
            )
            # What the SDK is handed: the window as message items.
            items = [{"role": ROLE_NAMES[m.role], "content": m.content} for m in listed.messages]
            assert isinstance(items, list)
            await stubs.conversations.AppendMessages(
                md.AppendMessagesRequest(
                    conversation=key,
                    messages=[md.user("bench", turn[0]), md.assistant("assistant", turn[1])],
                )
            )

        return step

    return integration, direct


def langchain(blocking: Any) -> tuple[Callable[[], Step], Callable[[], Step]]:
    from langchain_core.messages import AIMessage, HumanMessage  # noqa: PLC0415

    from memoryd_client.integrations.langchain import MemorydChatMessageHistory  # noqa: PLC0415

    sync = md.SyncStubs(blocking)

    def integration() -> Step:
        history = MemorydChatMessageHistory(uuid.uuid4().hex, channel=blocking, owner_id="bench")

        async def step(_: int, turn: Turn) -> None:
            assert isinstance(history.messages, list)
            history.add_messages([HumanMessage(turn[0]), answer_as_chat_openai(turn[1])])

        return step

    def direct() -> Step:
        key = md.Conversation(owner_id="bench", channel="direct", chat_id=uuid.uuid4().hex)

        async def step(_: int, turn: Turn) -> None:
            listed = sync.conversations.ListMessages(
                md.ListMessagesRequest(conversation=key, page_size=1000)
            )
            # What the chain is handed: the window as LangChain messages.
            history = [
                HumanMessage(m.content) if m.role == md.ROLE_USER else AIMessage(m.content)
                for m in listed.messages
            ]
            assert isinstance(history, list)
            sync.conversations.AppendMessages(
                md.AppendMessagesRequest(
                    conversation=key,
                    messages=[md.user("bench", turn[0]), md.assistant("assistant", turn[1])],
                )
            )

        return step

    return integration, direct


def langgraph(blocking: Any) -> tuple[Callable[[], Step], Callable[[], Step]]:
    from memoryd_client.integrations.langgraph import MemorydStore  # noqa: PLC0415

    store = MemorydStore(channel=blocking)
    sync = md.SyncStubs(blocking)

    def integration() -> Step:
        namespace = (f"lg-{uuid.uuid4().hex[:12]}", "memories")

        async def step(index: int, turn: Turn) -> None:
            store.search(namespace, query=turn[0], limit=5)
            store.put(namespace, f"k{index}", {"data": turn[0][:200]})

        return step

    def direct() -> Step:
        owner = md.OwnerScope(owner_id=f"dr-{uuid.uuid4().hex[:12]}")

        async def step(index: int, turn: Turn) -> None:
            sync.memory.Recall(
                md.RecallRequest(
                    owner=owner,
                    query=search_query(turn[0]),
                    scope=md.RECALL_SCOPE_OWNER,
                    source=md.RECALL_SOURCE_MEMORIES,
                    limit=5,
                )
            )
            sync.memory.StoreMemory(
                md.StoreMemoryRequest(
                    owner=owner,
                    scope_type=md.SCOPE_TYPE_OWNER,
                    category=md.CATEGORY_FACT,
                    key=f"k{index}",
                    value=" ".join(turn[0][:200].split()),
                )
            )

        return step

    return integration, direct


def llama_index(blocking: Any) -> tuple[Callable[[], Step], Callable[[], Step]]:
    from llama_index.core.base.llms.types import ChatMessage  # noqa: PLC0415

    from memoryd_client.integrations.llama_index import MemorydMemoryBlock  # noqa: PLC0415

    sync = md.SyncStubs(blocking)

    def integration() -> Step:
        block = MemorydMemoryBlock(channel=blocking, owner_id="bench")

        async def step(_: int, turn: Turn) -> None:
            await block.aget([ChatMessage(role="user", content=turn[0])])

        return step

    def direct() -> Step:
        owner = md.OwnerScope(owner_id="bench")

        async def step(_: int, turn: Turn) -> None:
            await asyncio.to_thread(functools.partial(_known, sync, owner, turn[0]))

        return step

    return integration, direct


def _known(sync: md.SyncStubs, owner: md.OwnerScope, said: str) -> None:
    sync.context.GetPromptContext(
        md.GetPromptContextRequest(agent_id=owner.agent_id, owner_id=owner.owner_id)
    )
    sync.memory.Recall(
        md.RecallRequest(
            owner=owner,
            query=search_query(said),
            scope=md.RECALL_SCOPE_ALL,
            source=md.RECALL_SOURCE_MEMORIES,
            limit=10,
        )
    )


# --- the run ----------------------------------------------------------------------------------


async def measure(address: str, turns: list[Turn], rounds: int) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    with md.connect_sync(address) as blocking:
        async with md.connect(address) as channel:
            stubs = md.Stubs(channel)
            arms = {
                "openai_agents": openai_agents(channel, stubs),
                "langchain": langchain(blocking),
                "langgraph": langgraph(blocking),
                "llama_index": llama_index(blocking),
            }
            # The server keeps each query's vector: embed every query once first, so that
            # neither arm pays for the model where the other does not.
            for _, (said, _answer) in enumerate(turns):
                await stubs.memory.Recall(
                    md.RecallRequest(
                        owner=md.OwnerScope(owner_id="warm-up"),
                        query=search_query(said),
                        scope=md.RECALL_SCOPE_OWNER,
                    )
                )
            for name, (integration, direct) in arms.items():
                through: list[float] = []
                plain: list[float] = []
                # A warm-up of each, not counted.
                await timed(integration(), turns[:5])
                await timed(direct(), turns[:5])
                for round_ in range(rounds):
                    ours, theirs = integration(), direct()
                    # Turn by turn, each arm first every other turn.
                    for index, turn in enumerate(turns):
                        pair = [(ours, through), (theirs, plain)]
                        if (index + round_) % 2:
                            pair.reverse()
                        for step, spent in pair:
                            started = time.perf_counter()
                            await step(index, turn)
                            spent.append((time.perf_counter() - started) * 1000)
                figures[name] = {
                    "turns": len(through),
                    "integration_p50_ms": round(statistics.median(through), 3),
                    "direct_p50_ms": round(statistics.median(plain), 3),
                    "added_p50_ms": round(statistics.median(through) - statistics.median(plain), 3),
                    # Each turn against the other arm's same turn (the same window, a moment
                    # apart): steadier than the difference of two medians on a noisy machine.
                    "added_paired_median_ms": round(
                        statistics.median(a - b for a, b in zip(through, plain, strict=True)), 3
                    ),
                    "integration_p99_ms": round(percentile(through, 0.99), 3),
                    "direct_p99_ms": round(percentile(plain, 0.99), 3),
                }
                print(name, figures[name], file=sys.stderr, flush=True)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, required=True)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--backend", default="sqlite", choices=backends.CHOICES)
    args = parser.parse_args()
    turns = turns_of(args.locomo, args.turns)
    with (
        tempfile.TemporaryDirectory() as scratch,
        backends.started([args.backend], Path(scratch)) as places,
    ):
        home = Path(scratch) / "home"
        server = ServerProcess(home, env=places.env(args.backend, home)).start()
        try:
            figures = asyncio.run(measure(server.address, turns, args.rounds))
        finally:
            server.stop()
    print(
        json.dumps(
            {
                "benchmark": "framework_overhead",
                "backend": args.backend,
                "turns_per_round": len(turns),
                "rounds": args.rounds,
                "arms": figures,
                "target_added_p50_ms": 1.0,
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
