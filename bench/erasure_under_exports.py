"""(k) A purge while exports stall: how long the purge takes, and what it does to other appends.

    python bench/erasure_under_exports.py [--messages 20000] [--exports 2]

A real server; `--messages` messages of about 1 KB (half of one owner, half of another) are
imported, then `--exports` ExportData streams are opened and never read past their first chunk,
so their snapshot holds the WAL. While an appender of another agent appends one message at a
time, PurgeOwner erases the first owner. Reported: the purge's time at the client, and the
appends' latency during the purge (median and max) and after it. The red team's run of the
earlier memoryd: a purge of about 30 s, appends of 5 to 15 s. Run it with another checkout's
Python to measure that one side by side (it uses only calls both have).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import memoryd_client as md
from memoryd.testing.server_process import ServerProcess

BATCH = 1000


async def run(address: str, messages: int, exports: int) -> dict[str, object]:
    filler = "x" * 900

    async def batches(owner: str) -> AsyncIterator[md.IngestMessagesRequest]:
        chat = md.Conversation(owner_id=owner, channel="bench", chat_id="c")
        for start in range(0, messages // 2, BATCH):
            yield md.IngestMessagesRequest(
                messages=[
                    md.IngestedMessage(
                        conversation=chat, message=md.user(owner, f"{owner} {start + n} {filler}")
                    )
                    for n in range(BATCH)
                ]
            )

    async with md.connect(address, timeout=600) as channel:
        memory = md.Stubs(channel)
        for owner in ("victim", "keeper"):
            await memory.conversations.IngestMessages(batches(owner))
        streams = [memory.admin.ExportData(md.ExportDataRequest()) for _ in range(exports)]
        for stream in streams:
            await stream.read()
        other = md.Conversation(agent_id="bystander", channel="bench", chat_id="b")
        during: list[float] = []
        after: list[float] = []
        purging = True

        async def append() -> None:
            while purging or len(after) < 20:
                began = time.perf_counter()
                await memory.conversations.AppendMessages(
                    md.AppendMessagesRequest(conversation=other, messages=[md.user("bo", "hi")])
                )
                (during if purging else after).append((time.perf_counter() - began) * 1000)
                await asyncio.sleep(0.01)

        appender = asyncio.create_task(append())
        began = time.perf_counter()
        receipt = await memory.admin.PurgeOwner(
            md.PurgeOwnerRequest(owner_id="victim"), timeout=600
        )
        purge_ms = (time.perf_counter() - began) * 1000
        purging = False
        await appender
        for stream in streams:
            stream.cancel()
    return {
        "purge_owner_ms": round(purge_ms, 1),
        "wal_truncated": receipt.wal_truncated,
        "appends_during": len(during),
        "append_during_median_ms": round(statistics.median(during), 1) if during else None,
        "append_during_max_ms": round(max(during), 1) if during else None,
        "append_after_median_ms": round(statistics.median(after), 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--exports", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        server = ServerProcess(Path(scratch) / "home").start()
        try:
            result = asyncio.run(run(server.address, args.messages, args.exports))
        finally:
            server.stop()
    print(json.dumps({"benchmark": "erasure_under_exports", **result}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
