"""SearchHistory latency by mode (lexical, semantic, hybrid) over one large conversation or agent.

    python bench/hybrid_latency.py [--messages 100000] [--scope conversation|agent]
                                   [--queries 1000] [--baseline]

The corpus (bench/corpus.py) is appended through the real server with embeddings off, so that
loading is quick; the server is stopped and every message gets a vector written straight into
the database, under the embedded model's row (random unit vectors, int8 as memoryd stores them:
their values do not change the cost of a search, only what it finds). The server then starts with
the embedded model, which finds every message embedded; each query is embedded by the real
model, so the figures include that. Queries are what users type (one or two words of the
corpus, a partial word) and what agents ask (a sentence), one at a time, at the client. Each
mode gets queries of its own, so that no query's vector is remembered from another mode.

An agent scope of 1,000,000 messages holds more vectors than the default vector cache: its
semantic search is refused, and hybrid search is by words. To compare with the release before
semantic search (--baseline), run the script with that release's server first on PYTHONPATH.
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

import apsw
import corpus
import grpc
import numpy as np

import memoryd_client as md
from memoryd.testing.server_process import ServerProcess

PER_CALL = 100
MODES = {
    "lexical": md.SEARCH_MODE_LEXICAL,
    "semantic": md.SEARCH_MODE_SEMANTIC,
    "hybrid": md.SEARCH_MODE_HYBRID,
}


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def load(address: str, total: int, scope: str, rng: random.Random) -> list[str]:
    """Append `total` messages (one conversation, or 1,000 of one agent); returns the texts."""
    words = corpus.vocabulary()
    texts: list[str] = []
    with grpc.insecure_channel(address) as channel:
        memory = md.MemoryServiceStub(channel)
        for start in range(0, total, PER_CALL):
            chat = "big" if scope == "conversation" else f"c{rng.randrange(1000)}"
            batch = [corpus.message_text(rng, words) for _ in range(min(PER_CALL, total - start))]
            texts.extend(batch)
            memory.AppendMessages(
                md.AppendMessagesRequest(
                    conversation=md.Conversation(agent_id="bench", channel="t", chat_id=chat),
                    messages=[
                        md.NewMessage(role=md.ROLE_USER, sender="x", content=text) for text in batch
                    ],
                )
            )
    return texts


def write_vectors(database: Path, rng: np.random.Generator) -> float:
    """A vector for every message under the embedded model's row; returns the seconds."""
    import memoryd_model_bge_small as embedded  # noqa: PLC0415 - not with --baseline

    from memoryd.domain.vectors import quantise, to_blob  # noqa: PLC0415

    started = time.perf_counter()
    connection = apsw.Connection(str(database))
    with connection:
        (last,) = connection.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()
        connection.execute(
            "INSERT INTO embedding_models (provider, model, dimension, message_cursor, created_at) "
            "VALUES ('embedded', ?, ?, ?, '2026-01-01T00:00:00.000000Z')",
            (embedded.NAME, embedded.DIMENSION, last),
        )
        (model_id,) = connection.execute("SELECT id FROM embedding_models").fetchone()
        ids = [row[0] for row in connection.execute("SELECT id FROM messages ORDER BY id")]
        for start in range(0, len(ids), 10_000):
            chunk = ids[start : start + 10_000]
            vectors = rng.standard_normal((len(chunk), embedded.DIMENSION)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            stored = quantise(vectors)
            connection.executemany(
                "INSERT INTO message_vectors (message_id, model_id, scale, vector) "
                "VALUES (?, ?, ?, ?)",
                [
                    (
                        message_id,
                        model_id,
                        float(stored.scales[row]),
                        to_blob(stored.components[row]),
                    )
                    for row, message_id in enumerate(chunk)
                ],
            )
    connection.close()
    return time.perf_counter() - started


def queries(rng: random.Random, texts: list[str], count: int) -> list[tuple[str, str]]:
    """(kind, text) pairs."""
    content = set(corpus.vocabulary().content_words())
    made = []
    for _ in range(count):
        text = rng.choice(texts)
        words = [w.strip(".?!").lower() for w in text.split() if w.strip(".?!").lower() in content]
        roll = rng.random()
        if roll < 0.4 and words:
            made.append(("one word", rng.choice(words)))
        elif roll < 0.6 and len(words) >= 2:
            made.append(("two words", " ".join(rng.sample(words, 2))))
        elif roll < 0.7 and words:
            word = rng.choice(words)
            made.append(("partial word", word[: max(3, len(word) - 2)]))
        else:
            made.append(
                ("sentence", f"what did we say about the {' and '.join(words[:2]) or text}?")
            )
    return made


def measure(
    memory: md.MemoryServiceStub,
    modes: dict[str, int],
    planned: dict[str, list[tuple[str, str]]],
    warm_up: list[tuple[str, str]],
    scope: dict[str, object],
) -> dict[str, object]:
    """p50, p99 and mean by mode and kind of query; a mode the server refuses for this scope
    (semantic search of a scope too large for the vector cache) is reported as refused."""
    found: dict[str, object] = {}
    for name, mode in modes.items():
        try:
            for _, text in warm_up:  # page cache, statement caches
                memory.SearchHistory(md.SearchHistoryRequest(query=text, mode=mode, **scope))
        except grpc.RpcError as error:
            if error.code() is not grpc.StatusCode.FAILED_PRECONDITION:
                raise
            found[name] = {"refused": error.details()}
            continue
        timings: dict[str, list[float]] = {"all": []}
        for kind, text in planned[name]:
            began = time.perf_counter()
            memory.SearchHistory(md.SearchHistoryRequest(query=text, mode=mode, **scope))
            elapsed = (time.perf_counter() - began) * 1000
            timings["all"].append(elapsed)
            timings.setdefault(kind, []).append(elapsed)
        found[name] = {
            key: {
                "p50": round(percentile(values, 0.5), 2),
                "p99": round(percentile(values, 0.99), 2),
                "mean": round(statistics.mean(values), 2),
            }
            for key, values in timings.items()
        }
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--scope", choices=("conversation", "agent"), default="conversation")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument(
        "--baseline",
        action="store_true",
        help="the memoryd on PYTHONPATH predates semantic search: no vectors, no search "
        "settings, and the default mode only (the same queries as the hybrid ones)",
    )
    args = parser.parse_args()
    rng = random.Random(2026)
    words_only = '[memoryd.search]\nembeddings = "off"\n'
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch) / "home"
        loader = ServerProcess(home, config="" if args.baseline else words_only).start()
        try:
            began = time.perf_counter()
            texts = load(loader.address, args.messages, args.scope, rng)
            load_seconds = time.perf_counter() - began
        finally:
            loader.stop()
        vector_seconds = (
            0.0 if args.baseline else write_vectors(home / "memory.db", np.random.default_rng(7))
        )
        server = ServerProcess(home).start()
        request_scope: dict[str, object] = (
            {"conversation": md.Conversation(agent_id="bench", channel="t", chat_id="big")}
            if args.scope == "conversation"
            else {"agent": md.AgentScope(agent_id="bench")}
        )
        # Each mode asks queries of its own, none asked twice: the server remembers recent
        # query vectors, and a repeated query would not pay for its embedding.
        unique = list(dict.fromkeys(queries(rng, texts, 4 * args.queries * len(MODES))))
        if len(unique) < len(MODES) * args.queries + 50:
            sys.exit(f"only {len(unique)} distinct queries; ask for fewer")
        planned = {
            name: unique[place * args.queries : (place + 1) * args.queries]
            for place, name in enumerate(MODES)
        }
        # The baseline knows one mode; it gets the hybrid queries.
        modes = {"default": md.SEARCH_MODE_UNSPECIFIED} if args.baseline else MODES
        if args.baseline:
            planned["default"] = planned["hybrid"]
        result: dict[str, object] = {
            "benchmark": "hybrid_latency",
            "baseline": args.baseline,
            "messages": args.messages,
            "scope": args.scope,
            "queries_per_mode": args.queries,
            "load_messages_per_second": round(args.messages / load_seconds),
            "vector_write_seconds": round(vector_seconds, 1),
        }
        try:
            with grpc.insecure_channel(server.address) as channel:
                memory = md.MemoryServiceStub(channel)
                if not args.baseline:
                    status = memory.GetEmbeddingStatus(md.GetEmbeddingStatusRequest())
                    assert status.pending_messages == 0, status
                began = time.perf_counter()
                memory.SearchHistory(md.SearchHistoryRequest(query="warm up", **request_scope))
                result["first_search_ms"] = round((time.perf_counter() - began) * 1000, 1)
                result.update(measure(memory, modes, planned, unique[-50:], request_scope))
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
    result["targets_ms"] = {"hybrid conversation p50": 20, "hybrid conversation p99": 40}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
