"""Kill memoryd with SIGKILL under mixed load, round after round, and verify what survived.

    python -m scripts.crash_rounds [--rounds 20] [--seed N] [--backend postgres]

Each round starts the server on the same data directory, verifies everything acknowledged so
far, runs appends, turns (with background reviews against the shipped fake model), stores,
clears and searches, and kills the server at a random moment; the database must pass SQLite's
and FTS5's integrity checks (on PostgreSQL, `memoryd check`'s) after every kill
(tests/crash_harness.py). Prints a JSON summary; exits 1 (with the seed, to replay the run) on
the first broken promise.
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


async def run(rounds: int, seed: int, backend: str) -> dict[str, object]:
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory() as folder,
        servers_on(backend, Path(folder) / "postgres"),
        FakeModel(responder=review_answer) as model,
    ):
        harness = CrashHarness(Path(folder) / "home", model, seed)
        for _ in range(rounds):
            await harness.round()
        await harness.finish()
        ledger = harness.ledger
        return {
            "backend": backend,
            "seed": seed,
            "rounds": rounds,
            "calls": ledger.calls,
            "cut_by_a_kill": ledger.failures,
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
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else secrets.randbelow(2**32)
    try:
        summary = asyncio.run(run(args.rounds, seed, args.backend))
    except AssertionError:
        print(f"broken after a kill; replay with --seed {seed}", file=sys.stderr)
        raise
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
