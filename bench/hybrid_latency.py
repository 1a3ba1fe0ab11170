"""SearchHistory latency by mode (lexical, semantic, hybrid) over one large conversation or agent,
on real chat text with real vectors, asked real questions.

    python bench/hybrid_latency.py --locomo PATH/TO/locomo10.json [--messages 100000]
        [--scope conversation|agent] [--queries 600] [--cache DIR] [--backend postgres]

LoCoMo's turns, in order and repeated to size (bench/real_chat.py), are appended through the
real server with embeddings off, so that loading is quick; the server is stopped and every
message gets the vector the embedded model gives it, written straight into the database (each
distinct text embedded once, and kept in --cache for the next run). The server then starts as
configured by default, finds every message embedded, and is asked LoCoMo's questions as typed,
one at a time, at the client; each query is embedded by the real model, so the figures include
that. Each mode asks questions of its own (the server remembers recent query vectors: a repeated
question would not pay for its embedding).

Conversation scope: one conversation of --messages. Agent scope: conversations of 600 turns
each (LoCoMo's are 300 to 700) under one agent. An agent of 1,000,000 messages holds more vectors
than the default vector cache: its semantic search is refused, and hybrid search is by words.
Targets (2 cores, 100,000 messages in one conversation): words p50 <= 10 ms; hybrid p50 <= 20 ms
and p99 <= 40 ms; an agent of 1,000,000: hybrid p50 <= 40 ms.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import backends
import grpc
import real_chat

import memoryd_client as md
from memoryd.testing.server_process import ServerProcess

MODES = {
    "lexical": md.SEARCH_MODE_LEXICAL,
    "semantic": md.SEARCH_MODE_SEMANTIC,
    "hybrid": md.SEARCH_MODE_HYBRID,
}
AGENT = "bench"
# Turns a conversation of the agent scope holds.
AGENT_CONVERSATION = 600
DEFAULT_CACHE = Path.home() / ".cache" / "memoryd-bench" / "locomo-vectors.npz"


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def load(address: str, corpus: real_chat.Corpus, total: int, scope: str) -> float:
    """Append `total` turns (one conversation, or AGENT_CONVERSATION-turn conversations of one
    agent); returns the seconds it took."""
    began = time.perf_counter()
    with grpc.insecure_channel(address) as channel:
        memory = md.SyncStubs(channel)
        turns = list(corpus.texts(total))
        for start in range(0, total, real_chat.PER_CALL):
            chat = "big" if scope == "conversation" else f"c{start // AGENT_CONVERSATION}"
            memory.conversations.AppendMessages(
                md.AppendMessagesRequest(
                    conversation=md.Conversation(agent_id=AGENT, channel="t", chat_id=chat),
                    messages=[
                        md.NewMessage(role=md.ROLE_USER, sender=sender, content=text)
                        for sender, text in turns[start : start + real_chat.PER_CALL]
                    ],
                )
            )
    return time.perf_counter() - began


def measure(
    memory: md.SyncStubs,
    planned: dict[str, list[str]],
    warm_up: list[str],
    scope: dict[str, Any],
) -> dict[str, object]:
    """p50, p99 and mean by mode, and the mean hits; a mode the server refuses for this scope
    (semantic search of a scope too large for the vector cache) is reported as refused."""
    found: dict[str, object] = {}
    for name, questions in planned.items():
        mode = MODES[name]
        try:
            for text in warm_up:  # page cache, statement caches
                memory.conversations.SearchHistory(
                    md.SearchHistoryRequest(query=text, mode=mode, **scope)
                )
        except grpc.RpcError as error:
            if error.code() is not grpc.StatusCode.FAILED_PRECONDITION:
                raise
            found[name] = {"refused": error.details()}
            continue
        timings: list[float] = []
        hits: list[int] = []
        for text in questions:
            began = time.perf_counter()
            answer = memory.conversations.SearchHistory(
                md.SearchHistoryRequest(query=text, mode=mode, **scope)
            )
            timings.append((time.perf_counter() - began) * 1000)
            hits.append(len(answer.hits))
        found[name] = {
            "p50": round(percentile(timings, 0.5), 2),
            "p99": round(percentile(timings, 0.99), 2),
            "mean": round(statistics.mean(timings), 2),
            "mean_hits": round(statistics.mean(hits), 1),
        }
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, required=True, help="LoCoMo's locomo10.json")
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--scope", choices=("conversation", "agent"), default="conversation")
    parser.add_argument("--queries", type=int, default=600, help="questions asked in each mode")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="the vectors' cache")
    parser.add_argument("--backend", default="sqlite", choices=backends.CHOICES)
    parser.add_argument(
        "--home",
        type=Path,
        help="keep the loaded data directory here (SQLite), and ask at once when it is loaded",
    )
    args = parser.parse_args()
    if args.home is not None and args.backend != "sqlite":
        sys.exit("--home keeps a SQLite data directory: use it with --backend sqlite")
    corpus = real_chat.Corpus.read(args.locomo)
    questions = list(corpus.questions)
    random.Random(2026).shuffle(questions)
    if len(questions) < len(MODES) * args.queries:
        sys.exit(f"LoCoMo has {len(questions)} distinct questions; ask for fewer")
    planned = {
        name: [
            real_chat.asked(text)
            for text in questions[place * args.queries : (place + 1) * args.queries]
        ]
        for place, name in enumerate(MODES)
    }
    # Questions none of the timed ones repeats (as many as are left, up to 20).
    warm_up = [real_chat.asked(text) for text in questions[len(MODES) * args.queries :][-20:]]
    words_only = '[memoryd.search]\nembeddings = "off"\n'
    with (
        tempfile.TemporaryDirectory() as scratch,
        backends.started([args.backend], Path(scratch)) as places,
    ):
        home = args.home or Path(scratch) / "home"
        env = places.env(args.backend, home)
        loaded = home / "hybrid-latency-loaded"
        load_seconds, vectors = 0.0, {}
        if not loaded.exists():
            loader = ServerProcess(home, config=words_only, env=env).start()
            try:
                load_seconds = load(loader.address, corpus, args.messages, args.scope)
            finally:
                loader.stop()
            with places.migrated(args.backend, home) as connection:
                vectors = real_chat.embed_stored(connection, args.cache)
            if args.home is not None:
                loaded.touch()
        server = ServerProcess(home, env=env).start()
        request_scope: dict[str, Any] = (
            {"conversation": md.Conversation(agent_id=AGENT, channel="t", chat_id="big")}
            if args.scope == "conversation"
            else {"agent": md.AgentScope(agent_id=AGENT)}
        )
        result: dict[str, object] = {
            "benchmark": "hybrid_latency",
            "backend": args.backend,
            "messages": args.messages,
            "scope": args.scope,
            "queries_per_mode": args.queries,
            "load_messages_per_second": round(args.messages / load_seconds)
            if load_seconds
            else None,
            **vectors,
        }
        try:
            with grpc.insecure_channel(server.address) as channel:
                memory = md.SyncStubs(channel)
                status = memory.admin.GetEmbeddingStatus(md.GetEmbeddingStatusRequest())
                if status.pending_messages:
                    sys.exit(f"{status.pending_messages} messages have no vector")
                began = time.perf_counter()
                memory.conversations.SearchHistory(
                    md.SearchHistoryRequest(query="warm up", **request_scope)
                )
                result["first_search_ms"] = round((time.perf_counter() - began) * 1000, 1)
                result.update(measure(memory, planned, warm_up, request_scope))
            status_text = Path(f"/proc/{server.process.pid}/status").read_text(encoding="utf-8")
            result["server_rss_mb"] = {
                line.split(":")[0]: round(int(line.split()[1]) / 1024, 1)
                for line in status_text.splitlines()
                if line.startswith(("VmRSS", "VmHWM"))
            }
        finally:
            code = server.stop()
    if code != 0:
        sys.exit(f"memoryd exited with {code}")
    result["targets_ms"] = (
        {"lexical p50": 10, "hybrid p50": 20, "hybrid p99": 40}
        if args.scope == "conversation"
        else {"hybrid p50 (1,000,000 messages)": 40}
    )
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
