"""`memoryd backup PATH`, `restore PATH`, `discard-replaced` and `check`: the data directory
itself.

They work on the database file of `--home` (as `serve` finds it), not through a server. A backup
and a check run while a server is serving; a restore refuses to while one holds the directory.
`check` exits 0 when the data is healthy and 1 when it is not; `--json` prints the report.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from memoryd.cli.remote import EXIT_FAILED
from memoryd.config import data_home
from memoryd.errors import MemorydError, StartupError
from memoryd.services import maintenance


def add_commands(commands: Any) -> None:
    """Add `backup`, `restore` and `check` to the top-level parser."""
    backup = _command(commands, "backup", "copy the database while the server serves")
    backup.add_argument("path", help="the backup file to write (created 0600)")
    restore = _command(commands, "restore", "replace the database with a checked backup")
    restore.add_argument("path", help="the backup file")
    _command(
        commands,
        "discard-replaced",
        "delete the databases restore replaced (they may hold erased data)",
    )
    _command(commands, "check", "check the data: integrity, indexes, orphans, prompt files")
    names = _command(
        commands, "log-name", 'what hashed log lines call these ids (log_identifiers = "hashed")'
    )
    names.add_argument("ids", nargs="+", metavar="ID", help="an agent, owner or scope id")


def _command(commands: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(name, help=help_text)
    parser.add_argument("--home", metavar="DIR", help="data directory (default ~/.memoryd)")
    parser.add_argument("--config", metavar="PATH", help="TOML config file")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO = sys.stdout) -> int:
    """Run a data command; the exit status."""
    os.umask(0o077)  # a backup holds everything the server holds
    try:
        home = data_home(env, home=args.home, config_path=args.config)
        if args.command != "restore":  # a restore may make it
            _check_home(home)
        if args.command == "backup":
            size = maintenance.backup(home, Path(args.path))
            return _say(
                args,
                out,
                {"backup": str(Path(args.path).resolve()), "bytes": size},
                f"backed up {home / maintenance.DATABASE} to {args.path} ({size:,} bytes)",
            )
        if args.command == "restore":
            kept = maintenance.restore(home, Path(args.path))
            where = (
                f"; the replaced database is kept as {kept} (it may hold data erased later: "
                "`memoryd discard-replaced` deletes it)"
                if kept
                else ""
            )
            return _say(
                args,
                out,
                {"restored": str(Path(args.path).resolve()), "kept": str(kept) if kept else None},
                f"restored {home / maintenance.DATABASE} from {args.path}{where}",
            )
        if args.command == "discard-replaced":
            removed = maintenance.discard_replaced(home)
            return _say(
                args,
                out,
                {"removed": [str(path) for path in removed]},
                "\n".join(f"removed {path}" for path in removed)
                or f"{home} holds no replaced database",
            )
        if args.command == "log-name":
            named = maintenance.log_names(home, args.ids)
            return _say(args, out, named, "\n".join(f"{n}  {i}" for i, n in named.items()))
        return _check(args, out, home)
    except (MemorydError, StartupError) as error:
        text = error.message if isinstance(error, MemorydError) else str(error)
        print(f"memoryd: {text}", file=sys.stderr)  # noqa: T201 - CLI output
        return EXIT_FAILED


def _check_home(home: Path) -> None:
    if not home.is_dir():
        raise StartupError(
            f"there is no data directory at {home}: pass the server's --home (or set "
            "MEMORYD_HOME), or start the server once to create it"
        )


def _check(args: argparse.Namespace, out: TextIO, home: Path) -> int:
    report = maintenance.check(home)
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


def _say(args: argparse.Namespace, out: TextIO, document: Mapping[str, object], text: str) -> int:
    out.write((json.dumps(document, indent=2) if args.json else text) + "\n")
    return 0
