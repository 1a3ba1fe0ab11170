"""Kill memoryd with SIGKILL under mixed load, round after round, and verify what survived.

    python -m scripts.crash_rounds [--rounds 20] [--seed N] [--backend postgres]
                                   [--workers 2] [--cut-connections]

Each round starts the server on the same data directory, verifies everything acknowledged so
far, runs appends, turns (with background reviews against the shipped fake model), stores,
clears and searches, and kills the server at a random moment; the database must pass SQLite's
and FTS5's integrity checks (on PostgreSQL, `memoryd check`'s) after every kill
(tests/crash_harness.py). With `--workers 2` the server runs two workers and a round kills one
of them first, then the rest; with `--cut-connections` (PostgreSQL) PostgreSQL ends every
connection of memoryd once per round before the kill. Prints a JSON summary; exits 1 (with
the seed, to replay the run) on the first broken promise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
import tempfile
import time
from pathlib import Path

from memoryd.testing.fake_model import FakeModel
from memoryd.testing.postgres import servers_on
from tests.crash_harness import CrashHarness, review_answer


async def run(
    rounds: int, seed: int, backend: str, *, workers: int, cut_connections: bool
) -> dict[str, object]:
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory() as folder,
        servers_on(backend, Path(folder) / "postgres"),
        FakeModel(responder=review_answer) as model,
    ):
        harness = CrashHarness(
            Path(folder) / "home",
            model,
            seed,
            workers=workers,
            cut_connections=cut_connections,
        )
        for _ in range(rounds):
            await harness.round()
        await harness.finish()
        ledger = harness.ledger
        return {
            "backend": backend,
            "workers": workers,
            "seed": seed,
            "rounds": rounds,
            "calls": ledger.calls,
            "cut_by_a_kill": ledger.failures,
            "connection_cuts": ledger.connection_cuts,
            "appends_acknowledged": sum(len(acked) for acked in ledger.appended.values()),
            "imported_acknowledged": sum(len(acked) for acked in ledger.ingested.values()),
            "transcript_finals_acknowledged": sum(len(f) for f in ledger.spoken.values()),
            "stores_acknowledged": len(ledger.acked_values),
            "clears_acknowledged": len(ledger.windows),
            "model_calls": len(model.requests),
            "seconds": round(time.monotonic() - started, 1),
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=None, help="replay a run")
    parser.add_argument("--backend", default="sqlite", choices=("sqlite", "postgres"))
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument(
        "--cut-connections", action="store_true", help="PostgreSQL ends memoryd's connections"
    )
    args = parser.parse_args()
    if args.cut_connections and args.backend != "postgres":
        parser.error("--cut-connections needs --backend postgres")
    seed = args.seed if args.seed is not None else secrets.randbelow(2**32)
    try:
        summary = asyncio.run(
            run(
                args.rounds,
                seed,
                args.backend,
                workers=args.workers,
                cut_connections=args.cut_connections,
            )
        )
    except AssertionError:
        print(f"broken after a kill; replay with --seed {seed}", file=sys.stderr)
        raise
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
