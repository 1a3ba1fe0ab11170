"""(w) What metrics and traces cost: AppendMessages CPU per call, with them on and off, in one run.

    python bench/observability_cost.py [--seconds 5] [--rounds 12] [--concurrency 8] [--rps N]
                                       [--scrape-seconds 15] [--only NAME ...]

memoryd servers on SQLite, embeddings off in each (the background embedder's CPU is not the
calls'), all loaded at once in each round, each by its own ghz (bench/append_throughput.py)
with 8 callers: every server sees the same moment's machine noise, which on this shared
2-core machine is larger than the costs measured when servers take turns.

- `off` and `off_control`: [memoryd.metrics] enabled = false, tracing off: no per-call
  counting at all. Two of them: their difference is what the measure calls a cost when there
  is none (the noise floor). The baseline of each round is their mean.
- `metrics`: metrics on (the default), /metrics scraped every `--scrape-seconds`.
- `both`: metrics as above, and tracing on at its default sample_ratio, its spans exported
  over OTLP/gRPC to a collector in this process that counts them.
- `both_none_sampled`: tracing on, no new trace sampled (sample_ratio = 0): the cost of
  being on before any span.
- `both_every_trace`: sample_ratio = 1, every call traced: what a caller's sampled trace
  costs, call by call.

The measure is each server process's CPU time (all threads) per acknowledged call; the cost is
the median over rounds of a server's CPU per call over the round's baseline. After the rounds,
the CPU a scrape of /metrics costs the server is measured on its own (a cost per scrape, not
per call: at one scrape every 15 s it is spread over thousands of calls). Target: `both`
under 5% of CPU per call.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import urllib.request
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from append_throughput import cpu_seconds, run_ghz, summary
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from server_config import EMBEDDINGS_OFF

from memoryd.testing.server_process import ServerProcess

METRICS_PORT = '[memoryd.metrics]\nlisten = "127.0.0.1:0"\n'


class CountingCollector(trace_service_pb2_grpc.TraceServiceServicer):
    """An OTLP trace receiver that only counts what it is sent."""

    def __init__(self) -> None:
        self.spans = 0
        self._lock = threading.Lock()

    def Export(  # noqa: N802 - the generated servicer's name
        self,
        request: trace_service_pb2.ExportTraceServiceRequest,
        context: Any,  # noqa: ARG002 - the generated servicer's signature
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        count = sum(
            len(scope.spans) for spans in request.resource_spans for scope in spans.scope_spans
        )
        with self._lock:
            self.spans += count
        return trace_service_pb2.ExportTraceServiceResponse()


class Scraper:
    """GET /metrics every `seconds`, in a thread, until stopped."""

    def __init__(self, address: str, seconds: float) -> None:
        self.address = address
        self.seconds = seconds
        self.scrapes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.seconds):
            with urllib.request.urlopen(f"http://{self.address}/metrics", timeout=10) as answer:
                answer.read()
            self.scrapes += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def measure(server: ServerProcess, seconds: float, args: argparse.Namespace) -> dict[str, float]:
    """One timed ghz run against `server`, with the server's CPU time per acknowledged call."""
    before = cpu_seconds(server.process.pid)
    run = summary(
        run_ghz(server.address, seconds=seconds, concurrency=args.concurrency, rps=args.rps)
    )
    run["cpu_us_per_call"] = (cpu_seconds(server.process.pid) - before) / max(run["ok"], 1) * 1e6
    return run


def scrape_cost(server: ServerProcess, address: str, scrapes: int = 20) -> float:
    """The server's CPU milliseconds per GET /metrics, the server otherwise idle."""
    before = cpu_seconds(server.process.pid)
    for _ in range(scrapes):
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as answer:
            answer.read()
    return round((cpu_seconds(server.process.pid) - before) / scrapes * 1000, 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--concurrency", type=int, default=8, help="callers per server")
    parser.add_argument(
        "--rps",
        type=int,
        default=0,
        help="at most this many calls a second to each server (0: as fast as each answers)",
    )
    parser.add_argument(
        "--scrape-seconds", type=float, default=15.0, help="how often /metrics is read"
    )
    parser.add_argument(
        "--only", action="append", help="measure these servers (and the two `off`) only"
    )
    args = parser.parse_args()

    collector = CountingCollector()
    receiver = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    # opentelemetry-proto's generated gRPC module has no types.
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(  # type: ignore[no-untyped-call]
        collector, receiver
    )
    port = receiver.add_insecure_port("127.0.0.1:0")
    receiver.start()
    tracing = f'[memoryd.tracing]\nenabled = true\notlp_endpoint = "http://127.0.0.1:{port}"\n'
    off = EMBEDDINGS_OFF + "[memoryd.metrics]\nenabled = false\n"
    configs = {
        "off": off,
        "off_control": off,
        "metrics": EMBEDDINGS_OFF + METRICS_PORT,
        "both": EMBEDDINGS_OFF + METRICS_PORT + tracing,
        "both_none_sampled": EMBEDDINGS_OFF + METRICS_PORT + tracing + "sample_ratio = 0.0\n",
        "both_every_trace": EMBEDDINGS_OFF + METRICS_PORT + tracing + "sample_ratio = 1.0\n",
    }
    if args.only:
        chosen = {"off", "off_control", *args.only}
        configs = {name: config for name, config in configs.items() if name in chosen}
    with tempfile.TemporaryDirectory() as scratch:
        servers = {
            name: ServerProcess(Path(scratch) / name, config=config).start()
            for name, config in configs.items()
        }
        scraped = {
            name: str(server.events("serving")[-1]["metrics"])
            for name, server in servers.items()
            if not name.startswith("off")
        }
        scrapers = [Scraper(address, args.scrape_seconds) for address in scraped.values()]
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in servers}
        try:
            with futures.ThreadPoolExecutor(len(servers)) as pool:

                def together(seconds: float) -> dict[str, dict[str, float]]:
                    loads = pool.map(
                        lambda server: measure(server, seconds, args), servers.values()
                    )
                    return dict(zip(servers, loads, strict=True))

                together(2.0)  # warm-up: connections, caches, the first FTS segments
                for _ in range(args.rounds):
                    for name, run in together(args.seconds).items():
                        runs[name].append(run)
        finally:
            for scraper in scrapers:
                scraper.stop()
        scrape_ms = {name: scrape_cost(servers[name], address) for name, address in scraped.items()}
        codes = {name: server.stop() for name, server in servers.items()}
        receiver.stop(None)
    if any(codes.values()):
        sys.exit(f"memoryd exited with {codes}")

    baseline = [
        (first["cpu_us_per_call"] + second["cpu_us_per_call"]) / 2
        for first, second in zip(runs["off"], runs["off_control"], strict=True)
    ]
    result: dict[str, Any] = {
        "benchmark": "observability_cost",
        "callers_per_server": args.concurrency,
        "seconds_per_round": args.seconds,
        "rounds": args.rounds,
        "scrape_every_seconds": args.scrape_seconds,
        "target_cost": 0.05,
        "spans_exported": collector.spans,
        "scrapes_during_rounds": sum(scraper.scrapes for scraper in scrapers),
    }
    for name in servers:
        costs = [
            run["cpu_us_per_call"] / base for run, base in zip(runs[name], baseline, strict=True)
        ]
        result[name] = {
            "cpu_us_per_call": round(
                statistics.median(run["cpu_us_per_call"] for run in runs[name])
            ),
            "cost": round(statistics.median(costs) - 1, 3),
            "rps": round(statistics.median(run["rps"] for run in runs[name])),
            **({"server_cpu_ms_per_scrape": scrape_ms[name]} if name in scrape_ms else {}),
        }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
