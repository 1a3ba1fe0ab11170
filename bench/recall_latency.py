"""(c) Recall and GetPromptContext latency over 1M messages and 100k memory rows.

    python bench/recall_latency.py [--messages 1000000] [--memories 100000] [--queries 2000]
                                   [--owners 300] [--calls 3000] [--backend postgres]
                                   [--embeddings on|off] [--locomo PATH [--cache FILE]]

The corpus (bench/corpus.py's vocabulary) is bulk-loaded into a freshly migrated database with
SQL in one transaction: through the RPCs it would take many minutes, and the load is not what
is measured. The schema's own triggers (SQLite) and generated columns (PostgreSQL) build every
index; PostgreSQL's tables are then analyzed, as autovacuum would. 3,000 conversations belong
to 1,765 (agent, owner) pairs (owners drawn from 2,000, two agents); each pair has about 57
memory rows across the six categories, notes and scopes. Then a real server opens the
database; 300 owners (`--owners`) get one StoreMemory each, so their prompt files are rendered and
versioned by the server itself.

With `--locomo` the messages are LoCoMo's turns instead (bench/real_chat.py: each conversation
goes on in LoCoMo's order from a start of its own), the memory rows hold its turns as values, the
queries are its questions as typed, and every message and row has its vector before the server
starts (real vectors of the embedded model, each distinct text embedded once and kept in
--cache): Recall once the vectors have caught up, where the generated corpus measures it while
a million messages wait for theirs (the embedder at work beside the queries).

Recall queries are what a tool call sends: one mid-frequency word, two words, a partial word or
non-English text; scope current / owner / all; source memories (60%), history (20%) or all
(20%). GetPromptContext is called for the rendered owners (first call per owner loads the
cache; the figure is every call after that). Latency is measured at the client and, from the
server's RPC log lines, inside the server.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import backends
import corpus
import grpc
import real_chat
import server_config
from append_throughput import ghz_binary, summary
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hybrid_latency import DEFAULT_CACHE
from search_latency import percentile

import memoryd_client as md
from memoryd.domain.conversation import (
    ConversationKey,
    OwnerKey,
    owner_scope_token,
    search_scope_tokens,
)
from memoryd.domain.memories import Category, ScopeType, prompt_target
from memoryd.domain.timestamps import to_text
from memoryd.domain.tokens import count_tokens
from memoryd.storage.sql import write_transaction
from memoryd.storage.transaction import Transaction
from memoryd.testing.server_process import ServerProcess

AGENTS = ("main", "helper")
OWNERS = 2000
CONVERSATIONS = 3000
RENDERED_OWNERS = 300
STAMP = "2026-11-30T00:00:00.000Z"
CATEGORIES = [c for c in Category if c is not Category.JOB_RUN_SUMMARY]


def build(
    places: backends.Backends,
    backend: str,
    home: Path,
    sizes: tuple[int, int],
    rng: random.Random,
    *,
    spread_days: int = 0,
    chat_texts: real_chat.ChatTexts | None = None,
) -> dict[str, Any]:
    """Create and fill the database with (messages, memories) in one transaction; returns what
    the queries need. With `spread_days`, the messages' times run evenly over that many days up
    to now (otherwise they all carry STAMP); with `chat_texts`, the texts are LoCoMo's."""
    with places.migrated(backend, home) as connection, write_transaction(connection):
        built = fill(connection, *sizes, rng, spread_days=spread_days, chat_texts=chat_texts)
    places.settle(home)
    return built


def fill(
    connection: Transaction,
    messages: int,
    memories: int,
    rng: random.Random,
    *,
    spread_days: int = 0,
    chat_texts: real_chat.ChatTexts | None = None,
) -> dict[str, Any]:
    """Fill a migrated database in one transaction; returns what the queries need."""
    now = dt.datetime.now(dt.UTC)
    step = dt.timedelta(days=spread_days) / max(messages, 1)

    def stamp(index: int) -> str:
        return to_text(now - step * (messages - index)) if spread_days else STAMP

    words = corpus.vocabulary()
    chats = []
    for index in range(CONVERSATIONS):
        agent = AGENTS[1] if index % 10 == 9 else AGENTS[0]
        owner = f"owner-{rng.randrange(OWNERS)}"
        channel = rng.choice(("telegram", "slack", "discord"))
        chats.append(ConversationKey(agent, owner, channel, f"c{index}", "root"))
    texts: list[str] = []
    connection.executemany(
        "INSERT INTO conversations (agent_id, owner_id, channel, chat_id, thread_scope, "
        "history_version, search_scope, created_at) VALUES (?, ?, ?, ?, ?, 1, ?, ?)",
        [(*chat.as_row(), search_scope_tokens(chat), STAMP) for chat in chats],
    )

    def message_rows() -> Iterator[tuple[Any, ...]]:
        for index in range(messages):
            number = rng.randrange(len(chats))
            chat = chats[number]
            sender, text = "x", corpus.message_text(rng, words)
            if chat_texts is not None:
                sender, text = chat_texts.next(number)
            if len(texts) < 20000:
                texts.append(text)
            role = rng.choice(("user", "assistant"))
            # Token counts as memoryd stores them with each message (without them the server
            # would count a million at start-up).
            tokens = count_tokens(text)
            yield (
                *chat.as_row(),
                sender,
                role,
                "chat_message",
                text,
                "operator",
                stamp(index),
                tokens,
            )

    connection.executemany(
        "INSERT INTO messages (agent_id, owner_id, channel, chat_id, thread_scope, sender, "
        "role, kind, content, trust, created_at, token_count) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        message_rows(),
    )
    owners = sorted({OwnerKey(chat.agent_id, chat.owner_id) for chat in chats}, key=str)
    chats_of: dict[OwnerKey, list[ConversationKey]] = defaultdict(list)
    for chat in chats:
        chats_of[OwnerKey(chat.agent_id, chat.owner_id)].append(chat)

    def memory_rows() -> Iterator[tuple[Any, ...]]:
        for number in range(memories):
            owner = owners[number % len(owners)]
            category = rng.choice(CATEGORIES)
            if category is Category.FACT:
                scope, scope_id = ScopeType.CONVERSATION, rng.choice(chats_of[owner]).scope_id
            elif category in (Category.CONTEXT, Category.DIRECTIVE):
                scope, scope_id = ScopeType.AGENT, owner.agent_id
            else:
                scope, scope_id = ScopeType.OWNER, owner.owner_id
            value = corpus.message_text(rng, words)[:200]
            key = f"{category.value}-{number}"
            if chat_texts is not None:
                # Keys and values of few kinds (an owner's n-th row of each of 8 kinds), so that
                # the texts embedded are few; every owner's are unique by the row's place.
                place = number // len(owners)
                key = f"{category.value}-{place}"
                value = chat_texts.turn(place * 101 + number % 8)[1][:200]
            yield (
                owner.agent_id,
                owner.owner_id,
                scope.value,
                scope_id,
                category.value,
                key,
                value,
                prompt_target(category, scope).value,
                "operator",
                owner_scope_token(owner),
                STAMP,
                STAMP,
            )

    connection.executemany(
        "INSERT INTO memories (agent_id, owner_id, scope_type, scope_id, category, key, value, "
        "promote_target, trust, search_scope, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        memory_rows(),
    )
    values = [row[0] for row in connection.execute("SELECT value FROM memories LIMIT 20000")]
    return {"chats": chats, "owners": owners, "texts": texts + values}


def recall_requests(
    rng: random.Random,
    chats: list[ConversationKey],
    texts: list[str],
    count: int,
    questions: list[str] | None = None,
) -> list[Any]:
    """(kind, request) pairs; with `questions`, each query is one of them as typed."""
    content = set(corpus.vocabulary().content_words())
    made = []
    for _ in range(count):
        roll = rng.random()
        words = [w.strip(".?!").lower() for w in rng.choice(texts).split()]
        words = [w for w in words if w in content]
        if questions is not None:
            kind, query = "question", real_chat.asked(rng.choice(questions))
        elif roll < 0.5 and words:
            kind, query = "one word", rng.choice(words)
        elif roll < 0.75 and len(words) >= 2:
            kind, query = "two words", " ".join(rng.sample(words, 2))
        elif roll < 0.95 and words:
            word = rng.choice([w for w in words if len(w) >= 6] or words)
            kind, query = "partial word", word[: max(3, len(word) - 2)]
        else:
            kind, query = "non-English", rng.choice(("東京", "会議", "😀", "привет", "café"))
        chat = rng.choice(chats)
        scope = rng.choice((md.RECALL_SCOPE_CURRENT, md.RECALL_SCOPE_OWNER, md.RECALL_SCOPE_ALL))
        source_roll = rng.random()
        source = (
            md.RECALL_SOURCE_MEMORIES
            if source_roll < 0.6
            else md.RECALL_SOURCE_HISTORY
            if source_roll < 0.8
            else md.RECALL_SOURCE_ALL
        )
        request = md.RecallRequest(
            conversation=md.Conversation(
                agent_id=chat.agent_id,
                owner_id=chat.owner_id,
                channel=chat.channel,
                chat_id=chat.chat_id,
            ),
            query=query,
            scope=scope,
            source=source,
        )
        made.append(
            (kind, md.RecallSource.Name(source).removeprefix("RECALL_SOURCE_").lower(), request)
        )
    return made


def rendered(memory: md.SyncStubs, owners: list[OwnerKey]) -> None:
    """One StoreMemory for each owner, so that the server renders and versions its prompt
    files itself."""
    for owner in owners:
        memory.memory.StoreMemory(
            md.StoreMemoryRequest(
                owner=md.OwnerScope(agent_id=owner.agent_id, owner_id=owner.owner_id),
                category=md.CATEGORY_PREFERENCE,
                key="bench",
                value="Prefers short answers",
            )
        )


def caught_up(memory: md.SyncStubs) -> None:
    """Once nothing waits for a vector (at most a minute)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status = memory.admin.GetEmbeddingStatus(md.GetEmbeddingStatusRequest())
        if status.pending_messages + status.pending_memories == 0:
            return
        time.sleep(0.2)
    sys.exit(f"vectors still waiting after a minute: {status}")


def ghz_latency(
    address: str, call: str, data: list[dict[str, Any]], total: int
) -> dict[str, float]:
    """Latency of `call`, one at a time on one connection, from ghz (a Go client: its own cost
    per call is far below the Python client's). ghz finds the method by server reflection and
    sends the `data` messages in turn."""
    result = subprocess.run(
        [
            ghz_binary(),
            "--insecure",
            "--call",
            call,
            "--data",
            json.dumps(data),
            "--concurrency",
            "1",
            "--connections",
            "1",
            "--total",
            str(total),
            "--format",
            "json",
            address,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return summary(json.loads(result.stdout))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument(
        "--owners", type=int, default=RENDERED_OWNERS, help="owners whose prompt is rendered"
    )
    parser.add_argument(
        "--calls", type=int, default=3000, help="GetPromptContext and health calls through ghz"
    )
    parser.add_argument("--backend", default="sqlite", choices=backends.CHOICES)
    parser.add_argument("--locomo", type=Path, help="LoCoMo's locomo10.json: its text, embedded")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="the vectors' cache")
    server_config.add_embeddings_option(parser)
    args = parser.parse_args()
    rng = random.Random(2027)
    chat = None if args.locomo is None else real_chat.Corpus.read(args.locomo)
    with (
        tempfile.TemporaryDirectory() as scratch,
        backends.started([args.backend], Path(scratch)) as places,
    ):
        home = Path(scratch) / "home"
        started = time.perf_counter()
        built = build(
            places,
            args.backend,
            home,
            (args.messages, args.memories),
            rng,
            chat_texts=None if chat is None else real_chat.ChatTexts(chat, rng),
        )
        build_seconds = time.perf_counter() - started
        embedded: dict[str, float] = {}
        if chat is not None:
            with places.migrated(args.backend, home) as connection:
                embedded = real_chat.embed_stored(connection, args.cache)
                embedded.update(real_chat.embed_memories(connection, args.cache))
            places.settle(home)
        config = server_config.embeddings(args.embeddings)
        server = ServerProcess(home, config=config, env=places.env(args.backend, home)).start()
        try:
            with grpc.insecure_channel(server.address) as channel:
                memory = md.SyncStubs(channel)
                owners = rng.sample(built["owners"], args.owners)
                rendered(memory, owners)
                planned = recall_requests(
                    rng,
                    built["chats"],
                    built["texts"],
                    args.queries,
                    None if chat is None else chat.questions,
                )
                for _, _, request in planned[:200]:
                    memory.memory.Recall(request)
                if chat is not None:  # the rows StoreMemory wrote get their vectors first
                    caught_up(memory)
                mark = len(server.events("rpc"))
                client: dict[str, list[float]] = defaultdict(list)
                for kind, source, request in planned:
                    begin = time.perf_counter()
                    memory.memory.Recall(request)
                    elapsed = (time.perf_counter() - begin) * 1000
                    for key in ("all", f"kind: {kind}", f"source: {source}"):
                        client[key].append(elapsed)
                prompt_requests = [
                    md.GetPromptContextRequest(agent_id=o.agent_id, owner_id=o.owner_id)
                    for o in owners
                ]
                for request in prompt_requests:  # the first call per owner fills the cache
                    memory.context.GetPromptContext(request)
                # Baseline: the round trip of grpc's health check on the same channel, which does
                # no work, interleaved with the measured calls.
                health: Any = health_pb2_grpc.HealthStub(channel)  # methods set per instance
                prompt_ms: list[float] = []
                health_ms: list[float] = []
                for _ in range(5):
                    for request in prompt_requests:
                        begin = time.perf_counter()
                        memory.context.GetPromptContext(request)
                        middle = time.perf_counter()
                        health.Check(health_pb2.HealthCheckRequest())
                        prompt_ms.append((middle - begin) * 1000)
                        health_ms.append((time.perf_counter() - middle) * 1000)
                owner_data = [{"agent_id": o.agent_id, "owner_id": o.owner_id} for o in owners]
                ghz_prompt = ghz_latency(
                    server.address,
                    "memoryd.v2.ContextService.GetPromptContext",
                    owner_data,
                    args.calls,
                )
                ghz_health = ghz_latency(
                    server.address, "grpc.health.v1.Health.Check", [{}], args.calls
                )
        finally:
            code = server.stop()
        events = server.events("rpc")[mark:]
        database_mb = places.size_mb(home)
    if code != 0:
        sys.exit(f"memoryd exited with {code}")
    inside = [e["duration_ms"] for e in events if e["method"].endswith("/Recall")]
    prompt_inside = [e["duration_ms"] for e in events if e["method"].endswith("/GetPromptContext")]
    result = {
        "benchmark": "recall_latency",
        "backend": args.backend,
        "messages": args.messages,
        "memories": args.memories,
        "queries": len(planned),
        "corpus": "generated" if chat is None else "LoCoMo's, every message and row embedded",
        "build_seconds": round(build_seconds, 1),
        **embedded,
        "database_mb": round(database_mb, 1),
        "recall_client_ms": {
            key: {
                "p50": round(percentile(v, 0.5), 2),
                "p99": round(percentile(v, 0.99), 2),
                "n": len(v),
            }
            for key, v in sorted(client.items())
        },
        "recall_server_ms": {
            "p50": round(percentile(inside, 0.5), 2),
            "p99": round(percentile(inside, 0.99), 2),
        },
        "prompt_context_client_ms": {
            "p50": round(percentile(prompt_ms, 0.5), 3),
            "p99": round(percentile(prompt_ms, 0.99), 3),
        },
        "health_check_client_ms": {
            "p50": round(percentile(health_ms, 0.5), 3),
            "p99": round(percentile(health_ms, 0.99), 3),
        },
        "prompt_context_ghz_ms": {k: round(v, 3) for k, v in ghz_prompt.items()},
        "health_check_ghz_ms": {k: round(v, 3) for k, v in ghz_health.items()},
        "prompt_context_server_ms": {
            "p50": round(percentile(prompt_inside, 0.5), 3),
            "p99": round(percentile(prompt_inside, 0.99), 3),
        },
        "targets_ms": {"recall_p50": 5, "recall_p99": 30, "prompt_context_p50": 1},
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
