"""Where AppendMessages' CPU goes: each thread's CPU per call, and a py-spy profile of what holds
the interpreter lock, under ghz's load (32 callers, one message a call, as append_throughput.py).

    python bench/profile_append.py [--seconds 10] [--embeddings on|off] [--backend sqlite]
                                   [--flame docs/profiles/append.svg]

CPU is read from /proc for every thread of the server before and after the load, and named by
the thread names py-spy reports (memoryd names its threads: memoryd-writer, memoryd-embed_0,
...); the event loop is MainThread, gRPC's poller `Thread-1 (_poll_wrapper)`. py-spy samples
only the thread holding the interpreter lock (`--gil`): what every other Python thread waits
for. Native work that lets the lock go (ONNX inference, SQLite's own C, tiktoken) shows in the
threads' CPU, not in the profile. Calls counted are ghz's OK answers. py-spy slows what it
samples (it stops the process 100 times a second), so the calls per second here are lower
than append_throughput.py's; the shares are what this is for.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import backends
from append_throughput import ghz_command, run_ghz, summary

from memoryd.testing.server_process import ServerProcess

SAMPLE_RATE = 100
# The first frame of a stack of `py-spy record --threads`: "thread (TID): NAME".
THREAD = re.compile(r"^thread \((\d+)\): ([^;]+)")


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--embeddings", choices=("on", "off"), default="on")
    parser.add_argument("--backend", default="sqlite", choices=backends.CHOICES)
    parser.add_argument("--flame", type=Path, help="also write py-spy's flame graph (SVG) here")
    args = parser.parse_args()
    py_spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if py_spy is None:
        sys.exit("py-spy is not installed: pip install py-spy")
    config = '[memoryd.search]\nembeddings = "off"\n' if args.embeddings == "off" else ""
    with (
        tempfile.TemporaryDirectory() as scratch,
        backends.started([args.backend], Path(scratch)) as places,
    ):
        home = Path(scratch) / "home"
        server = ServerProcess(home, config=config, env=places.env(args.backend, home)).start()
        raw = Path(scratch) / "profile.raw"
        try:
            pid = server.process.pid
            run_ghz(server.address, seconds=3, concurrency=args.concurrency)  # warm-up
            before = thread_cpu(pid)
            load = subprocess.Popen(
                ghz_command(server.address, seconds=args.seconds, concurrency=args.concurrency),
                stdout=subprocess.PIPE,
                text=True,
            )
            time.sleep(0.2)
            record = [py_spy, "record", "-p", str(pid), "--gil", "--threads", "-r"]
            record += [str(SAMPLE_RATE), "-d", str(int(args.seconds - 1))]
            subprocess.run([*record, "-f", "raw", "-o", str(raw)], check=True, capture_output=True)
            report = summary(json.loads(load.communicate()[0]))
            after = thread_cpu(pid)
            if args.flame:
                # A second sampling of the same load for the picture (py-spy writes one format
                # a run); the figures come from the first.
                again = subprocess.Popen(
                    ghz_command(server.address, seconds=args.seconds, concurrency=args.concurrency),
                    stdout=subprocess.PIPE,
                    text=True,
                )
                time.sleep(0.2)
                args.flame.parent.mkdir(parents=True, exist_ok=True)
                subprocess.run(
                    [*record, "-f", "flamegraph", "-o", str(args.flame)],
                    check=True,
                    capture_output=True,
                )
                again.communicate()
        finally:
            server.stop()
        names, own, whole = read_profile(raw)
    calls = max(int(report["ok"]), 1)
    cpu: dict[str, float] = {}
    for tid, seconds in after.items():
        group = group_of(names.get(tid, "unnamed (native)"))
        cpu[group] = cpu.get(group, 0.0) + seconds - before.get(tid, 0.0)
    samples = sum(own.values()) or 1
    print(
        json.dumps(
            {
                "benchmark": "profile_append",
                "backend": args.backend,
                "embeddings": args.embeddings,
                "calls": calls,
                "calls_per_second": round(report["rps"], 1),
                "cpu_us_per_call": {
                    name: round(seconds / calls * 1e6, 1)
                    for name, seconds in sorted(cpu.items(), key=lambda item: -item[1])
                },
                "cpu_us_per_call_total": round(sum(cpu.values()) / calls * 1e6, 1),
                "gil_samples": samples,
                "gil_self_top": {
                    frame: f"{count / samples:.1%}" for frame, count in own.most_common(20)
                },
                "gil_inclusive_memoryd_top": dict(
                    [
                        (frame, f"{count / samples:.1%}")
                        for frame, count in whole.most_common()
                        if "memoryd/" in frame
                    ][:25]
                ),
            },
            indent=2,
        )
    )
    return 0


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
