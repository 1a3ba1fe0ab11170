"""(f) IngestMessages messages/s against the raw batched-insert rate into the same schema.

    python bench/ingest_throughput.py [--messages 100000] [--batch 1000] [--streams 2]
                                      [--backend postgres] [--embeddings on|off]

The ceiling: a freshly migrated database (the schema keeps both full-text indexes), the
conversations created, then the messages inserted straight through the driver (APSW, or
psycopg), one set-based INSERT (a JSON array read as rows) per transaction of `--batch` rows,
their tokens counted as memoryd counts them: what the database itself does with this schema on this
machine, nothing else.
memoryd: a real server, the same messages (bench/corpus.py's vocabulary, 3-40 words, in 200
conversations) sent with IngestMessages in batches of `--batch` by `--streams` concurrent
streams, from the generated Python client. Reported: messages/s of both, their ratio, and the
server's peak RSS. Target: at least 0.75 of the raw rate.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import backends
import corpus
import server_config

import memoryd_client as md
from memoryd.domain.conversation import conversation_key, search_scope_tokens
from memoryd.domain.tokens import count_tokens
from memoryd.storage.engine import engine_of
from memoryd.storage.sql import write_transaction
from memoryd.storage.transaction import Transaction
from memoryd.testing.server_process import ServerProcess

CONVERSATIONS = 200
STAMP = "2026-11-30T00:00:00.000000Z"


def messages(count: int, rng: random.Random) -> list[tuple[str, str]]:
    """(chat_id, content) of the messages to store."""
    words = corpus.vocabulary()
    return [
        (f"chat-{rng.randrange(CONVERSATIONS)}", corpus.message_text(rng, words))
        for _ in range(count)
    ]


def raw_rate(connection: Transaction, items: list[tuple[str, str]], batch: int) -> float:
    """Messages/s into a migrated database straight through its driver, `batch` rows a
    transaction."""
    with write_transaction(connection):
        for n in range(CONVERSATIONS):
            key = conversation_key(
                agent_id="main", owner_id="", channel="bench", chat_id=f"chat-{n}", thread_scope=""
            )
            connection.execute(
                "INSERT INTO conversations (agent_id, owner_id, channel, chat_id, thread_scope, "
                "search_scope, history_version, created_at) VALUES (?, ?, ?, ?, ?, ?, 1, ?)",
                (*key.as_row(), search_scope_tokens(key), STAMP),
            )
    began = time.perf_counter()
    for start in range(0, len(items), batch):
        rows = [
            [chat, text, STAMP, count_tokens(text)] for chat, text in items[start : start + batch]
        ]
        with write_transaction(connection):
            # One set-based statement per batch (a JSON array read as rows), the fastest way
            # into this schema.
            connection.execute(
                "INSERT INTO messages (agent_id, owner_id, channel, chat_id, thread_scope, sender, "
                "role, kind, content, metadata_json, trust, created_at, token_count) "
                "SELECT 'main', 'default', 'bench', j.value ->> 0, 'root', 'ada', 'user', "
                "'chat_message', j.value ->> 1, '{}', 'operator', j.value ->> 2, "
                "CAST(j.value ->> 3 AS BIGINT) "
                f"FROM {engine_of(connection).json_rows('?', 'j')} ORDER BY j.key",
                (json.dumps(rows, ensure_ascii=False),),
            )
    return len(items) / (time.perf_counter() - began)


async def ingest_rate(
    address: str, items: list[tuple[str, str]], batch: int, streams: int
) -> tuple[float, int]:
    """Messages/s of IngestMessages over `streams` concurrent streams; and the stored count."""

    def requests(part: list[tuple[str, str]]) -> list[md.IngestMessagesRequest]:
        return [
            md.IngestMessagesRequest(
                messages=[
                    md.IngestedMessage(
                        conversation=md.Conversation(channel="bench", chat_id=chat),
                        message=md.NewMessage(role=md.ROLE_USER, sender="ada", content=text),
                    )
                    for chat, text in part[start : start + batch]
                ]
            )
            for start in range(0, len(part), batch)
        ]

    async def send(
        batches: list[md.IngestMessagesRequest],
    ) -> AsyncIterator[md.IngestMessagesRequest]:
        for request in batches:
            yield request

    share = -(-len(items) // streams)
    # Built before the clock starts: the client's own protobuf construction is not the server's
    # work (on a two-core machine it would take CPU from the server being measured).
    prepared = [requests(items[n : n + share]) for n in range(0, len(items), share)]
    async with md.connect(address) as channel:
        memory = md.Stubs(channel)
        began = time.perf_counter()
        reports = await asyncio.gather(
            *(memory.conversations.IngestMessages(send(p)) for p in prepared)
        )
        spent = time.perf_counter() - began
    return len(items) / spent, sum(report.stored for report in reports)


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set size (Linux /proc), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--streams", type=int, default=2)
    parser.add_argument("--backend", default="sqlite", choices=backends.CHOICES)
    server_config.add_embeddings_option(parser)
    args = parser.parse_args()
    items = messages(args.messages, random.Random(2029))
    with (
        tempfile.TemporaryDirectory() as scratch,
        backends.started([args.backend], Path(scratch)) as places,
    ):
        folder = Path(scratch)
        with places.migrated(args.backend, folder / "raw") as connection:
            raw = raw_rate(connection, items, args.batch)
        home = folder / "home"
        config = server_config.embeddings(args.embeddings)
        server = ServerProcess(home, config=config, env=places.env(args.backend, home)).start()
        try:
            ingested, stored = asyncio.run(
                ingest_rate(server.address, items, args.batch, args.streams)
            )
            rss = peak_rss_mb(server.process.pid)
        finally:
            server.stop()
    result = {
        "benchmark": "ingest_throughput",
        "backend": args.backend,
        "messages": args.messages,
        "batch": args.batch,
        "streams": args.streams,
        "embeddings": args.embeddings,
        "raw_messages_per_second": round(raw),
        "ingest_messages_per_second": round(ingested),
        "ratio": round(ingested / raw, 3),
        "stored": stored,
        "server_peak_rss_mb": round(rss, 1),
        "target_ratio": 0.75,
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
