"""(e) ComposeContext latency for a 500-message conversation and a 128k-token window.

    python bench/compose_latency.py [--messages 500] [--calls 3000] [--rounds 3]
                                    [--backend postgres]

A real server gets one conversation through the RPCs: a system prompt, `--messages` chat
messages of 3-40 words (bench/corpus.py's vocabulary), four USER.md / MEMORY.md rows and ten
agent-scope rows, so every block of the composed context is there. Then ghz (a Go client) calls
ComposeContext one at a time on one connection, and grpc's health check on the same server, which
does nothing, alternately in `--rounds` rounds of `--calls` calls each: the difference is what
composing costs. Target: ComposeContext p50 within 0.5 ms of the health check's p50.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import backends
import corpus
import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from recall_latency import ghz_latency
from search_latency import percentile

import memoryd_client as md
from memoryd.testing.server_process import ServerProcess

ROOT = Path(__file__).resolve().parent.parent

WINDOW = 128_000
CONVERSATION = md.Conversation(agent_id="bench", channel="telegram", chat_id="compose")


def load(memory: md.SyncStubs, messages: int, rng: random.Random) -> int:
    """The conversation and its memory rows; returns the number of messages stored."""
    owner = md.OwnerScope(agent_id=CONVERSATION.agent_id)
    rows = [
        (md.CATEGORY_PREFERENCE, "drink", "Drinks oat flat whites"),
        (md.CATEGORY_IDENTITY, "name", "Ada Lovelace, mathematician"),
        (md.CATEGORY_DIRECTIVE, "drafts", "Show a draft before sending email"),
        (md.CATEGORY_GOAL, "marathon", "Run a marathon in under four hours"),
        *(
            (md.CATEGORY_CONTEXT, f"project-{n}", f"Project {n} ships in week {n + 10}")
            for n in range(10)
        ),
    ]
    for category, key, value in rows:
        memory.memory.StoreMemory(
            md.StoreMemoryRequest(owner=owner, category=category, key=key, value=value)
        )
    words = corpus.vocabulary()
    batch = [
        md.NewMessage(role=md.ROLE_SYSTEM, sender="bot", content="You are a helpful assistant.")
    ]
    for index in range(messages):
        role = md.ROLE_USER if index % 2 == 0 else md.ROLE_ASSISTANT
        batch.append(
            md.NewMessage(role=role, sender="ada", content=corpus.message_text(rng, words))
        )
    stored = 0
    for start in range(0, len(batch), 100):
        response = memory.conversations.AppendMessages(
            md.AppendMessagesRequest(conversation=CONVERSATION, messages=batch[start : start + 100])
        )
        stored += len(response.results)
    return stored


def compose_from_python(address: str, calls: int) -> list[float]:
    """ComposeContext from the generated Python client (ms each)."""
    request = md.ComposeContextRequest(conversation=CONVERSATION, context_window=WINDOW)
    spent: list[float] = []
    with grpc.insecure_channel(address) as channel:
        compose = md.SyncStubs(channel).context.ComposeContext
        for _ in range(calls):
            began = time.perf_counter()
            compose(request)
            spent.append((time.perf_counter() - began) * 1000)
    return spent


def python_client(address: str, calls: int) -> tuple[list[float], list[float]]:
    """The same two calls from the generated Python client, alternating (ms each)."""
    compose_ms: list[float] = []
    health_ms: list[float] = []
    request = md.ComposeContextRequest(conversation=CONVERSATION, context_window=WINDOW)
    with grpc.insecure_channel(address) as channel:
        compose = md.SyncStubs(channel).context.ComposeContext
        checker: Any = health_pb2_grpc.HealthStub(channel)  # its methods are set per instance
        health = checker.Check
        for _ in range(calls):
            began = time.perf_counter()
            compose(request)
            middle = time.perf_counter()
            health(health_pb2.HealthCheckRequest())
            compose_ms.append((middle - began) * 1000)
            health_ms.append((time.perf_counter() - middle) * 1000)
    return compose_ms, health_ms


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=500)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backend", default="sqlite", choices=backends.CHOICES)
    args = parser.parse_args()
    rng = random.Random(2028)
    with (
        tempfile.TemporaryDirectory() as scratch,
        backends.started([args.backend], Path(scratch)) as places,
    ):
        home = Path(scratch) / "home"
        server = ServerProcess(home, env=places.env(args.backend, home)).start()
        try:
            with grpc.insecure_channel(server.address) as channel:
                memory = md.SyncStubs(channel)
                stored = load(memory, args.messages, rng)
                composed = md.SyncStubs(channel).context.ComposeContext(
                    md.ComposeContextRequest(conversation=CONVERSATION, context_window=WINDOW)
                )
            request = {
                "conversation": {"agent_id": "bench", "channel": "telegram", "chat_id": "compose"},
                "context_window": WINDOW,
            }
            compose_runs, health_runs = [], []
            python_compose, python_health = python_client(server.address, args.calls)
            for _ in range(args.rounds):
                compose_runs.append(
                    ghz_latency(
                        server.address,
                        "memoryd.v2.ContextService.ComposeContext",
                        [request],
                        args.calls,
                    )
                )
                health_runs.append(
                    ghz_latency(server.address, "grpc.health.v1.Health.Check", [{}], args.calls)
                )
            events = server.events("rpc")
        finally:
            server.stop()
        # The floor: a do-nothing server answering the same answer (gRPC and the transfer).
        answer_file = Path(scratch) / "answer.bin"
        answer_file.write_bytes(composed.SerializeToString())
        canned = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "bench" / "noop_server.py"),
                "127.0.0.1:0",
                str(answer_file),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert canned.stdout is not None
            canned_address = canned.stdout.readline().strip()
            floor_runs = [
                ghz_latency(
                    canned_address,
                    "memoryd.v2.ContextService.ComposeContext",
                    [request],
                    args.calls,
                )
                for _ in range(args.rounds)
            ]
            floor_python = compose_from_python(canned_address, args.calls)
        finally:
            canned.terminate()
            canned.wait()
    inside = [e["duration_ms"] for e in events if e["method"].endswith("/ComposeContext")]
    compose_p50 = statistics.median(run["p50_ms"] for run in compose_runs)
    health_p50 = statistics.median(run["p50_ms"] for run in health_runs)
    result = {
        "benchmark": "compose_latency",
        "backend": args.backend,
        "messages": stored,
        "context_window": WINDOW,
        "parts": len(composed.parts),
        "total_tokens": composed.total_tokens,
        "answer_bytes": composed.ByteSize(),
        "rounds": args.rounds,
        "calls_per_round": args.calls,
        "compose_ghz_ms": {
            "p50": round(compose_p50, 3),
            "p99": round(statistics.median(run["p99_ms"] for run in compose_runs), 3),
            "errors": sum(run["errors"] for run in compose_runs),
        },
        "health_check_ghz_ms": {
            "p50": round(health_p50, 3),
            "p99": round(statistics.median(run["p99_ms"] for run in health_runs), 3),
        },
        "compose_minus_health_p50_ms": round(compose_p50 - health_p50, 3),
        "same_answer_from_a_do_nothing_server_ghz_ms": {
            "p50": round(statistics.median(run["p50_ms"] for run in floor_runs), 3),
            "p99": round(statistics.median(run["p99_ms"] for run in floor_runs), 3),
            "python_client_p50": round(percentile(floor_python, 0.5), 3),
        },
        "python_client_ms": {
            "compose_p50": round(percentile(python_compose, 0.5), 3),
            "compose_p99": round(percentile(python_compose, 0.99), 3),
            "health_p50": round(percentile(python_health, 0.5), 3),
            "health_p99": round(percentile(python_health, 0.99), 3),
        },
        "compose_server_ms": {
            "p50": round(percentile(inside, 0.5), 3),
            "p99": round(percentile(inside, 0.99), 3),
        },
        "target": "compose p50 within 0.5 ms of the health check's p50",
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
