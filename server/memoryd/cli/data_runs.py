"""What the data commands run (memoryd.cli.data_commands reads their command lines): backup,
restore, discard-replaced, log-name, migrate and check, on the database of `--home`. Imported
when one of them runs: the services it imports are a tenth of a second that every other
`memoryd` command would otherwise pay."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TextIO

from memoryd.cli.remote import EXIT_FAILED
from memoryd.cli.transfer_commands import Progress
from memoryd.config import data_storage
from memoryd.errors import MemorydError, StartupError
from memoryd.services import maintenance
from memoryd.storage import location
from memoryd.storage.location import DatabaseLocation
from memoryd.storage.postgres.settings import PostgresSettings


@dataclasses.dataclass(frozen=True, slots=True)
class _Where:
    """What a data command works on: the data directory and its database."""

    home: Path
    store: DatabaseLocation
    env: Mapping[str, str]


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO = sys.stdout) -> int:
    """Run a data command; the exit status."""
    os.umask(0o077)  # a backup holds everything the server holds
    try:
        home, storage = data_storage(env, home=args.home, config_path=args.config)
        where = _Where(home, location.store_settings(storage, home, env), env)
        if args.command != "restore":  # a restore may make it
            _check_home(home)
        command = RUNS.get(args.command, _check)
        return command(args, out, where)
    except (MemorydError, StartupError) as error:
        text = error.message if isinstance(error, MemorydError) else str(error)
        print(f"memoryd: {text}", file=sys.stderr)  # noqa: T201 - CLI output
        return EXIT_FAILED


def _backup(args: argparse.Namespace, out: TextIO, where: _Where) -> int:
    size = maintenance.backup(where.home, Path(args.path), where.store)
    return _say(
        args,
        out,
        {"backup": str(Path(args.path).resolve()), "bytes": size},
        f"backed up {where.home / maintenance.DATABASE} to {args.path} ({size:,} bytes)",
    )


def _restore(args: argparse.Namespace, out: TextIO, where: _Where) -> int:
    kept = maintenance.restore(where.home, Path(args.path), where.store)
    kept_as = (
        f"; the replaced database is kept as {kept} (it may hold data erased later: "
        "`memoryd discard-replaced` deletes it)"
        if kept
        else ""
    )
    return _say(
        args,
        out,
        {"restored": str(Path(args.path).resolve()), "kept": str(kept) if kept else None},
        f"restored {where.home / maintenance.DATABASE} from {args.path}{kept_as}",
    )


def _discard_replaced(args: argparse.Namespace, out: TextIO, where: _Where) -> int:
    removed = maintenance.discard_replaced(where.home)
    return _say(
        args,
        out,
        {"removed": [str(path) for path in removed]},
        "\n".join(f"removed {path}" for path in removed)
        or f"{where.home} holds no replaced database",
    )


def _log_name(args: argparse.Namespace, out: TextIO, where: _Where) -> int:
    named = maintenance.log_names(where.home, args.ids, where.store)
    return _say(args, out, named, "\n".join(f"{n}  {i}" for i, n in named.items()))


def _migrate(args: argparse.Namespace, out: TextIO, where: _Where) -> int:
    home = where.home
    dsn = args.dsn or where.env.get(args.dsn_env, "")
    if not dsn:
        raise StartupError(f"--dsn-env names {args.dsn_env}, which is not set (or empty)")
    target = PostgresSettings(dsn=dsn, pool_size=1, statement_timeout_ms=0)
    progress = Progress("migrate", sys.stderr)
    finished = False
    try:
        copied = maintenance.migrate(
            home, where.store, target, lambda done, total: _advance(progress, done, total)
        )
        finished = True
    finally:
        progress.close(finished=finished)
    variable = args.dsn_env or "MEMORYD_DSN"
    return _say(
        args,
        out,
        {
            "target": target.target,
            "lines": copied.lines,
            "records": {kind.value: count for kind, count in copied.records.items()},
        },
        f"copied {max(copied.lines - 1, 0):,} records into {target.target}; to serve from it, "
        f'set [memoryd.storage] backend = "postgres" and dsn_env = "{variable}" (with '
        f"{variable} holding the connection string), then start memoryd; {home / 'memory.db'} "
        "is left as it was",
    )


def _advance(progress: Progress, done: int, total: int) -> None:
    progress.total(total)
    progress.advance(done - progress.done)


def _check_home(home: Path) -> None:
    if not home.is_dir():
        raise StartupError(
            f"there is no data directory at {home}: pass the server's --home (or set "
            "MEMORYD_HOME), or start the server once to create it"
        )


def _check(args: argparse.Namespace, out: TextIO, where: _Where) -> int:
    home = where.home
    report = maintenance.check(home, where.store)
    if args.json:
        document = {"healthy": report.healthy, "home": str(home), **dataclasses.asdict(report)}
        out.write(json.dumps(document, indent=2) + "\n")
    else:
        out.write(
            f"{home}: schema {report.schema_version}, {report.messages:,} messages, "
            f"{report.memories:,} memory rows, {report.prompt_files} prompt files\n"
        )
        for model in report.embedding_models:
            out.write(
                f"vectors of {model['model']} ({model['provider']}, {model['dimension']} "
                f"dimensions): {model['embedded_messages']:,} messages and "
                f"{model['embedded_memories']:,} rows embedded, "
                f"{model['waiting_messages']:,} and {model['waiting_memories']:,} waiting\n"
            )
        for problem in report.problems:
            out.write(f"problem: {problem}\n")
        for note in report.notes:
            out.write(f"note: {note}\n")
        out.write("healthy\n" if report.healthy else f"{len(report.problems)} problem(s)\n")
    return 0 if report.healthy else EXIT_FAILED


# What each data command runs (`check`: the rest).
RUNS: dict[str, Callable[[argparse.Namespace, TextIO, _Where], int]] = {
    "backup": _backup,
    "restore": _restore,
    "discard-replaced": _discard_replaced,
    "log-name": _log_name,
    "migrate": _migrate,
}


def _say(args: argparse.Namespace, out: TextIO, document: Mapping[str, object], text: str) -> int:
    out.write((json.dumps(document, indent=2) if args.json else text) + "\n")
    return 0
