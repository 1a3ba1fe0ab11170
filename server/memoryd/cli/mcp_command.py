"""`memoryd mcp [--stdio | --listen HOST:PORT]`: memoryd's memory as an MCP server.

A client of the memoryd at `--address` (default $MEMORYD_ADDRESS, else 127.0.0.1:50051), with the
CLI's token ($MEMORYD_TOKEN or the configured token file) and TLS ($MEMORYD_TLS_*). `--agent`,
`--owner` and `--conversation` are what a tool call works on when it names none (see
memoryd.mcp_bridge). With `--listen`, streamable HTTP at http://HOST:PORT/mcp; callers must send
`Authorization: Bearer $MEMORYD_MCP_TOKEN` when that is set, and it must be set to listen beyond
loopback; requests must be addressed to the listener's own names (or `--allowed-host`).
`--trust` is the trust of what the model writes: operator over stdio, guest with --listen,
unless told otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from memoryd.cli import remote
from memoryd.config import cli_token
from memoryd.config.section import is_host_name
from memoryd.domain.digits import is_number
from memoryd.errors import StartupError

COMMANDS = ("mcp",)
DEFAULT_WATCH_SECONDS = 2.0
# What --print-config puts where the desktop config's token goes: never a token itself.
TOKEN_PLACEHOLDER = "REPLACE-WITH-A-MEMORYD-TOKEN"  # noqa: S105 - a placeholder, no token


def add_commands(commands: Any) -> None:
    """The `mcp` subcommand."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "mcp", help="serve memoryd's memory to MCP clients (stdio or streamable HTTP)"
    )
    transport = parser.add_mutually_exclusive_group()
    transport.add_argument(
        "--stdio", action="store_true", help="serve one client on stdin/stdout (the default)"
    )
    transport.add_argument(
        "--listen", metavar="HOST:PORT", help="serve streamable HTTP at http://HOST:PORT/mcp"
    )
    parser.add_argument(
        "--address",
        help=f"memoryd's address (default $MEMORYD_ADDRESS or {remote.DEFAULT_ADDRESS})",
    )
    parser.add_argument("--agent", default="", help="the agent (default: main)")
    parser.add_argument("--owner", default="", help="the owner (default: default)")
    parser.add_argument(
        "--pin-owner",
        action="store_true",
        help="with --owner: every tool call works on that owner, and one naming another is "
        "refused (a desktop assistant of one user); without it --owner is only a default",
    )
    parser.add_argument(
        "--conversation",
        metavar="CHANNEL:CHAT[:THREAD]",
        default="",
        help="the conversation of tool calls that name none",
    )
    parser.add_argument(
        "--context-window",
        type=int,
        default=0,
        metavar="TOKENS",
        help="the model's context window for compose_context and the context resource "
        "(default: what memoryd knows from CommitTurn or its model provider)",
    )
    parser.add_argument(
        "--trust",
        choices=("operator", "guest"),
        help="the trust of what the model writes through the tools: operator (the default "
        "over stdio: a desktop assistant of its own user) may write directives; guest (the "
        "default with --listen) may not, and changes only what was written at guest trust",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="with --listen: a name, beyond the address's own, that requests may be addressed "
        "to (a reverse proxy's); .example.com for every name below it",
    )
    parser.add_argument(
        "--print-config",
        action="store_true",
        help="print the mcpServers entry of a desktop assistant's config for these options "
        "(an absolute command, the address), and exit",
    )
    parser.add_argument(
        "--watch-seconds",
        type=float,
        default=DEFAULT_WATCH_SECONDS,
        help="how often the prompt files are read for update notifications "
        f"(default {DEFAULT_WATCH_SECONDS:g})",
    )


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """Serve until the client leaves (stdio) or the process is stopped (HTTP); or print a
    desktop config (--print-config)."""
    try:
        if args.print_config:
            out.write(json.dumps(desktop_config(args, env), indent=2) + "\n")
            print(  # noqa: T201 - CLI output, beside the config
                f"memoryd mcp: replace {TOKEN_PLACEHOLDER} with a token of memoryd's for this "
                "agent (a server without tokens admits any)",
                file=sys.stderr,
            )
            return 0
        return asyncio.run(_serve(args, env))
    except KeyboardInterrupt:
        return 0
    except StartupError as error:
        print(f"memoryd mcp: {error}", file=sys.stderr)  # noqa: T201 - CLI output
        return remote.EXIT_USAGE


async def _serve(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    try:
        from memoryd.mcp_bridge import app  # noqa: PLC0415 - only this command needs mcp
        from memoryd.mcp_bridge.vocabulary import Defaults  # noqa: PLC0415
    except ImportError as error:
        raise StartupError(
            f"needs the mcp package: pip install 'memoryd[mcp]' ({error})"
        ) from error
    import memoryd_client as md  # noqa: PLC0415

    if args.watch_seconds <= 0:
        raise StartupError("--watch-seconds must be more than 0")
    if args.context_window < 0:
        raise StartupError("--context-window must be 0 or more")
    if args.pin_owner and not args.owner:
        raise StartupError("--pin-owner needs --owner: the owner every call works on")
    if args.conversation:
        try:
            remote.conversation_arg(args.conversation, args.agent, args.owner)
        except ValueError as error:
            raise StartupError(str(error)) from error
    if args.allowed_host and not args.listen:
        raise StartupError("--allowed-host is for --listen (stdio has no host names)")
    for name in args.allowed_host:
        if not is_host_name(name):
            raise StartupError(f"--allowed-host {name!r} is not a host name")
    host, port = _listen_address(args.listen) if args.listen else ("", 0)
    mcp_token = env.get("MEMORYD_MCP_TOKEN", "")
    if args.listen and not mcp_token and not app.is_loopback(host):
        raise StartupError(
            f"refusing to serve {args.listen} without $MEMORYD_MCP_TOKEN: anyone who can reach "
            "it would use memoryd with this command's token; set it, and give it to the "
            "clients as Authorization: Bearer"
        )
    address, _ = remote.given_address(args, env)
    try:
        credentials = remote.tls_credentials(env)
    except OSError as error:
        raise StartupError(f"cannot read a TLS file: {error}") from error
    defaults = Defaults(
        agent_id=args.agent,
        owner_id=args.owner,
        conversation=args.conversation,
        context_window=args.context_window,
        trust=args.trust or ("guest" if args.listen else "operator"),
        pinned=args.pin_owner,
    )
    async with md.connect(
        remote.with_port(address), token=cli_token(env) or None, credentials=credentials
    ) as channel:
        served = app.build(channel, defaults)
        if not args.listen:
            await app.run_stdio(served, args.watch_seconds)
            return 0

        def ready(bound: int) -> None:
            print(  # noqa: T201 - the address, for whoever started it
                f"memoryd mcp: serving http://{host}:{bound}/mcp", file=sys.stderr, flush=True
            )

        await app.run_http(
            served,
            host=host,
            port=port,
            watch_seconds=args.watch_seconds,
            token=mcp_token,
            allowed_hosts=tuple(args.allowed_host),
            ready=ready,
        )
    return 0


def desktop_config(args: argparse.Namespace, env: Mapping[str, str]) -> dict[str, Any]:
    """The `mcpServers` entry that starts this command over stdio with the same options: the
    `memoryd` beside this interpreter (its installed entry point) by its absolute path, or
    this interpreter running memoryd, so that it works whatever the assistant's PATH; and the
    place of the token (TOKEN_PLACEHOLDER)."""
    if args.listen:
        raise StartupError("--print-config is for stdio (a desktop assistant starts the command)")
    options = ["mcp"]
    for flag, value in (
        ("--agent", args.agent),
        ("--owner", args.owner),
        ("--conversation", args.conversation),
        ("--trust", args.trust),
    ):
        if value:
            options += [flag, value]
    if args.context_window:
        options += ["--context-window", str(args.context_window)]
    if args.owner:  # a desktop assistant serves its user alone
        options.append("--pin-owner")
    installed = Path(sys.executable).with_name("memoryd")
    if installed.is_file():
        command, arguments = str(installed), options
    else:
        command, arguments = sys.executable, ["-m", "memoryd", *options]
    address, _ = remote.given_address(args, env)
    # A server with tokens refuses every call without one, while it looks healthy: the config
    # says where the token goes, and never holds this environment's own.
    variables = {"MEMORYD_ADDRESS": address, "MEMORYD_TOKEN": TOKEN_PLACEHOLDER}
    entry = {"command": command, "args": arguments, "env": variables}
    return {"mcpServers": {"memory": entry}}


def _listen_address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not is_number(port) or not 0 <= int(port) <= 65535:
        raise StartupError(f"--listen must be HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)
