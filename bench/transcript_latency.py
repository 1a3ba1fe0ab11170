"""(g) StreamTranscript: 50 concurrent streams, finals/s and acknowledgement latency.

    python bench/transcript_latency.py [--streams 50] [--rate 1000] [--seconds 10] [--rounds 3]
                                      [--embeddings on|off]

A real server with persist_transcripts on. Each stream opens a session and sends finals (a
corpus sentence each, user and assistant in turn) paced so that all streams together send
`--rate` finals a second; each final's latency is from its send to the acknowledgement that
covers its seq (it is committed then). The baseline is the same load against a do-nothing
grpc.aio server that acknowledges each segment as it reads it (bench/noop_server.py): what
gRPC in Python and the 50 clients, on the same cores, cost by themselves. Rounds alternate
between the two (the machine is noisy); reported: each round's finals/s and acknowledgement
p50/p99, their medians, and the server's peak RSS. Target: p99 under 20 ms at 1,000 finals/s in
total.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import corpus
import server_config
from append_throughput import start_noop
from ingest_throughput import peak_rss_mb
from search_latency import percentile

import memoryd_client as md
from memoryd.testing.server_process import ServerProcess


async def stream(
    stub: md.Stubs, session: str, interval: float, until: float, texts: list[str]
) -> list[float]:
    """One session: a final every `interval` seconds until `until`; each ack's latency (ms)."""
    queue: asyncio.Queue[md.StreamTranscriptRequest | None] = asyncio.Queue()

    async def send() -> AsyncIterator[md.StreamTranscriptRequest]:
        while (request := await queue.get()) is not None:
            yield request

    call = stub.conversations.StreamTranscript(send())
    await queue.put(
        md.StreamTranscriptRequest(
            open=md.TranscriptOpen(device_id=f"bench-{session}", session_id=session)
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


async def run(
    address: str, streams: int, rate: float, seconds: float, round_: int
) -> tuple[list[float], float]:
    """One round against the server at `address`: every final's latency (ms), and the seconds
    the round took."""
    rng = random.Random(2030)
    words = corpus.vocabulary()
    texts = [corpus.message_text(rng, words) for _ in range(500)]
    interval = streams / rate
    async with md.connect(address) as channel:
        stub = md.Stubs(channel)
        began = time.perf_counter()
        until = began + seconds
        results = await asyncio.gather(
            *(stream(stub, f"s-{round_}-{n}", interval, until, texts) for n in range(streams))
        )
        spent = time.perf_counter() - began
    return [latency for latencies in results for latency in latencies], spent


def figures(latencies: list[float], spent: float) -> dict[str, float]:
    """A round's finals/s and acknowledgement percentiles."""
    return {
        "finals_per_second": round(len(latencies) / spent),
        "p50": round(percentile(latencies, 0.5), 2),
        "p99": round(percentile(latencies, 0.99), 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=50)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    server_config.add_embeddings_option(parser)
    args = parser.parse_args()
    rounds: dict[str, list[dict[str, float]]] = {"memoryd": [], "noop": []}
    finals = 0
    with tempfile.TemporaryDirectory() as scratch:
        config = "[memoryd.realtime]\npersist_transcripts = true\n"
        config += server_config.embeddings(args.embeddings)
        server = ServerProcess(Path(scratch) / "home", config=config).start()
        noop, noop_address = start_noop()
        try:
            for round_ in range(args.rounds):
                for name, address in (("memoryd", server.address), ("noop", noop_address)):
                    latencies, spent = asyncio.run(
                        run(address, args.streams, args.rate, args.seconds, round_)
                    )
                    rounds[name].append(figures(latencies, spent))
                    finals += len(latencies) if name == "memoryd" else 0
            rss = peak_rss_mb(server.process.pid)
        finally:
            noop.terminate()
            noop.wait()
            server.stop()

    def median(name: str, field: str) -> float:
        return round(statistics.median(r[field] for r in rounds[name]), 2)

    result = {
        "benchmark": "transcript_latency",
        "streams": args.streams,
        "target_rate": args.rate,
        "rounds": args.rounds,
        "embeddings": args.embeddings,
        "finals": finals,
        "finals_per_second": median("memoryd", "finals_per_second"),
        "ack_ms": {"p50": median("memoryd", "p50"), "p99": median("memoryd", "p99")},
        "ack_p99_ms_each_round": [r["p99"] for r in rounds["memoryd"]],
        "noop_ack_ms": {"p50": median("noop", "p50"), "p99": median("noop", "p99")},
        "noop_ack_p99_ms_each_round": [r["p99"] for r in rounds["noop"]],
        "server_peak_rss_mb": round(rss, 1),
        "target": "ack p99 under 20 ms at 1,000 finals/s in total",
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
