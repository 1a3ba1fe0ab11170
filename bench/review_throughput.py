"""(d) Background review throughput, and memoryd's own time per review.

    python bench/review_throughput.py [--conversations 1000] [--concurrency 4]

1,000 conversations each commit one turn (CommitTurn) while background review is off. The server
is then restarted with review on, so every conversation is due at once, against the shipped fake
model server answering instantly with one `add` operation (so each review writes a row and
renders USER.md). Measured: reviews completed per second until the last one, and from the
server's own log lines, its time per review (prompt build + apply transaction + render),
without the model's time.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from search_latency import percentile

import memoryd_client as md
from memoryd.testing.configs import review_config
from memoryd.testing.fake_model import FakeModel, Reply
from memoryd.testing.server_process import ServerProcess


def answer(request: dict[str, Any]) -> Reply:
    """An instant answer with one add, different for every conversation."""
    text = request["messages"][-1]["content"]
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    operation = {
        "action": "add",
        "target": "user",
        "category": "preference",
        "value": f"Prefers option {digest}",
    }
    return Reply(content=json.dumps({"operations": [operation]}))


async def commit_turns(address: str, count: int) -> None:
    async with md.connect(address) as channel:
        memory = md.Stubs(channel)
        semaphore = asyncio.Semaphore(32)

        async def one(index: int) -> None:
            async with semaphore:
                await memory.conversations.CommitTurn(
                    md.CommitTurnRequest(
                        conversation=md.Conversation(
                            owner_id=f"owner-{index}", channel="telegram", chat_id=f"c{index}"
                        ),
                        messages=[
                            md.NewMessage(
                                role=md.ROLE_USER,
                                sender="ada",
                                content=f"I like option number {index} best, and tea.",
                            )
                        ],
                    )
                )

        await asyncio.gather(*(one(index) for index in range(count)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch, FakeModel(responder=answer) as model:
        home = Path(scratch) / "home"
        loader = ServerProcess(home, config=review_config(model, review_interval_hours=0)).start()
        try:
            asyncio.run(commit_turns(loader.address, args.conversations))
        finally:
            loader.stop()
        config = review_config(
            model, review_concurrency=args.concurrency, scheduler_tick_seconds=0.05
        )
        started = time.perf_counter()
        server = ServerProcess(home, config=config).start()
        try:
            deadline = time.monotonic() + 600
            while len(server.events("review")) < args.conversations:
                if time.monotonic() > deadline:
                    sys.exit("reviews did not finish in 10 minutes")
                time.sleep(0.05)
            elapsed = time.perf_counter() - started
        finally:
            code = server.stop()
        reviews = server.events("review")
    if code != 0:
        sys.exit(f"memoryd exited with {code}")
    own = [event["own_ms"] for event in reviews]
    stamps = sorted(dt.datetime.fromisoformat(event["ts"]) for event in reviews)
    span = (stamps[-1] - stamps[0]).total_seconds()
    statuses = {event["status"] for event in reviews}
    result = {
        "benchmark": "review_throughput",
        "conversations": args.conversations,
        "concurrency": args.concurrency,
        "statuses": sorted(statuses),
        "rows_added": sum(event["added"] for event in reviews),
        # From the first review's log line to the last one's; and from the server's start.
        "reviews_per_second": round((len(reviews) - 1) / span, 1),
        "reviews_per_second_including_start": round(len(reviews) / elapsed, 1),
        "own_ms": {"p50": round(percentile(own, 0.5), 2), "p99": round(percentile(own, 0.99), 2)},
        "model_requests": len(model.requests),
        "target_own_ms_p50": 10,
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
