"""How soon a message appended at a chat's pace has its vector, and how fast a bulk load is
embedded: the embedded model, a real server.

    python bench/embedding_freshness.py [--conversations 4] [--rate 2] [--seconds 60]
                                        [--bulk 2000]

Steady state: `--conversations` chats each append one message (a corpus sentence, sender and
the message before it as in any chat) so that all together append `--rate` messages a second.
After each append the script asks GetEmbeddingStatus every 10 ms until nothing waits: the time
from the append's answer to that moment is the message's freshness (an upper bound: the queue
may have been empty before the ask). Bulk: `--bulk` messages in one AppendMessages, then the
time until nothing waits, as messages per second. Targets (issue 42): freshness p99 within 2 s;
bulk embedding twice the 48.5 messages/s measured before (on LoCoMo's turns, which are longer:
bench/retrieval_quality.py reports its own rate).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import corpus
import grpc
from search_latency import percentile

import memoryd_client as md
from memoryd.testing.server_process import ServerProcess

POLL_SECONDS = 0.01
# Messages a call appends in the bulk load (the server's default limit a call).
BATCH = 100


def waited(memory: md.MemoryServiceStub, timeout: float = 600.0) -> float:
    """Seconds until the embedding queue is empty."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        status = memory.GetEmbeddingStatus(md.GetEmbeddingStatusRequest())
        if status.pending_messages + status.pending_memories == 0:
            return time.perf_counter() - started
        time.sleep(POLL_SECONDS)
    sys.exit("the embedding queue did not drain in time")


def steady(memory: md.MemoryServiceStub, args: argparse.Namespace) -> dict[str, object]:
    """Freshness of messages appended one at a time at `args.rate` a second."""
    rng = random.Random(7)
    words = corpus.vocabulary()
    chats = [
        md.Conversation(agent_id="bench", owner_id=f"o{n}", channel="fresh", chat_id=f"c{n}")
        for n in range(args.conversations)
    ]
    interval = 1 / args.rate
    latencies: list[float] = []
    until = time.perf_counter() + args.seconds
    turn = 0
    while time.perf_counter() < until:
        began = time.perf_counter()
        chat = chats[turn % len(chats)]
        memory.AppendMessages(
            md.AppendMessagesRequest(
                conversation=chat,
                messages=[
                    md.NewMessage(
                        role=md.ROLE_USER if turn % 2 else md.ROLE_ASSISTANT,
                        sender="ada" if turn % 2 else "bot",
                        content=corpus.message_text(rng, words),
                    )
                ],
            )
        )
        latencies.append(waited(memory) * 1000)
        turn += 1
        time.sleep(max(0.0, interval - (time.perf_counter() - began)))
    return {
        "messages": len(latencies),
        "rate_asked": args.rate,
        "freshness_ms": {
            "p50": round(percentile(latencies, 0.5), 1),
            "p99": round(percentile(latencies, 0.99), 1),
            "max": round(max(latencies), 1),
        },
    }


def bulk(memory: md.MemoryServiceStub, count: int) -> dict[str, object]:
    """One AppendMessages of `count` messages, and the embedding rate after it."""
    rng = random.Random(11)
    words = corpus.vocabulary()
    chat = md.Conversation(agent_id="bench", owner_id="bulk", channel="fresh", chat_id="bulk")
    for start in range(0, count, BATCH):
        memory.AppendMessages(
            md.AppendMessagesRequest(
                conversation=chat,
                messages=[
                    md.NewMessage(
                        role=md.ROLE_USER, sender="ada", content=corpus.message_text(rng, words)
                    )
                    for _ in range(min(BATCH, count - start))
                ],
            )
        )
    seconds = waited(memory)
    return {
        "messages": count,
        "seconds": round(seconds, 1),
        "per_second": round(count / seconds, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=4)
    parser.add_argument("--rate", type=float, default=2.0, help="messages a second, all chats")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--bulk", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        server = ServerProcess(Path(scratch) / "home").start()
        try:
            with grpc.insecure_channel(server.address) as channel:
                memory = md.MemoryServiceStub(channel)
                found: dict[str, object] = {"benchmark": "embedding_freshness"}
                found["steady"] = steady(memory, args)
                found["bulk"] = bulk(memory, args.bulk)
        finally:
            code = server.stop()
    if code != 0:
        sys.exit(f"memoryd exited with {code}")
    print(json.dumps(found, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
