"""Check that make test's PostgreSQL run called every function of memoryd's storage that runs on
PostgreSQL.

    python scripts/storage_exercised.py CALLS

`make test` runs on PostgreSQL only the tests that exercise storage (every test that uses the
shared server, and the modules marked `storage`), with memoryd.testing.exercised recording the
storage functions each process calls into CALLS (and CALLS@<test module> per module). This lists
every function and method written in memoryd.storage, and fails, naming them, on those the run
never called, unless NOT_ON_POSTGRES says why PostgreSQL never runs them. Of an entry of
NOT_ON_POSTGRES that the run did call, it says so without failing (a test moving data between
the backends runs SQLite's code in the PostgreSQL run too).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memoryd.testing.exercised import every_function

# What PostgreSQL never runs, and why. (The PostgreSQL run calls much of SQLite's code too: a
# test moving data between the backends opens a SQLite database; so nothing is exempt by module.)
NOT_ON_POSTGRES: dict[str, str] = {
    "memoryd.storage.database:Database.": "SQLite's database (PostgreSQL's: storage.postgres)",
    "memoryd.storage.connection:": "SQLite's connections, their pragmas and functions",
    "memoryd.storage.changes:DatabaseChanges.": "SQLite's commit count (PRAGMA data_version)",
    "memoryd.storage.background_lock:FileLock.": "SQLite's background lock is an flock",
    "memoryd.storage.maintenance:backup": "SQLite's online backup (PostgreSQL's is pg_dump)",
    "memoryd.storage.maintenance:_remove": "the leftovers of SQLite's backup copy",
    "memoryd.storage.maintenance:snapshot": "SQLite's file copied for a check (PostgreSQL's "
    "check reads a REPEATABLE READ snapshot)",
    "memoryd.storage.sqlite_engine:": "SQLite's engine (PostgreSQL's: storage.postgres.engine)",
    "memoryd.storage.fts5_words:": "SQLite's word index, FTS5 (PostgreSQL's: a tsvector column)",
    "memoryd.storage.fts5_scores:": "FTS5's bm25 with the counts a search read (SQLite's)",
    "memoryd.storage.search_reads:_in_scope": "FTS5's index-first read of a large scope",
    "memoryd.storage.postgres.words:TsvectorWords.best_messages": (
        "the index-first read of a scoped index (FTS5's); PostgreSQL's is never asked"
    ),
    "memoryd.storage.scrub:truncate_wal": "SQLite's WAL, truncated after an erasure",
    "memoryd.storage.write_queue:": "SQLite's workers' writers queue on an flock",
    "memoryd.storage.writer:Writer.queue_writes": "SQLite's workers' writers queue on an flock",
    "memoryd.storage.compaction_store:set_token_counts": (
        "counts tokens of messages older than counting (SQLite's migration 0006); PostgreSQL's "
        "schema always counted (on SQLite: tests/review/test_compaction.py)"
    ),
    "memoryd.storage.resource_store:set_path": (
        "moves a prompt file recorded at an old path, which only SQLite's older files hold (on "
        "SQLite: tests/history/test_identifier_paths.py)"
    ),
}
# Called by no test on either backend yet: said at every run, until a test calls them.
NOT_TESTED: dict[str, str] = {
    "memoryd.storage.compaction_store:renew": "a compaction's claim renewed while it outlasts it",
    "memoryd.storage.review_store:clear_pending": "a due conversation with nothing left to read",
}


def called(calls: Path) -> set[str]:
    """Every function the run's processes recorded, in CALLS and its per-module files."""
    found: set[str] = set()
    for path in [calls, *calls.parent.glob(f"{calls.name}@*")]:
        if path.is_file():
            found.update(path.read_text(encoding="utf-8").split())
    return found


def exempt(name: str) -> str | None:
    """Why PostgreSQL never runs `name`, if it never does (or why no test does yet)."""
    listed = {**NOT_ON_POSTGRES, **NOT_TESTED}
    return next((why for key, why in listed.items() if name.startswith(key)), None)


def check(every: list[str], ran: set[str]) -> tuple[list[str], list[str]]:
    """(functions never called and not exempt, exempt functions that were called anyway)."""
    missing = [name for name in every if name not in ran and exempt(name) is None]
    stale = [name for name in every if name in ran and exempt(name) is not None]
    return missing, stale


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("calls", type=Path)
    args = parser.parse_args()
    ran = called(args.calls)
    if not ran:
        print(f"nothing was recorded in {args.calls}: was the run recording?", file=sys.stderr)
        return 1
    every = every_function()
    missing, stale = check(every, ran)
    for name in missing:
        print(f"never called on PostgreSQL: {name}", file=sys.stderr)
    for name in stale:
        print(f"note: called in the PostgreSQL run, yet listed as not: {name}")
    for name, why in NOT_TESTED.items():
        if name not in ran:
            print(f"warning: no test calls {name} ({why})")
    exempted = sum(1 for name in every if exempt(name) is not None)
    print(
        f"storage functions called on PostgreSQL: {len(every) - exempted - len(missing)} of "
        f"{len(every) - exempted} ({exempted} SQLite's own)"
    )
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
