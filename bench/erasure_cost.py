"""(j) What verified erasure costs: PurgeOwner and PurgeConversation on a loaded database.

    python bench/erasure_cost.py [--messages 100000] [--owners 100]

A real server; `--messages` corpus messages spread over `--owners` owners (two conversations
each) are imported with IngestMessages. Then, one at a time: PurgeConversation of one
conversation, and PurgeOwner of one owner, each timed at the client (the word indexes are
rewritten and the WAL truncated inside). The baseline, in the same run: AppendMessages of one
message. Erasure is rare and explicit; its cost grows with the size of the indexes it rewrites.
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

import corpus
from ingest_throughput import peak_rss_mb

import memoryd_client as md
from memoryd.testing.server_process import ServerProcess


def conversation(owner: int, chat: int) -> md.Conversation:
    return md.Conversation(owner_id=f"owner-{owner}", channel="bench", chat_id=f"chat-{chat}")


async def run(address: str, messages: int, owners: int) -> dict[str, float]:
    rng = random.Random(2032)
    words = corpus.vocabulary()

    async def batches() -> AsyncIterator[md.IngestMessagesRequest]:
        for start in range(0, messages, 1000):
            yield md.IngestMessagesRequest(
                messages=[
                    md.IngestedMessage(
                        conversation=conversation(n % owners, n % (2 * owners)),
                        message=md.user("ada", corpus.message_text(rng, words)),
                    )
                    for n in range(start, min(start + 1000, messages))
                ]
            )

    async with md.connect(address, timeout=600) as channel:
        memory = md.Stubs(channel)
        await memory.conversations.IngestMessages(batches())
        began = time.perf_counter()
        await memory.conversations.AppendMessages(
            md.AppendMessagesRequest(
                conversation=conversation(0, 0), messages=[md.user("ada", "one more")]
            )
        )
        append_ms = (time.perf_counter() - began) * 1000
        began = time.perf_counter()
        await memory.conversations.PurgeConversation(
            md.PurgeConversationRequest(conversation=conversation(1, 1))
        )
        conversation_ms = (time.perf_counter() - began) * 1000
        began = time.perf_counter()
        receipt = await memory.admin.PurgeOwner(md.PurgeOwnerRequest(owner_id="owner-2"))
        owner_ms = (time.perf_counter() - began) * 1000
    erased = sum(item.rows for item in receipt.erased if item.table == "messages")
    return {
        "append_ms": round(append_ms, 1),
        "purge_conversation_ms": round(conversation_ms, 1),
        "purge_owner_ms": round(owner_ms, 1),
        "purge_owner_messages": erased,
        "wal_truncated": receipt.wal_truncated,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--owners", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        server = ServerProcess(Path(scratch) / "home").start()
        try:
            figures = asyncio.run(run(server.address, args.messages, args.owners))
            rss = peak_rss_mb(server.process.pid)
        finally:
            server.stop()
    result = {
        "benchmark": "erasure_cost",
        "messages": args.messages,
        "owners": args.owners,
        **figures,
        "server_peak_rss_mb": round(rss, 1),
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
