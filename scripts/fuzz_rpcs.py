"""Fuzz every unary RPC of a fresh memoryd server for a long time (make test runs a short one).

    python -m scripts.fuzz_rpcs [--examples 1500]   # per RPC: 35 unary RPCs x 1500 = 52,500 calls
                                [--backend postgres]

Requests are drawn from the message descriptors (tests/rpc_fuzz.py). Exits 1 on the first call
answered INTERNAL or UNKNOWN, leaking internals, or too large; prints a JSON summary (calls,
statuses, seconds) otherwise. Hypothesis shrinks a failure to a minimal request and prints it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import grpc
from hypothesis import HealthCheck, given, settings

from memoryd.testing.postgres import servers_on
from memoryd.testing.server_process import ServerProcess
from tests.rpc_fuzz import METHODS, Case, Target, cases
from tests.security.test_rpc_fuzz import seed_victim, victim_state


def fuzz(target: Target, method: str, examples: int) -> None:
    """Run `examples` calls of one RPC; raises (after shrinking) on the first broken one."""

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=cases(method))
    def run(case: Case) -> None:
        target.check(method, case)

    run()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=1500, help="calls per RPC")
    parser.add_argument("--backend", default="sqlite", choices=("sqlite", "postgres"))
    args = parser.parse_args()
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory() as folder,
        servers_on(args.backend, Path(folder) / "postgres"),
    ):
        home = Path(folder) / "home"
        server = ServerProcess(home).start()
        try:
            with grpc.insecure_channel(server.address) as channel:
                target = Target(channel, str(home))
                before = seed_victim(channel)
                for method in METHODS:
                    fuzz(target, method, args.examples)
                if victim_state(channel) != before:
                    print("another owner's rows changed", file=sys.stderr)
                    return 1
        finally:
            code = server.stop()
        if code != 0:
            print(server.output, file=sys.stderr)
            return 1
    print(
        json.dumps(
            {
                "backend": args.backend,
                "calls": target.calls,
                "statuses": dict(sorted(target.statuses.items())),
                "seconds": round(time.monotonic() - started, 1),
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
