"""What committing to an unkeyed write costs: AppendMessages without a client_message_id (not
safe to repeat: memoryd.api.commitment sends its response headers before a stop could cut it)
against the same append with one on every message (safe to repeat), on one memoryd, in
alternating rounds. The headers of an unkeyed append went out before it ran, at least 110 to
150 µs of CPU a call; now they go with its answer unless the server is stopping, and the two
arms cost the same but for the keyed arm's key lookups.

    python bench/commit_headers_cost.py [--seconds 5] [--rounds 4] [--concurrency 32]
                                        [--embeddings off|on]

ghz's load as append_throughput.py's (32 callers, one message a call, each caller its own
conversation); the server's CPU per answered call is read from /proc around each round. The
keyed arm does more of memoryd's own work (each key is looked up), so what the unkeyed arm costs
more is what committing to it costs at least. Embeddings are off by default: the embedder's CPU
would hide the difference in its noise.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import server_config
from append_throughput import DATA, cpu_seconds, run_ghz, summary

from memoryd.testing.server_process import ServerProcess


def keyed(data: str) -> str:
    """The same append with a client_message_id on every message (ghz makes each unique)."""
    request = json.loads(data)
    for message in request["messages"]:
        message["client_message_id"] = "{{.WorkerID}}-{{.RequestNumber}}-{{.UUID}}"
    return json.dumps(request)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=32)
    server_config.add_embeddings_option(parser, default="off")
    args = parser.parse_args()
    config = server_config.embeddings(args.embeddings)
    arms = {"unkeyed": DATA, "keyed": keyed(DATA)}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in arms}
    with tempfile.TemporaryDirectory() as scratch:
        server = ServerProcess(Path(scratch) / "home", config=config).start()
        try:
            run_ghz(server.address, seconds=2, concurrency=args.concurrency)  # warm-up
            for round_ in range(args.rounds):
                order = list(arms.items())
                if round_ % 2:
                    order.reverse()
                for name, data in order:
                    before = cpu_seconds(server.process.pid)
                    report = summary(
                        run_ghz(
                            server.address,
                            seconds=args.seconds,
                            concurrency=args.concurrency,
                            data=data,
                        )
                    )
                    spent = cpu_seconds(server.process.pid) - before
                    runs[name].append(
                        {"rps": report["rps"], "cpu_us": spent / max(report["ok"], 1) * 1e6}
                    )
        finally:
            server.stop()
    figures = {
        name: {
            "rps_median": round(statistics.median(run["rps"] for run in rows), 1),
            "cpu_us_per_call_median": round(statistics.median(run["cpu_us"] for run in rows), 1),
        }
        for name, rows in runs.items()
    }
    more = figures["unkeyed"]["cpu_us_per_call_median"] - figures["keyed"]["cpu_us_per_call_median"]
    print(
        json.dumps(
            {
                "benchmark": "commit_headers_cost",
                "embeddings": args.embeddings,
                "rounds": args.rounds,
                "arms": figures,
                "unkeyed_cpu_us_per_call_more": round(more, 1),
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
