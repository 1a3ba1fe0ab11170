"""`memoryd serve --workers N`: AppendMessages throughput, latency under load, and coherence.

    python bench/worker_throughput.py [--seconds 10] [--rounds 3] [--workers 1 --workers 2]
                                      [--warm-up 2] [--backend sqlite] [--backend postgres]

For each worker count and backend, in one run:

- AppendMessages throughput (ghz, 32 callers over 8 connections, so that the kernel spreads
  them over the workers) of memoryd as configured by default and, on SQLite, with embeddings
  off too, beside a do-nothing grpc.aio server run as as many processes on one port
  (bench/noop_server.py with SO_REUSEPORT). The default server's background embedder, at the
  lowest CPU priority, spends every idle moment on the backlog that the appends leave, so its
  CPU time is in that server's CPU per call. Rounds alternate baseline and memoryd; medians
  are compared. On this 2-core machine ghz shares the cores with the servers, so the CPU time of
  every server process per acknowledged call is reported too (steadier than calls a second).
- SearchHistory and GetPromptContext latency (4 callers over 4 connections) while 16 callers
  append at the same time.
- Coherence: writes through one worker, each followed at once by a read through another, for
  `--seconds`; the rate of such pairs, and how many reads missed their write (must be 0).

After the runs each memoryd is stopped and its database opened: every acknowledged append must
be a committed row.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import append_throughput as appends
import backends
from server_config import EMBEDDINGS_OFF

import memoryd_client as md
from memoryd.testing.server_process import ServerProcess
from memoryd.testing.workers import channels_to_each_worker

ROOT = Path(__file__).resolve().parent.parent
CONNECTIONS = 8
SEARCH = json.dumps(
    {
        "conversation": {"channel": "bench", "chat_id": "worker-1"},
        "query": "dentist appointment on Friday",
    }
)
PROMPT = json.dumps({"agent_id": "bench", "owner_id": "ada"})


def start_noop(processes: int) -> tuple[list[subprocess.Popen[str]], str]:
    """`processes` do-nothing servers on one port; the processes and the address."""
    started: list[subprocess.Popen[str]] = []
    address = "127.0.0.1:0"
    for _ in range(processes):
        process = subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / "noop_server.py"), address],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "NOOP_REUSEPORT": "1"},
        )
        assert process.stdout is not None
        address = process.stdout.readline().strip()
        started.append(process)
    return started, address


def server_pids(server: ServerProcess) -> list[int]:
    """The supervisor and its workers, or the one process."""
    serving = server.events("serving")[-1]
    return [server.process.pid, *serving.get("pids", [])]


def cpu(pids: list[int]) -> float:
    return sum(appends.cpu_seconds(pid) for pid in pids)


def measured(address: str, pids: list[int], seconds: float) -> dict[str, float]:
    """One timed append round: calls a second, latencies, CPU per acknowledged call."""
    before = cpu(pids)
    run = appends.summary(
        appends.run_ghz(address, seconds=seconds, concurrency=32, connections=CONNECTIONS)
    )
    run["cpu_us_per_call"] = (cpu(pids) - before) / max(run["ok"], 1) * 1e6
    return run


def latency_under_load(address: str, seconds: float) -> dict[str, dict[str, float]]:
    """SearchHistory's and GetPromptContext's latency while 16 callers append."""
    found = {}
    for name, call, data in (
        ("search_history", "memoryd.v2.ConversationService/SearchHistory", SEARCH),
        ("get_prompt_context", "memoryd.v2.ContextService/GetPromptContext", PROMPT),
    ):
        load = subprocess.Popen(
            appends.ghz_command(
                address, seconds=seconds + 1, concurrency=16, connections=CONNECTIONS
            ),
            stdout=subprocess.DEVNULL,
        )
        try:
            time.sleep(0.5)
            report = appends.summary(
                appends.run_ghz(
                    address,
                    seconds=seconds,
                    concurrency=4,
                    connections=4,
                    call=call,
                    data=data,
                )
            )
        finally:
            load.wait()
        found[name] = {
            "p50_ms": round(report["p50_ms"], 2),
            "p99_ms": round(report["p99_ms"], 2),
            "errors": report["errors"],
        }
    return found


async def coherence(address: str, workers: int, seconds: float) -> dict[str, float]:
    """Write through one worker, read through another at once, for `seconds`."""
    conversation = md.Conversation(agent_id="bench", channel="bench", chat_id="coherence")
    async with contextlib.AsyncExitStack() as stack:
        if workers > 1:
            channels = await stack.enter_async_context(channels_to_each_worker(address, workers))
        else:  # one process: two connections to it
            channels = [
                await stack.enter_async_context(
                    md.connect(address, options=[("grpc.memoryd_connection", number)])
                )
                for number in range(2)
            ]
        stubs = [md.Stubs(channel) for channel in channels]
        pairs, stale = 0, 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            writer, reader = stubs[pairs % 2], stubs[(pairs + 1) % 2]
            text = f"pair {pairs}"
            await writer.conversations.AppendMessages(
                md.AppendMessagesRequest(
                    conversation=conversation,
                    messages=[md.NewMessage(role=md.ROLE_USER, sender="ada", content=text)],
                )
            )
            window = await reader.conversations.ListMessages(
                md.ListMessagesRequest(conversation=conversation, page_size=1)
            )
            stale += window.messages[-1].content != text
            pairs += 1
    return {"pairs_per_second": round(pairs / seconds), "pairs": pairs, "stale": stale}


async def remember(address: str) -> None:
    """A memory row, so that GetPromptContext has a file to answer with."""
    async with md.connect(address) as channel:
        await md.Stubs(channel).memory.StoreMemory(
            md.StoreMemoryRequest(
                owner=md.OwnerScope(agent_id="bench", owner_id="ada"),
                scope_type=md.SCOPE_TYPE_OWNER,
                category=md.CATEGORY_PREFERENCE,
                key="drink",
                value="Prefers green tea in the afternoon",
            )
        )


def start_servers(
    chosen: list[str], workers: int, scratch: Path, places: backends.Backends
) -> dict[str, ServerProcess]:
    """A memoryd of `workers` on each backend, and one with embeddings off on SQLite."""
    servers: dict[str, ServerProcess] = {}
    for name in [*chosen, *(["sqlite_embeddings_off"] if "sqlite" in chosen else [])]:
        backend = name.split("_")[0]
        home = scratch / f"{name}-{workers}"
        servers[name] = ServerProcess(
            home,
            env=places.env(backend, home),
            workers=workers,
            config=EMBEDDINGS_OFF if name.endswith("_embeddings_off") else "",
        ).start()
        asyncio.run(remember(servers[name].address))
    return servers


def stop_all(servers: dict[str, ServerProcess]) -> None:
    """Stop every server; exit with its output when one did not stop cleanly."""
    codes = {name: server.stop() for name, server in servers.items()}
    for name, code in codes.items():
        if code:
            sys.exit(f"memoryd ({name}) exited with {code}:\n{servers[name].output}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, action="append", help="default: 1 and 2")
    parser.add_argument(
        "--warm-up", type=float, default=2.0, help="seconds of load on each server, not measured"
    )
    parser.add_argument(
        "--backend", action="append", choices=backends.CHOICES, help="default: sqlite"
    )
    args = parser.parse_args()
    chosen = args.backend or ["sqlite"]
    counts = args.workers or [1, 2]
    result: dict[str, Any] = {
        "benchmark": "worker_throughput",
        "seconds_per_round": args.seconds,
        "rounds": args.rounds,
        "connections": CONNECTIONS,
    }
    ok = True
    with (
        tempfile.TemporaryDirectory() as scratch,
        backends.started(chosen, Path(scratch)) as places,
    ):
        for workers in counts:
            servers = start_servers(chosen, workers, Path(scratch), places)
            noop, noop_address = start_noop(workers)
            noop_pids = [process.pid for process in noop]
            runs: dict[str, list[dict[str, float]]] = {"baseline": [], **{b: [] for b in servers}}
            acknowledged = dict.fromkeys(servers, 0)
            cancelled = dict.fromkeys(servers, 0)
            extra: dict[str, dict[str, Any]] = {backend: {} for backend in servers}
            try:
                for name, server in servers.items():  # warm-up, not measured
                    warm = measured(server.address, server_pids(server), args.warm_up)
                    acknowledged[name] += int(warm["ok"])
                    cancelled[name] += int(warm["errors"])
                measured(noop_address, noop_pids, args.warm_up)
                for _ in range(args.rounds):
                    runs["baseline"].append(measured(noop_address, noop_pids, args.seconds))
                    for name, server in servers.items():
                        run = measured(server.address, server_pids(server), args.seconds)
                        acknowledged[name] += int(run["ok"])
                        cancelled[name] += int(run["errors"])
                        runs[name].append(run)
                for name, server in servers.items():
                    if name.endswith("_embeddings_off"):
                        continue  # its throughput only
                    extra[name]["under_append_load"] = latency_under_load(
                        server.address, args.seconds
                    )
                    extra[name]["coherence"] = asyncio.run(
                        coherence(server.address, workers, args.seconds)
                    )
            finally:
                for process in noop:
                    process.terminate()
                    process.wait()
                stop_all(servers)

            def median(name: str, key: str) -> float:
                return statistics.median(run[key] for run in runs[name])  # noqa: B023

            section: dict[str, Any] = {
                "baseline_rps": round(median("baseline", "rps")),
                "baseline_cpu_us_per_call": round(median("baseline", "cpu_us_per_call")),
            }
            for name, server in servers.items():
                stored = places.count(server.home, "SELECT count(*) FROM messages")
                # Appends of the coherence loop and the load runs were acknowledged too; they
                # are not counted, so only the lower bound is checked for them.
                committed = stored >= acknowledged[name]
                ok = ok and committed and extra[name].get("coherence", {}).get("stale", 0) == 0
                section[name] = {
                    "rps": round(median(name, "rps")),
                    "ratio_of_medians": round(median(name, "rps") / median("baseline", "rps"), 3),
                    "p50_ms": round(median(name, "p50_ms"), 2),
                    "p99_ms": round(median(name, "p99_ms"), 2),
                    "cpu_us_per_call": round(median(name, "cpu_us_per_call")),
                    "errors": cancelled[name],
                    "every_acknowledged_row_committed": committed,
                    **extra[name],
                }
            result[f"workers_{workers}"] = section
    for name in [*chosen, "sqlite_embeddings_off"]:
        one, two = (result.get(f"workers_{n}", {}).get(name) for n in (1, 2))
        if one and two:
            result[f"scaling_1_to_2_{name}"] = {
                "rps": round(two["rps"] / one["rps"], 2),
                "cpu_us_per_call": round(two["cpu_us_per_call"] / one["cpu_us_per_call"], 2),
            }
    print(json.dumps(result, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
