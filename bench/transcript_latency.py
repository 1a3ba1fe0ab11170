"""(g) StreamTranscript: 50 concurrent streams, finals/s and acknowledgement latency.

    python bench/transcript_latency.py [--streams 50] [--rate 1000] [--seconds 10]

A real server with persist_transcripts on. Each stream opens a session and sends finals (a
corpus sentence each, user and assistant in turn) paced so that all streams together send
`--rate` finals a second; each final's latency is from its send to the acknowledgement that
covers its seq (it is committed then). Reported: finals/s achieved, acknowledgement p50/p99,
the server's peak RSS. Target: p99 under 20 ms at 1,000 finals/s in total.
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
from search_latency import percentile

import memoryd_client as md
from memoryd.testing.server_process import ServerProcess


async def stream(
    stub: md.Stubs, number: int, interval: float, until: float, texts: list[str]
) -> list[float]:
    """One session: a final every `interval` seconds until `until`; each ack's latency (ms)."""
    queue: asyncio.Queue[md.StreamTranscriptRequest | None] = asyncio.Queue()

    async def send() -> AsyncIterator[md.StreamTranscriptRequest]:
        while (request := await queue.get()) is not None:
            yield request

    call = stub.conversations.StreamTranscript(send())
    await queue.put(
        md.StreamTranscriptRequest(
            open=md.TranscriptOpen(device_id=f"bench-{number}", session_id=f"s-{number}")
        )
    )
    await call.read()
    latencies: list[float] = []
    seq = 0
    start = time.perf_counter() + interval * random.random()  # streams do not send in step
    while time.perf_counter() < until:
        seq += 1
        speaker = md.SPEAKER_USER if seq % 2 else md.SPEAKER_ASSISTANT
        sent = time.perf_counter()
        await queue.put(
            md.StreamTranscriptRequest(
                segment=md.TranscriptSegment(seq=seq, speaker=speaker, text=texts[seq % len(texts)])
            )
        )
        ack = await call.read()
        assert isinstance(ack, md.StreamTranscriptResponse), ack  # not the stream's end
        assert ack.committed_seq == seq
        latencies.append((time.perf_counter() - sent) * 1000)
        await asyncio.sleep(max(0.0, start + seq * interval - time.perf_counter()))
    await queue.put(md.StreamTranscriptRequest(end=md.TranscriptEnd()))
    await call.read()
    await queue.put(None)
    return latencies


async def run(address: str, streams: int, rate: float, seconds: float) -> tuple[list[float], float]:
    rng = random.Random(2030)
    words = corpus.vocabulary()
    texts = [corpus.message_text(rng, words) for _ in range(500)]
    interval = streams / rate
    async with md.connect(address) as channel:
        stub = md.Stubs(channel)
        began = time.perf_counter()
        until = began + seconds
        results = await asyncio.gather(
            *(stream(stub, n, interval, until, texts) for n in range(streams))
        )
        spent = time.perf_counter() - began
    return [latency for latencies in results for latency in latencies], spent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=50)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        config = "[memoryd.realtime]\npersist_transcripts = true\n"
        server = ServerProcess(Path(scratch) / "home", config=config).start()
        try:
            latencies, spent = asyncio.run(
                run(server.address, args.streams, args.rate, args.seconds)
            )
            rss = peak_rss_mb(server.process.pid)
        finally:
            server.stop()
    result = {
        "benchmark": "transcript_latency",
        "streams": args.streams,
        "target_rate": args.rate,
        "finals": len(latencies),
        "finals_per_second": round(len(latencies) / spent),
        "ack_ms": {
            "p50": round(percentile(latencies, 0.5), 2),
            "p99": round(percentile(latencies, 0.99), 2),
        },
        "server_peak_rss_mb": round(rss, 1),
        "target": "ack p99 under 20 ms at 1,000 finals/s in total",
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
