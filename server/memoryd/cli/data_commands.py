"""`memoryd backup PATH`, `restore PATH`, `discard-replaced`, `check` and `migrate`: the data
directory itself.

They work on the database of `--home` (as `serve` finds it), not through a server. A backup
and a check run while a server is serving; a restore and a migration refuse to while one holds
the directory. `migrate --to postgres --dsn DSN` copies the SQLite database into an empty
PostgreSQL (as an export imported there), with progress.
`check` exits 0 when the data is healthy and 1 when it is not; `--json` prints the report.

This module reads their command lines; what they run is memoryd.cli.data_runs, imported when one
of them runs (every `memoryd` command reads the command line).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any, TextIO


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
    migrate = _command(
        commands, "migrate", "copy the SQLite database into an empty PostgreSQL, with progress"
    )
    migrate.add_argument("--to", required=True, choices=["postgres"], help="the new backend")
    target = migrate.add_mutually_exclusive_group(required=True)
    target.add_argument("--dsn", help="PostgreSQL's connection string")
    target.add_argument(
        "--dsn-env", metavar="VAR", help="the variable holding it (keeps a password off ps)"
    )


def _command(commands: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(name, help=help_text)
    parser.add_argument("--home", metavar="DIR", help="data directory (default ~/.memoryd)")
    parser.add_argument("--config", metavar="PATH", help="TOML config file")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(run=run)
    return parser


# Every data command's name (the CLI's dispatch sends these here).
COMMANDS = frozenset({"backup", "restore", "discard-replaced", "log-name", "migrate", "check"})


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO = sys.stdout) -> int:
    """Run a data command; the exit status."""
    from memoryd.cli import data_runs  # noqa: PLC0415 - see the docstring

    return data_runs.run(args, env, out)
