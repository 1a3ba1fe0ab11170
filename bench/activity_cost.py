"""What counting activity costs a write: appends of one message a transaction, as the writer
commits them, into a database with the activity triggers and into the same schema without them.

    python bench/activity_cost.py [--messages 2000] [--rounds 5]
                                  [--backend sqlite] [--backend postgres]

Each round appends `--messages` messages, one a transaction (the worst case: a batch shares its
transaction's cost), through memoryd's own append (storage.history_writes.append_batch), to
conversations drawn from 50, first into one database and then into the other, alternating so
both see the same machine noise. The figure is each database's median time a message and
their ratio. The triggers are dropped from the second database only; its tables stay.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import backends

from memoryd.domain.conversation import ConversationKey
from memoryd.domain.messages import NewMessage, Role, Trust
from memoryd.storage import history_writes
from memoryd.storage.sql import write_transaction
from memoryd.storage.transaction import Transaction

TRIGGERS = {
    "sqlite": (
        "activity_after_message",
        "activity_after_review_run",
        "activity_after_review_run_update",
        "activity_after_model_call",
    ),
    "postgres": (
        "activity_after_messages ON messages",
        "activity_after_review_run ON review_runs",
        "activity_after_review_run_update ON review_runs",
        "activity_after_model_call ON model_calls",
    ),
}


def append(connection: Transaction, count: int, start: int) -> float:
    """Seconds a message for `count` appends of one message a transaction."""
    now = dt.datetime.now(dt.UTC)
    began = time.perf_counter()
    for index in range(start, start + count):
        key = ConversationKey("main", f"owner-{index % 50}", "telegram", f"c{index % 50}", "root")
        message = NewMessage(
            sender="ada",
            role=Role.USER,
            kind="chat_message",
            content=f"message {index} about the ferry on Sunday",
            metadata_json="{}",
            client_message_id=None,
            created_at=None,
            trust=Trust.OPERATOR,
            tokens=8,
        )
        with write_transaction(connection):
            history_writes.append_batch(
                connection, [history_writes.AppendRequest(key, (message,), now)]
            )
    return (time.perf_counter() - began) / count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--backend", action="append", choices=backends.CHOICES)
    args = parser.parse_args()
    chosen = args.backend or ["sqlite"]
    results = {}
    with (
        tempfile.TemporaryDirectory() as scratch,
        backends.started(chosen, Path(scratch)) as places,
    ):
        for backend in chosen:
            homes = {name: Path(scratch) / f"{backend}-{name}" for name in ("counted", "uncounted")}
            with (
                places.migrated(backend, homes["counted"]) as counted,
                places.migrated(backend, homes["uncounted"]) as uncounted,
            ):
                with write_transaction(uncounted):
                    for trigger in TRIGGERS[backend]:
                        uncounted.execute(f"DROP TRIGGER {trigger}")
                seen: dict[str, list[float]] = {"counted": [], "uncounted": []}
                for round_number in range(args.rounds):
                    start = round_number * args.messages
                    seen["counted"].append(append(counted, args.messages, start))
                    seen["uncounted"].append(append(uncounted, args.messages, start))
            medians = {name: statistics.median(times) * 1e6 for name, times in seen.items()}
            results[backend] = {
                "us_per_message": {name: round(value, 1) for name, value in medians.items()},
                "ratio": round(medians["counted"] / medians["uncounted"], 3),
            }
            print(backend, results[backend], file=sys.stderr)
    print(json.dumps({"messages": args.messages, "rounds": args.rounds, **results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
