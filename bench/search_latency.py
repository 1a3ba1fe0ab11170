"""(b) SearchHistory latency by words over 100,000 messages of real chat text.

    python bench/search_latency.py --locomo PATH/TO/locomo10.json [--messages 100000]
        [--queries 2000] [--backend postgres]

LoCoMo's turns, in order and repeated to size (bench/real_chat.py), are loaded through the real
server with AppendMessages, 100 a call, into 600 conversations of 60 owners and two agents.
Queries are what agents ask and users type: LoCoMo's questions as typed (half of them), one word
of a turn, two words of one turn, a part of a word (the substring path), or non-English text;
scoped to a conversation (60%), an owner (30%) or an agent (10%). They run one at a time through
the generated client, in lexical mode (the words' own figures: bench/hybrid_latency.py measures
meaning and both); latency is measured at the client (the full round trip) and, from the
server's own RPC log lines, inside the server.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import backends
import grpc
import real_chat

import memoryd_client as md
from memoryd.testing.server_process import ServerProcess

AGENTS = ("main", "helper")
OWNERS = 60
CONVERSATIONS = 600
PER_CALL = 100


def percentile(values: list[float], fraction: float) -> float:
    """The value below which `fraction` of `values` fall (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def conversations(rng: random.Random) -> list[md.Conversation]:
    """The corpus's conversations: most of agent main, a tenth of agent helper."""
    found = []
    for index in range(CONVERSATIONS):
        agent = AGENTS[1] if index % 10 == 9 else AGENTS[0]
        owner = f"owner-{rng.randrange(OWNERS)}"
        channel = rng.choice(("telegram", "slack", "discord"))
        found.append(
            md.Conversation(agent_id=agent, owner_id=owner, channel=channel, chat_id=f"c{index}")
        )
    return found


def load(
    memory: md.SyncStubs, chat_text: real_chat.Corpus, total: int, rng: random.Random
) -> list[md.Conversation]:
    """Append `total` turns, 100 a call, each call into a conversation drawn at random."""
    chats = conversations(rng)
    turns = list(chat_text.texts(total))
    for start in range(0, total, real_chat.PER_CALL):
        memory.conversations.AppendMessages(
            md.AppendMessagesRequest(
                conversation=rng.choice(chats),
                messages=[
                    md.NewMessage(
                        role=rng.choice((md.ROLE_USER, md.ROLE_ASSISTANT)),
                        sender=sender,
                        content=text,
                    )
                    for sender, text in turns[start : start + real_chat.PER_CALL]
                ],
            )
        )
    return chats


WORD = re.compile(r"[^\W\d_]{4,}")


def queries(
    rng: random.Random, chats: list[md.Conversation], chat_text: real_chat.Corpus, count: int
) -> list[tuple[str, str, md.SearchHistoryRequest]]:
    """(kind, scope, request) triples."""
    made = []
    for _ in range(count):
        roll = rng.random()
        words = WORD.findall(rng.choice(chat_text.turns)[1]) or ["coffee"]
        if roll < 0.5:
            kind, query = "question", real_chat.asked(rng.choice(chat_text.questions))
        elif roll < 0.7:
            kind, query = "one word", rng.choice(words)
        elif roll < 0.85 and len(words) >= 2:
            kind, query = "two words", " ".join(rng.sample(words, 2))
        elif roll < 0.97:
            word = rng.choice([w for w in words if len(w) >= 6] or words)
            kind, query = "partial word", word[: max(3, len(word) - 2)]
        else:
            kind, query = "non-English", rng.choice(("東京", "会議", "😀", "привет", "café"))
        chat = rng.choice(chats)
        scope_roll = rng.random()
        if scope_roll < 0.6:
            scope, request = "conversation", md.SearchHistoryRequest(query=query, conversation=chat)
        elif scope_roll < 0.9:
            scope = "owner"
            request = md.SearchHistoryRequest(
                query=query, owner=md.OwnerScope(agent_id=chat.agent_id, owner_id=chat.owner_id)
            )
        else:
            scope, request = (
                "agent",
                md.SearchHistoryRequest(query=query, agent=md.AgentScope(agent_id=chat.agent_id)),
            )
        made.append((kind, scope, request))
    return made


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, required=True, help="LoCoMo's locomo10.json")
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument(
        "--embeddings",
        default="off",
        choices=("off", "embedded"),
        help="off (default): the words alone, as before semantic search, with no background "
        "embedding competing for the cores; embedded: the default server, embedding meanwhile",
    )
    parser.add_argument("--backend", default="sqlite", choices=backends.CHOICES)
    args = parser.parse_args()
    rng = random.Random(2026)
    chat_text = real_chat.Corpus.read(args.locomo)

    with (
        tempfile.TemporaryDirectory() as scratch,
        backends.started([args.backend], Path(scratch)) as places,
    ):
        home = Path(scratch) / "home"
        server = ServerProcess(
            home,
            env={"MEMORYD_SEARCH_EMBEDDINGS": args.embeddings, **places.env(args.backend, home)},
        ).start()
        try:
            with grpc.insecure_channel(server.address) as channel:
                memory = md.SyncStubs(channel)
                started = time.perf_counter()
                chats = load(memory, chat_text, args.messages, rng)
                load_seconds = time.perf_counter() - started
                places.settle(home)
                planned = queries(rng, chats, chat_text, args.queries)
                for _, _, request in planned:  # lexical: the figures stay the words' own
                    request.mode = md.SEARCH_MODE_LEXICAL
                for _, _, request in planned[:200]:  # warm-up: page cache, statement caches
                    memory.conversations.SearchHistory(request)
                mark = len(server.events("rpc"))
                client: dict[str, list[float]] = defaultdict(list)
                hits: list[int] = []
                for kind, scope, request in planned:
                    begin = time.perf_counter()
                    response = memory.conversations.SearchHistory(request)
                    elapsed = (time.perf_counter() - begin) * 1000
                    for key in ("all", f"kind: {kind}", f"scope: {scope}"):
                        client[key].append(elapsed)
                    hits.append(len(response.hits))
        finally:
            code = server.stop()
        inside = [
            line["duration_ms"]
            for line in server.events("rpc")[mark:]
            if line["method"].endswith("/SearchHistory")
        ]
        database_mb = places.size_mb(home)
    if code != 0:
        sys.exit(f"memoryd exited with {code}")

    result = {
        "benchmark": "search_latency",
        "backend": args.backend,
        "messages": args.messages,
        "queries": len(planned),
        "load_messages_per_second": round(args.messages / load_seconds),
        "database_mb": round(database_mb, 1),
        "mean_hits": round(statistics.mean(hits), 2),
        "client_ms": {
            key: {
                "p50": round(percentile(v, 0.5), 2),
                "p99": round(percentile(v, 0.99), 2),
                "n": len(v),
            }
            for key, v in sorted(client.items())
        },
        "server_ms": {
            "p50": round(percentile(inside, 0.5), 2),
            "p99": round(percentile(inside, 0.99), 2),
        },
        "targets_ms": {"p50": 5, "p99": 25},
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
