"""What every command that calls a running server shares: the channel, the token, TLS, the
address, the common options, and how an error is printed.

Such commands (memory_commands, resource_commands, conversation_commands, search_commands,
transfer_commands) speak gRPC to `--address` (default $MEMORYD_ADDRESS, else 127.0.0.1:50051)
with the generated client, print a short text answer, or with `--json` the response as JSON
(protobuf's JSON mapping, field names as in the proto). An error prints
`memoryd: STATUS: message` on stderr and exits 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2

import memoryd_client as md
from memoryd.config import cli_token
from memoryd.domain.conversation import split_conversation_text
from memoryd.errors import InvalidArgument, StartupError

EXIT_FAILED = 1
EXIT_USAGE = 2
DEFAULT_PORT = 50051
DEFAULT_ADDRESS = f"127.0.0.1:{DEFAULT_PORT}"
# An export chunk stays under 1 MiB, but one record may be as large as the largest message.
MAX_RECEIVE_BYTES = 64 * 1024 * 1024


@dataclasses.dataclass(frozen=True, slots=True)
class Stubs:
    """The services a command may call, over one channel."""

    # memoryd.v2's services.
    api: md.SyncStubs
    # grpc.health.v1.Health/Check (the generated HealthStub is untyped).
    health_check: grpc.UnaryUnaryMultiCallable[
        health_pb2.HealthCheckRequest, health_pb2.HealthCheckResponse
    ]


Command = Callable[[Stubs, argparse.Namespace, TextIO], int]


def tls_credentials(env: Mapping[str, str]) -> grpc.ChannelCredentials | None:
    """TLS for a server that serves it: $MEMORYD_TLS_CA (the CA that signed the server's
    certificate), and for mutual TLS $MEMORYD_TLS_CERT / $MEMORYD_TLS_KEY (the client's)."""
    ca, cert, key = (env.get(f"MEMORYD_TLS_{name}") for name in ("CA", "CERT", "KEY"))
    if not (ca or cert):
        return None
    return grpc.ssl_channel_credentials(
        root_certificates=Path(ca).read_bytes() if ca else None,
        private_key=Path(key).read_bytes() if key else None,
        certificate_chain=Path(cert).read_bytes() if cert else None,
    )


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO = sys.stdout) -> int:
    """Run a client command against the server (with $MEMORYD_TOKEN or the configured token
    file's token, when there is one)."""
    given, source = given_address(args, env)
    address = with_port(given)
    command: Command = args.run
    options = [("grpc.max_receive_message_length", MAX_RECEIVE_BYTES)]
    try:
        token = cli_token(env)
    except StartupError as error:
        print(f"memoryd: {error}", file=sys.stderr)  # noqa: T201 - CLI output
        return EXIT_USAGE
    try:
        tls = tls_credentials(env)
    except OSError as error:
        print(f"memoryd: cannot read a TLS file: {error}", file=sys.stderr)  # noqa: T201
        return EXIT_USAGE
    # No default deadline: an export or an import runs as long as it takes.
    with md.connect_sync(
        address, token=token or None, timeout=None, credentials=tls, options=options
    ) as channel:
        stubs = Stubs(
            md.SyncStubs(channel),
            channel.unary_unary(
                "/grpc.health.v1.Health/Check",
                request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                response_deserializer=health_pb2.HealthCheckResponse.FromString,
            ),
        )
        try:
            return command(stubs, args, out)
        except grpc.RpcError as error:
            code = error.code() if isinstance(error, grpc.Call) else grpc.StatusCode.UNKNOWN
            details = error.details() if isinstance(error, grpc.Call) else str(error)
            if code is grpc.StatusCode.UNAVAILABLE:
                details = (
                    f"cannot reach memoryd at {address} ({source}): {details}. Is it running "
                    "(make serve)? Point the command elsewhere with --address HOST:PORT or "
                    "MEMORYD_ADDRESS=HOST:PORT"
                )
            print(f"memoryd: {code.name}: {details}", file=sys.stderr)  # noqa: T201 - CLI output
            return EXIT_FAILED


def given_address(args: argparse.Namespace, env: Mapping[str, str]) -> tuple[str, str]:
    """The address asked for, and where it came from (said when it cannot be reached)."""
    if args.address:
        return args.address, "from --address"
    if env.get("MEMORYD_ADDRESS"):
        return env["MEMORYD_ADDRESS"], "from $MEMORYD_ADDRESS"
    return DEFAULT_ADDRESS, "the default; --address and $MEMORYD_ADDRESS are unset"


def with_port(address: str) -> str:
    """`address` with memoryd's default port when it names none: gRPC alone would go to 443.
    A gRPC target with a scheme (unix:, dns:, ipv4:) is taken as it is."""
    if ":" in address and not address.startswith("["):  # host:port, or scheme:...
        return address
    if address.startswith("[") and "]:" in address:  # [v6]:port
        return address
    return f"{address}:{DEFAULT_PORT}"


def command(
    group: Any, name: str, help_text: str, handler: Command, *, owner: bool, every: bool = False
) -> argparse.ArgumentParser:
    """A subcommand; with `owner`, --agent and --owner, which default to main and default, or
    with `every` to every agent and every owner (what an unset field means to the RPC)."""
    parser: argparse.ArgumentParser = group.add_parser(name, help=help_text)
    common_options(parser)
    if owner:
        agent, owner_name = ("every agent", "every owner") if every else ("main", "default")
        parser.add_argument("--agent", default="", help=f"the agent (default: {agent})")
        parser.add_argument("--owner", default="", help=f"the owner (default: {owner_name})")
    parser.set_defaults(run=handler)
    return parser


def common_options(parser: argparse.ArgumentParser) -> None:
    """--address and --json, which every command that calls the server takes."""
    parser.add_argument(
        "--address", help=f"server address (default $MEMORYD_ADDRESS or {DEFAULT_ADDRESS})"
    )
    parser.add_argument("--json", action="store_true", help="print the response as JSON")


def conversation_option(parser: argparse.ArgumentParser, *, required: bool) -> None:
    """--conversation CHANNEL:CHAT[:THREAD]."""
    parser.add_argument(
        "--conversation",
        metavar="CHANNEL:CHAT[:THREAD]",
        required=required,
        help=("the" if required else "only this") + " conversation (the thread may contain ':')",
    )


def conversation_of(args: argparse.Namespace) -> md.Conversation | None:
    """The --conversation of a command, or None after saying why it is malformed."""
    try:
        return conversation_arg(args.conversation, args.agent, args.owner)
    except ValueError as error:
        print(f"memoryd: {error}", file=sys.stderr)  # noqa: T201 - CLI output
        return None


def owner_scope(args: argparse.Namespace) -> md.OwnerScope:
    """The --agent and --owner of a command."""
    return md.OwnerScope(agent_id=args.agent, owner_id=args.owner)


def json_answered(args: argparse.Namespace, out: TextIO, response: Message) -> bool:
    """With --json, print the response as JSON and say so; the text answer is skipped."""
    if not args.json:
        return False
    document = json_format.MessageToDict(response, preserving_proto_field_name=True)
    out.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    return True


def conversation_arg(text: str, agent: str, owner: str) -> md.Conversation:
    """`channel:chat_id[:thread]`, split into at most three parts; two parts mean thread root.
    ValueError when it is not one."""
    try:
        channel, chat_id, thread_scope = split_conversation_text(text, "--conversation")
    except InvalidArgument as error:
        raise ValueError(error.message) from error
    return md.Conversation(
        agent_id=agent,
        owner_id=owner,
        channel=channel,
        chat_id=chat_id,
        thread_scope=thread_scope,
    )
