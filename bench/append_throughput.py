"""(a) AppendMessages throughput, one message per call, 32 concurrent callers, against a baseline.

    python bench/append_throughput.py [--seconds 10] [--rounds 3] [--concurrency 32]
                                      [--warm-up 2] [--backend sqlite] [--backend postgres]

The baseline is a do-nothing grpc.aio server on the same contract (bench/noop_server.py). Load
comes from ghz (a Go gRPC load generator, far cheaper per call than a Python client, so the
ratio measures the servers rather than the client), 32 workers on one HTTP/2 connection, each
worker appending to its own conversation. Rounds alternate baseline and memoryd, so both see the
same machine noise; the medians are compared.

Two memoryd servers take part: one with the default settings, whose background embedder makes a
vector of every appended message while the appends go on, and one with embeddings off, as
memoryd was before semantic search: writes must be acknowledged as fast with the embedder as
without it (the embedder only reads, then commits a batch of vectors now and then). Each memoryd
is stopped (SIGSTOP) while another server is measured: otherwise the embedder, quiet while its
server is called but with every appended message still to embed, works through that backlog at
full speed during the other servers' rounds, and takes their cores and caches.

A second baseline, the floor (bench/floor_server.py), stores each message in memoryd's own
schema through one writer thread and does nothing else: what it spends beyond the do-nothing
server is the price of Python, a thread and SQLite's indexes; what memoryd spends beyond it is
memoryd's own code. It takes part in the same rounds.

With `--backend postgres` (repeatable, with `--backend sqlite`), a memoryd on a throwaway
PostgreSQL takes part as well (bench/backends.py), in the same rounds: its ratio to the
baseline sits beside SQLite's. After the runs each memoryd is stopped and its database opened:
every acknowledged append (every OK ghz counted, warm-up included) must be a committed row.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import backends
import server_config

from memoryd.testing.server_process import ServerProcess

ROOT = Path(__file__).resolve().parent.parent

CALL = "memoryd.v2.ConversationService/AppendMessages"
DATA = json.dumps(
    {
        "conversation": {"channel": "bench", "chat_id": "worker-{{.WorkerID}}"},
        "messages": [
            {
                "sender": "ada",
                "role": "ROLE_USER",
                "content": "message {{.RequestNumber}}: please move the dentist appointment to "
                "Friday and remind me about the deploy checklist",
            }
        ],
    }
)


def ghz_binary() -> str:
    """ghz from .tools/bin (make bench installs it) or PATH."""
    found = shutil.which("ghz", path=str(ROOT / ".tools" / "bin")) or shutil.which("ghz")
    if found is None:
        sys.exit("ghz is not installed: run `make bench` (it installs ghz into .tools/bin)")
    return found


def proto_of(call: str) -> str:
    """The proto file of a memoryd.v2 call ("memoryd.v2.ContextService/ComposeContext"): each
    service has a file of its own, named after it."""
    service = call.partition("/")[0].rpartition(".")[2]
    return f"memoryd/v2/{service.removesuffix('Service').lower()}_service.proto"


def ghz_command(
    address: str,
    *,
    seconds: float,
    concurrency: int,
    connections: int = 1,
    call: str = CALL,
    data: str = DATA,
    rps: int | None = None,
) -> list[str]:
    """The ghz command line of one timed run of `call` (JSON report on stdout); `rps`: at
    most that many calls a second (default: as fast as the server answers)."""
    return [
        ghz_binary(),
        "--insecure",
        "--call",
        call,
        "--data",
        data,
        "--import-paths",
        str(ROOT / "protos"),
        "--proto",
        proto_of(call),
        "--concurrency",
        str(concurrency),
        "--connections",
        str(connections),
        "--duration",
        f"{seconds}s",
        "--total",
        "100000000",
        "--format",
        "json",
        *(("--rps", str(rps)) if rps else ()),
        address,
    ]


def run_ghz(address: str, **options: Any) -> dict[str, Any]:
    """One ghz run (`options` as ghz_command takes them); returns its JSON report."""
    result = subprocess.run(
        ghz_command(address, **options), capture_output=True, text=True, check=True
    )
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def summary(report: dict[str, Any]) -> dict[str, float]:
    """Calls per second, OK count, and latency percentiles (ms) of a ghz report."""
    latencies = {
        int(point["percentage"]): point["latency"] / 1e6
        for point in report.get("latencyDistribution") or []
    }
    statuses = report.get("statusCodeDistribution") or {}
    return {
        "rps": report["rps"],
        "ok": statuses.get("OK", 0),
        "errors": sum(count for status, count in statuses.items() if status != "OK"),
        "p50_ms": latencies.get(50, float("nan")),
        "p99_ms": latencies.get(99, float("nan")),
    }


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_noop() -> tuple[subprocess.Popen[str], str]:
    """The baseline server; returns the process and its address."""
    return start_script("noop_server.py", "127.0.0.1:0")


def start_script(script: str, *arguments: str) -> tuple[subprocess.Popen[str], str]:
    """A baseline server of bench/ that prints its address; returns the process and it."""
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / script), *arguments],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def alone(measured_pid: int | None, memoryds: list[int]) -> None:
    """Only the memoryd about to be measured runs (None: a baseline's round, none runs); every
    other stops (SIGSTOP) until its own round."""
    for pid in memoryds:
        os.kill(pid, signal.SIGCONT if pid == measured_pid else signal.SIGSTOP)


def resume(memoryds: list[int]) -> None:
    """Every memoryd runs again (before it is stopped for good)."""
    for pid in memoryds:
        os.kill(pid, signal.SIGCONT)


def measured(pid: int, address: str, concurrency: int, seconds: float) -> dict[str, float]:
    """One timed ghz run against a server, with the server's CPU time per acknowledged call."""
    cpu_before = cpu_seconds(pid)
    run = summary(run_ghz(address, seconds=seconds, concurrency=concurrency))
    run["cpu_us_per_call"] = (cpu_seconds(pid) - cpu_before) / max(run["ok"], 1) * 1e6
    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument(
        "--warm-up", type=float, default=2.0, help="seconds of load on each server, not measured"
    )
    parser.add_argument(
        "--backend", action="append", choices=backends.CHOICES, help="default: sqlite"
    )
    args = parser.parse_args()
    chosen = args.backend or ["sqlite"]

    with (
        tempfile.TemporaryDirectory() as scratch,
        backends.started(chosen, Path(scratch)) as places,
    ):
        servers = {}
        for backend in chosen:
            suffix = "" if backend == "sqlite" else f"_{backend}"
            home, off = Path(scratch) / f"home{suffix}", Path(scratch) / f"off{suffix}"
            servers[f"memoryd{suffix}"] = ServerProcess(home, env=places.env(backend, home)).start()
            servers[f"embeddings_off{suffix}"] = ServerProcess(
                off,
                config=server_config.EMBEDDINGS_OFF,
                env=places.env(backend, off),
            ).start()
        noop, noop_address = start_noop()
        floor, floor_address = start_script("floor_server.py", str(Path(scratch) / "floor"))
        baselines = {"baseline": (noop, noop_address), "floor": (floor, floor_address)}
        acknowledged = dict.fromkeys(servers, 0)
        cancelled = dict.fromkeys(servers, 0)
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in (*baselines, *servers)}
        pids = [server.process.pid for server in servers.values()]
        try:
            # Warm-up (not measured): connections, caches, the first FTS segments.
            for name, server in servers.items():
                warm_up = summary(
                    run_ghz(server.address, seconds=args.warm_up, concurrency=args.concurrency)
                )
                acknowledged[name] += int(warm_up["ok"])
                cancelled[name] += int(warm_up["errors"])
            for _, address in baselines.values():
                run_ghz(address, seconds=args.warm_up, concurrency=args.concurrency)
            for _ in range(args.rounds):
                for name, (process, address) in baselines.items():
                    alone(None, pids)
                    runs[name].append(
                        measured(process.pid, address, args.concurrency, args.seconds)
                    )
                for name, server in servers.items():
                    alone(server.process.pid, pids)
                    run = measured(
                        server.process.pid, server.address, args.concurrency, args.seconds
                    )
                    acknowledged[name] += int(run["ok"])
                    cancelled[name] += int(run["errors"])
                    runs[name].append(run)
        finally:
            resume(pids)
            for process, _ in baselines.values():
                process.terminate()
                process.wait()
            codes = {name: server.stop() for name, server in servers.items()}
        if any(codes.values()):
            sys.exit(f"memoryd exited with {codes}")
        stored, writers = {}, {}
        for name, server in servers.items():
            stored[name] = places.count(server.home, "SELECT count(*) FROM messages")
            writers[name] = server.events("stopped")[0]["writer"]

    def median(name: str, key: str) -> float:
        return statistics.median(run[key] for run in runs[name])

    result: dict[str, object] = {
        "benchmark": "append_throughput",
        "concurrency": args.concurrency,
        "seconds_per_round": args.seconds,
        "rounds": args.rounds,
        "baseline_rps": [round(run["rps"]) for run in runs["baseline"]],
        "baseline_p50_ms": round(median("baseline", "p50_ms"), 2),
        "baseline_cpu_us_per_call": round(median("baseline", "cpu_us_per_call")),
        "target": "ratio at least 0.6 in every run; CPU a call at most 2x the baseline's",
        "floor": {
            "rps": [round(run["rps"]) for run in runs["floor"]],
            "ratio_of_medians": round(median("floor", "rps") / median("baseline", "rps"), 3),
            "p50_ms": round(median("floor", "p50_ms"), 2),
            "cpu_us_per_call": round(median("floor", "cpu_us_per_call")),
            "cpu_of_baseline": round(
                median("floor", "cpu_us_per_call") / median("baseline", "cpu_us_per_call"), 2
            ),
        },
    }
    for name in servers:
        # ghz cancels the calls in flight when a timed round ends: those may have committed
        # without being answered, so rows may exceed acknowledgements by at most that many.
        committed = acknowledged[name] <= stored[name] <= acknowledged[name] + cancelled[name]
        result[name] = {
            "rps": [round(run["rps"]) for run in runs[name]],
            "ratio_of_medians": round(median(name, "rps") / median("baseline", "rps"), 3),
            "p50_ms": round(median(name, "p50_ms"), 2),
            "p99_ms": round(median(name, "p99_ms"), 2),
            # The server process's CPU time (all threads) per acknowledged call: steadier than
            # calls per second on a shared machine (the embedder's work is in it).
            "cpu_us_per_call": round(median(name, "cpu_us_per_call")),
            "cpu_of_baseline": round(
                median(name, "cpu_us_per_call") / median("baseline", "cpu_us_per_call"), 2
            ),
            "ratio_to_floor": round(median(name, "rps") / median("floor", "rps"), 3),
            "cpu_of_floor": round(
                median(name, "cpu_us_per_call") / median("floor", "cpu_us_per_call"), 2
            ),
            "errors": cancelled[name],
            "acknowledged": acknowledged[name],
            "committed_rows": stored[name],
            "every_acknowledged_row_committed": committed,
            "rows_per_commit": round(writers[name]["rows"] / max(writers[name]["groups"], 1), 1),
        }
    ok = all(result[name]["every_acknowledged_row_committed"] for name in servers)  # type: ignore[index]
    print(json.dumps(result, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
