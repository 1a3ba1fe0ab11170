"""The `memoryd` command.

memoryd serve [--config PATH] [--listen HOST:PORT] [--home DIR]
memoryd memory list|show|forget|restore ...     (calls a running server; see cli/remote)
memoryd resource list|history|show|diff|rollback ...
memoryd compact|context --conversation CHANNEL:CHAT[:THREAD] ...   (CompactionService)
memoryd export [--agent A] [--owner O] [FILE]; memoryd import FILE   (see transfer_commands)
memoryd purge-owner AGENT OWNER [--yes]
memoryd search QUERY [--conversation C] [--mode M]; memoryd embeddings; memoryd reindex
                                                 (see search_commands)
memoryd health [--address A]                     (gRPC health, for probes; see health_command)
memoryd backup PATH | restore PATH | discard-replaced | check | log-name ID...  [--home DIR]
memoryd migrate --to postgres --dsn DSN | --dsn-env VAR  (see data_commands)
memoryd setup [...]; memoryd config show [--json]   (see setup_commands)
memoryd mcp [--stdio | --listen HOST:PORT]   (MCP tools and resources; see mcp_command)
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from memoryd import __version__
from memoryd.cli import (
    conversation_commands,
    data_commands,
    health_command,
    mcp_command,
    memory_commands,
    remote,
    resource_commands,
    search_commands,
    setup_commands,
    transfer_commands,
)
from memoryd.config import load_settings
from memoryd.config.loading import config_document
from memoryd.config.reloading import Running, Snapshot
from memoryd.config.secrets import Redactor
from memoryd.data_directory import inherit_lock
from memoryd.errors import StartupError
from memoryd.logs import LogPipeline

EXIT_USAGE = 2
EXIT_STARTUP = 1


def build_parser() -> argparse.ArgumentParser:
    """The command-line grammar."""
    parser = argparse.ArgumentParser(
        prog="memoryd", description="Long-term memory of conversational agents, over gRPC."
    )
    parser.add_argument("--version", action="version", version=f"memoryd {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser("serve", help="run the gRPC server")
    serve.add_argument(
        "--config", metavar="PATH", help="TOML config file (default <home>/config.toml)"
    )
    serve.add_argument(
        "--listen", metavar="HOST:PORT", help="address to listen on (127.0.0.1:50051)"
    )
    serve.add_argument("--home", metavar="DIR", help="data directory (default ~/.memoryd)")
    serve.add_argument(
        "--workers",
        metavar="N",
        type=int,
        help="server processes sharing the address and the store (default 1; "
        "memoryd.server.workers)",
    )
    # Given by `serve --workers N` to its own workers (memoryd.supervisor).
    serve.add_argument("--worker-of", metavar="ROLE", help=argparse.SUPPRESS)
    serve.add_argument(
        "--insecure",
        action="store_true",
        help="serve a non-loopback address without tokens (anyone who can reach it may read "
        "and erase everything), or with tokens but without TLS (they cross the network in clear)",
    )
    memory_commands.add_commands(commands)
    conversation_commands.add_commands(commands)
    resource_commands.add_commands(commands)
    transfer_commands.add_commands(commands, remote.common_options)
    search_commands.add_commands(commands, remote.common_options)
    health_command.add_commands(commands, remote.common_options)
    data_commands.add_commands(commands)
    setup_commands.add_commands(commands)
    mcp_command.add_commands(commands)
    return parser


def main(
    argv: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    out: TextIO | None = None,
) -> int:
    """Run the command; returns the process exit code. `env` (default os.environ) is where
    settings and tokens are read from, `out` (default stdout) where results are written;
    refusals and progress go to stderr. A file or folder that cannot be read or written ends it
    with one line saying which, never a traceback."""
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    try:
        return _client_command(
            args, os.environ if env is None else env, sys.stdout if out is None else out
        )
    except OSError as error:
        print(f"memoryd {args.command}: {file_error(error)}", file=sys.stderr)  # noqa: T201
        return EXIT_STARTUP


def file_error(error: OSError) -> str:
    """An OSError as one line: what went wrong, and with which path."""
    what = error.strerror or type(error).__name__
    return f"{what}: {error.filename}" if error.filename else f"{what}: {error}"


def _worker_arguments(args: argparse.Namespace) -> list[str]:
    """The supervisor's own command line, as its workers get it (it adds --listen with the port
    it holds, and --worker-of)."""
    arguments = ["serve"]
    for option, value in (("--config", args.config), ("--home", args.home)):
        if value is not None:
            arguments += [option, value]
    return [*arguments, "--insecure"] if args.insecure else arguments


def _client_command(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    if args.command in (
        "memory",
        "resource",
        "compact",
        "context",
        "export",
        "import",
        "purge-owner",
        *search_commands.COMMANDS,
        *health_command.COMMANDS,
    ):
        return remote.run(args, env, out)
    if args.command in data_commands.COMMANDS:
        return data_commands.run(args, env, out)
    if args.command in mcp_command.COMMANDS:
        return mcp_command.run(args, env, out)
    if args.command in ("setup", "config"):
        code: int = args.run(args, env, out)
        return code
    return EXIT_USAGE  # pragma: no cover - argparse refuses unknown commands


def _serve(args: argparse.Namespace) -> int:
    from memoryd.server import serve  # noqa: PLC0415 - grpc loads only for the server
    from memoryd.serving.token_reloads import SettingsPipe  # noqa: PLC0415
    from memoryd.serving.worker_role import WorkerRole  # noqa: PLC0415
    from memoryd.supervisor import supervise  # noqa: PLC0415

    env = os.environ
    try:
        worker = WorkerRole.parse(args.worker_of) if args.worker_of else None
        if worker is None:
            snapshot = Snapshot.of(config_document(env, config_path=args.config, home=args.home))
        else:
            # Given the lock first, then the file as its supervisor read it (--home is the
            # supervisor's: memoryd.config.reloading).
            inherit_lock(Path(args.home or "").expanduser(), worker.lock_fd)
            snapshot = SettingsPipe(worker.settings_fd).first()
        settings = load_settings(
            env,
            config_path=args.config,
            home=args.home,
            listen=args.listen,
            document=snapshot.document,
        )
        server = settings.server
        if args.insecure:
            server = dataclasses.replace(server, insecure=True)
        if args.workers is not None:
            server = dataclasses.replace(server, workers=args.workers)
            server.validate()
            settings.http.check_workers(args.workers)
            settings.metrics.check_workers(args.workers)
        settings = dataclasses.replace(settings, server=server)
    except StartupError as error:
        print(f"memoryd: {error}", file=sys.stderr)  # noqa: T201 - the CLI's own output
        return EXIT_USAGE
    running = Running(snapshot, settings, env, args.config, args.home, args.listen)
    secrets = Redactor.of_settings(settings, env)
    logs = LogPipeline(
        settings.server.log_level,
        settings.server.log_format,
        fields={"worker": worker.index} if worker else None,
        redact=secrets.redact if secrets else None,
    )
    try:
        if worker is None and settings.server.workers > 1:
            code = supervise(running, _worker_arguments(args))
            logs.stop()
            return code
        asyncio.run(serve(settings, rpc_log=logs.rpc, env=env, worker=worker, running=running))
    except StartupError as error:
        logs.stop()
        print(f"memoryd: {secrets.redact(str(error))}", file=sys.stderr)  # noqa: T201
        return EXIT_STARTUP
    except KeyboardInterrupt:  # a second Ctrl-C during shutdown
        pass
    logs.stop()
    return 0
