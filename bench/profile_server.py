"""Where a write path's CPU goes: each thread's CPU per call, and a py-spy profile of what holds
the interpreter lock, under one benchmark's load.

    python bench/profile_server.py [--load append|transcript|ingest|recall] [--seconds 10]
                                   [--embeddings on|off] [--backend sqlite]
                                   [--flame docs/profiles/append.svg] [--stacks FILE]
                                   [--messages N --memories N [--locomo PATH [--cache FILE]]]

Loads: `append`, ghz's load of append_throughput.py (32 callers, one message a call, counted by
ghz's OK answers); `transcript`, transcript_latency.py's (50 streams, 1,000 finals/s in total,
persistence on, counted by acknowledged finals); `ingest`, ingest_throughput.py's (2 streams of
batches of 1,000 messages, counted by stored messages, repeated until the time is up);
`recall`, recall_latency.py's (one caller, one Recall after another, counted by answers) over
the home it builds of `--messages` and `--memories` (with `--locomo`, LoCoMo's text and
questions, every message and row with its vector before the server starts).

CPU is read from /proc for every thread of the server before and after the load, and named by
the thread names py-spy reports (memoryd names its threads: memoryd-writer, memoryd-embed_0,
...); the event loop is MainThread, gRPC's poller `Thread-1 (_poll_wrapper)`. py-spy samples
only the thread holding the interpreter lock (`--gil`): what every other Python thread waits
for. Native work that lets the lock go (ONNX inference, SQLite's own C, tiktoken) shows in the
threads' CPU, not in the profile. py-spy slows what it samples (it stops the process 100 times
a second), so the calls per second here are lower than the benchmarks'; the shares are what this
is for.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import backends
import grpc
import ingest_throughput
import real_chat
import recall_latency
import server_config
import transcript_latency
from append_throughput import ghz_command, run_ghz, summary
from hybrid_latency import DEFAULT_CACHE

import memoryd_client as md
from memoryd.testing.server_process import ServerProcess

SAMPLE_RATE = 100
# The first frame of a stack of `py-spy record --threads`: "thread (TID): NAME".
THREAD = re.compile(r"^thread \((\d+)\): ([^;]+)")
# ingest: the messages sent again and again until the time is up (new rows each time).
INGEST_MESSAGES = 20_000


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds (user + system) of each thread of `pid`, by its id."""
    ticks = os.sysconf("SC_CLK_TCK")
    found: dict[int, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
        except OSError:
            continue  # a thread that ended meanwhile
        found[int(task.name)] = (int(fields[11]) + int(fields[12])) / ticks
    return found


def group_of(name: str) -> str:
    """A thread's group: the embedder's threads as one, the readers as one."""
    return re.sub(r"_\d+$", "", name)


class Load:
    """One benchmark's load on a server for a while; `finish` waits for it and counts its
    calls."""

    def __init__(
        self, kind: str, address: str, seconds: float, round_: int, recalls: list[Any]
    ) -> None:
        self.kind = kind
        self._recalls = recalls
        self._calls = 0
        self._failure: BaseException | None = None
        self._ghz: subprocess.Popen[str] | None = None
        self._thread: threading.Thread | None = None
        if kind == "append":
            self._ghz = subprocess.Popen(
                ghz_command(address, seconds=seconds, concurrency=32),
                stdout=subprocess.PIPE,
                text=True,
            )
        else:
            self._thread = threading.Thread(
                target=self._drive, args=(address, seconds, round_), daemon=True
            )
            self._thread.start()

    def _drive(self, address: str, seconds: float, round_: int) -> None:
        try:
            if self.kind == "transcript":
                latencies, _ = asyncio.run(
                    transcript_latency.run(address, 50, 1000.0, seconds, round_)
                )
                self._calls = len(latencies)
                return
            if self.kind == "recall":
                self._calls = recall_for(address, self._recalls, seconds, round_)
                return
            items = ingest_throughput.messages(INGEST_MESSAGES, random.Random(round_))
            until = time.monotonic() + seconds
            while time.monotonic() < until:
                _, stored = asyncio.run(ingest_throughput.ingest_rate(address, items, 1000, 2))
                self._calls += stored
        except BaseException as error:  # noqa: BLE001 - raised again by finish()
            self._failure = error

    def finish(self) -> int:
        """The calls (appends, finals, messages) the load made."""
        if self._ghz is not None:
            return int(summary(json.loads(self._ghz.communicate()[0]))["ok"])
        assert self._thread is not None
        self._thread.join()
        if self._failure is not None:
            raise self._failure
        return self._calls


def recall_for(address: str, requests: list[Any], seconds: float, round_: int) -> int:
    """Recall, one call after another until the time is up, through the requests from a place
    of each round's own; the calls made."""
    calls = 0
    until = time.monotonic() + seconds
    with grpc.insecure_channel(address) as channel:
        memory = md.SyncStubs(channel)
        while time.monotonic() < until:
            memory.memory.Recall(requests[(round_ * 7919 + calls) % len(requests)])
            calls += 1
    return calls


def built_for_recall(
    places: backends.Backends, backend: str, home: Path, args: argparse.Namespace
) -> tuple[list[Any], list[Any], bool]:
    """recall_latency.py's database, filled before the server opens it: its Recall requests,
    the owners whose prompt the server is to render, and whether it holds LoCoMo's text."""
    rng = random.Random(2027)
    chat = None if args.locomo is None else real_chat.Corpus.read(args.locomo)
    built = recall_latency.build(
        places,
        backend,
        home,
        (args.messages, args.memories),
        rng,
        chat_texts=None if chat is None else real_chat.ChatTexts(chat, rng),
    )
    if chat is not None:
        with places.migrated(backend, home) as connection:
            real_chat.embed_stored(connection, args.cache)
            real_chat.embed_memories(connection, args.cache)
        places.settle(home)
    owners = rng.sample(built["owners"], min(recall_latency.RENDERED_OWNERS, len(built["owners"])))
    questions = None if chat is None else chat.questions
    planned = recall_latency.recall_requests(rng, built["chats"], built["texts"], 2000, questions)
    return [request for _, _, request in planned], owners, chat is not None


def warm_for_recall(address: str, requests: list[Any], owners: list[Any], caught_up: bool) -> None:
    """As recall_latency.py before it measures: the owners' rows stored through the server,
    200 calls made, and (`caught_up`) every vector written."""
    with grpc.insecure_channel(address) as channel:
        memory = md.SyncStubs(channel)
        recall_latency.rendered(memory, owners)
        for request in requests[:200]:
            memory.memory.Recall(request)
        if caught_up:
            recall_latency.caught_up(memory)


def config_for(load: str, embeddings: str) -> str:
    """The server's config for `load`."""
    config = server_config.embeddings(embeddings)
    if load == "transcript":
        config += "[memoryd.realtime]\npersist_transcripts = true\n"
    return config


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--load", choices=("append", "transcript", "ingest", "recall"), default="append"
    )
    parser.add_argument("--seconds", type=float, default=10.0)
    server_config.add_embeddings_option(parser)
    parser.add_argument("--backend", default="sqlite", choices=backends.CHOICES)
    parser.add_argument("--flame", type=Path, help="also write py-spy's flame graph (SVG) here")
    parser.add_argument("--stacks", type=Path, help="also keep py-spy's collapsed stacks here")
    parser.add_argument("--messages", type=int, default=1_000_000, help="recall: the messages")
    parser.add_argument("--memories", type=int, default=100_000, help="recall: the rows")
    parser.add_argument("--locomo", type=Path, help="recall: LoCoMo's locomo10.json, embedded")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="recall: the vectors")
    args = parser.parse_args()
    py_spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if py_spy is None:
        sys.exit("py-spy is not installed: pip install py-spy")
    with (
        tempfile.TemporaryDirectory() as scratch,
        backends.started([args.backend], Path(scratch)) as places,
    ):
        home = Path(scratch) / "home"
        recalls: list[Any] = []
        owners: list[Any] = []
        embedded = False
        if args.load == "recall":
            recalls, owners, embedded = built_for_recall(places, args.backend, home, args)
        server = ServerProcess(
            home, config=config_for(args.load, args.embeddings), env=places.env(args.backend, home)
        ).start()
        raw = Path(scratch) / "profile.raw"
        try:
            pid = server.process.pid
            if args.load == "append":
                run_ghz(server.address, seconds=3, concurrency=32)  # warm-up
            elif args.load == "recall":
                warm_for_recall(
                    server.address, recalls, owners, embedded and args.embeddings == "on"
                )
            else:
                Load(args.load, server.address, 3, 0, recalls).finish()
            before = thread_cpu(pid)
            began = time.perf_counter()
            load = Load(args.load, server.address, args.seconds, 1, recalls)
            time.sleep(0.2)
            record = [py_spy, "record", "-p", str(pid), "--gil", "--threads", "-r"]
            record += [str(SAMPLE_RATE), "-d", str(int(args.seconds - 1))]
            subprocess.run([*record, "-f", "raw", "-o", str(raw)], check=True, capture_output=True)
            calls = max(load.finish(), 1)
            spent = time.perf_counter() - began
            after = thread_cpu(pid)
            if args.flame:
                # A second sampling of the same load for the picture (py-spy writes one format
                # a run); the figures come from the first.
                again = Load(args.load, server.address, args.seconds, 2, recalls)
                time.sleep(0.2)
                args.flame.parent.mkdir(parents=True, exist_ok=True)
                subprocess.run(
                    [*record, "-f", "flamegraph", "-o", str(args.flame)],
                    check=True,
                    capture_output=True,
                )
                again.finish()
        finally:
            server.stop()
        if args.stacks:
            shutil.copyfile(raw, args.stacks)
        names, own, whole = read_profile(raw)
    print(json.dumps(report(args, calls, spent, (before, after), (names, own, whole)), indent=2))
    return 0


def report(
    args: argparse.Namespace,
    calls: int,
    spent: float,
    cpu_at: tuple[dict[int, float], dict[int, float]],
    profile: tuple[dict[int, str], collections.Counter[str], collections.Counter[str]],
) -> dict[str, Any]:
    """The figures: CPU per call by thread group, and the profile's top frames."""
    before, after = cpu_at
    names, own, whole = profile
    cpu: dict[str, float] = {}
    for tid, seconds in after.items():
        group = group_of(names.get(tid, "unnamed (native)"))
        cpu[group] = cpu.get(group, 0.0) + seconds - before.get(tid, 0.0)
    samples = sum(own.values()) or 1
    return {
        "benchmark": "profile_server",
        "load": args.load,
        "backend": args.backend,
        "embeddings": args.embeddings,
        "calls": calls,
        "calls_per_second": round(calls / spent, 1),
        "cpu_us_per_call": {
            name: round(seconds / calls * 1e6, 1)
            for name, seconds in sorted(cpu.items(), key=lambda item: -item[1])
        },
        "cpu_us_per_call_total": round(sum(cpu.values()) / calls * 1e6, 1),
        "gil_samples": samples,
        "gil_self_top": {frame: f"{count / samples:.1%}" for frame, count in own.most_common(20)},
        "gil_inclusive_memoryd_top": dict(
            [
                (frame, f"{count / samples:.1%}")
                for frame, count in whole.most_common()
                if "memoryd/" in frame
            ][:25]
        ),
    }


def read_profile(
    raw: Path,
) -> tuple[dict[int, str], collections.Counter[str], collections.Counter[str]]:
    """py-spy's collapsed stacks: the thread names by id, each frame's own samples (at the top
    of a stack) and its inclusive ones."""
    names: dict[int, str] = {}
    own: collections.Counter[str] = collections.Counter()
    whole: collections.Counter[str] = collections.Counter()
    for line in raw.read_text(encoding="utf-8").splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        thread = THREAD.match(stack)
        if thread:
            names[int(thread.group(1))] = thread.group(2)
        own[frames[-1]] += int(count)
        for frame in set(frames[1:]):
            whole[frame] += int(count)
    return names, own, whole


if __name__ == "__main__":
    sys.exit(main())
