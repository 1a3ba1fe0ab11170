"""`memoryd memory ...`, `memoryd resource ...`, `memoryd compact`, `memoryd context` (and
`memoryd export` / `import`, in transfer_commands): commands that call a running server.

They speak gRPC to `--address` (default $MEMORYD_ADDRESS, else 127.0.0.1:50051) with the
generated client, print a short text answer, or with `--json` the response as JSON (protobuf's
JSON mapping, field names as in the proto). An error prints `memoryd: STATUS: message` on stderr
and exits 1.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

import memoryd_client as md
from memoryd.config import cli_token
from memoryd.errors import StartupError

EXIT_FAILED = 1
EXIT_USAGE = 2
DEFAULT_PORT = 50051
DEFAULT_ADDRESS = f"127.0.0.1:{DEFAULT_PORT}"
# An export chunk stays under 1 MiB, but one record may be as large as the largest message.
MAX_RECEIVE_BYTES = 64 * 1024 * 1024
CATEGORY_NAMES = (
    "identity",
    "preference",
    "interest",
    "goal",
    "context",
    "directive",
    "fact",
    "job_run_summary",
)
SCOPE_NAMES = ("owner", "agent", "conversation", "job")
RESOURCE_NAMES = ("user_md", "memory_md", "checkpoint")


@dataclasses.dataclass(frozen=True, slots=True)
class Stubs:
    """The services a command may call, over one channel."""

    memory: md.MemoryServiceStub
    compaction: md.CompactionServiceStub


Command = Callable[[Stubs, argparse.Namespace, TextIO], int]


def add_commands(commands: Any) -> None:
    """Add the `memory` and `resource` command groups to the top-level parser."""
    memory = commands.add_parser("memory", help="inspect and edit long-term memory rows")
    memory_commands = memory.add_subparsers(dest="action", required=True, metavar="ACTION")

    listing = _command(memory_commands, "list", "list memory rows", _memory_list, owner=True)
    listing.add_argument("--scope", choices=SCOPE_NAMES, help="only this scope type")
    listing.add_argument("--category", choices=CATEGORY_NAMES, action="append", default=[])
    listing.add_argument(
        "--archived",
        choices=("active", "archived", "all"),
        default="active",
        help="archived rows or not (default active)",
    )
    listing.add_argument("--prefix", default="", help="only keys starting with this text")
    listing.add_argument("--limit", type=int, default=20, help="at most this many rows (20)")

    show = _command(memory_commands, "show", "show one memory row", _memory_show, owner=True)
    show.add_argument("id", type=int)
    forget = _command(
        memory_commands, "forget", "archive (forget) a row", _memory_forget, owner=True
    )
    forget.add_argument("id", type=int)
    forget.add_argument("--reason", default="", help="why it is forgotten")
    restore = _command(memory_commands, "restore", "un-archive a row", _memory_restore, owner=True)
    restore.add_argument("id", type=int)

    review = _command(
        memory_commands,
        "review",
        "review conversations with new messages now",
        _memory_review,
        owner=True,
        every=True,
    )
    review.add_argument("--now", action="store_true", required=True, help="run the review now")
    _conversation_option(review, required=False)

    compact = _command(
        commands, "compact", "compact a conversation now (/compact)", _compact, owner=True
    )
    _conversation_option(compact, required=True)
    compact.add_argument("--window", type=int, default=0, help="the model's context window")
    context = _command(
        commands,
        "context",
        "print the context the next model call of a conversation receives",
        _context,
        owner=True,
    )
    _conversation_option(context, required=True)
    context.add_argument("--window", type=int, default=0, help="the model's context window")
    context.add_argument("--guest", action="store_true", help="as a guest would be answered")

    purge = commands.add_parser(
        "purge-owner", help="erase everything of one owner of one agent, and print the receipt"
    )
    common_options(purge)
    purge.add_argument("agent", help="the agent")
    purge.add_argument("owner", help="the owner")
    purge.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    purge.set_defaults(run=_purge_owner)

    resource = commands.add_parser("resource", help="versioned USER.md / MEMORY.md revisions")
    resource_commands = resource.add_subparsers(dest="action", required=True, metavar="ACTION")
    listed = _command(resource_commands, "list", "list resources", _resource_list, owner=False)
    listed.add_argument("--agent", default="", help="the agent (default main)")
    history = _command(
        resource_commands, "history", "list revisions", _resource_history, owner=True
    )
    history.add_argument("type", choices=RESOURCE_NAMES)
    history.add_argument("--limit", type=int, default=10, help="at most this many (10)")
    shown = _command(resource_commands, "show", "print one revision", _resource_show, owner=True)
    shown.add_argument("type", choices=RESOURCE_NAMES)
    shown.add_argument("revision", type=int)
    diff = _command(resource_commands, "diff", "diff two revisions", _resource_diff, owner=True)
    diff.add_argument("type", choices=RESOURCE_NAMES)
    diff.add_argument("older", type=int)
    diff.add_argument("newer", type=int)
    rollback = _command(
        resource_commands,
        "rollback",
        "make an earlier revision current",
        _resource_rollback,
        owner=True,
    )
    rollback.add_argument("type", choices=RESOURCE_NAMES)
    rollback.add_argument("revision", type=int)
    rollback.add_argument(
        "--yes", action="store_true", help="do not ask for confirmation on a terminal"
    )


class _Bearer(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """Sends the CLI's token with every call."""

    def __init__(self, token: str) -> None:
        self._header = ("authorization", f"Bearer {token}")

    def _details(self, details: Any) -> Any:
        return _CallDetails(
            details.method,
            details.timeout,
            [*(details.metadata or ()), self._header],
            details.credentials,
            details.wait_for_ready,
            details.compression,
        )

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation: Any, details: Any, requests: Any) -> Any:
        return continuation(self._details(details), requests)

    def intercept_stream_stream(self, continuation: Any, details: Any, requests: Any) -> Any:
        return continuation(self._details(details), requests)


class _CallDetails(
    collections.namedtuple(
        "_CallDetails",
        ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression"),
    ),
    grpc.ClientCallDetails,
):
    """grpc.ClientCallDetails with the token added."""


def _tls(env: Mapping[str, str]) -> grpc.ChannelCredentials | None:
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
    given, source = _given_address(args, env)
    address = with_port(given)
    command: Command = args.run
    options = [("grpc.max_receive_message_length", MAX_RECEIVE_BYTES)]
    try:
        token = cli_token(env)
    except StartupError as error:
        print(f"memoryd: {error}", file=sys.stderr)  # noqa: T201 - CLI output
        return EXIT_USAGE
    try:
        tls = _tls(env)
    except OSError as error:
        print(f"memoryd: cannot read a TLS file: {error}", file=sys.stderr)  # noqa: T201
        return EXIT_USAGE
    opened = (
        grpc.secure_channel(address, tls, options=options)
        if tls is not None
        else grpc.insecure_channel(address, options=options)
    )
    with opened as plain:
        channel = grpc.intercept_channel(plain, _Bearer(token)) if token else plain
        stubs = Stubs(md.MemoryServiceStub(channel), md.CompactionServiceStub(channel))
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


def _given_address(args: argparse.Namespace, env: Mapping[str, str]) -> tuple[str, str]:
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


def _command(
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


def _conversation_option(parser: argparse.ArgumentParser, *, required: bool) -> None:
    parser.add_argument(
        "--conversation",
        metavar="CHANNEL:CHAT[:THREAD]",
        required=required,
        help=("the" if required else "only this") + " conversation (the thread may contain ':')",
    )


def _conversation(args: argparse.Namespace) -> md.Conversation | None:
    """The --conversation of a command, or None after saying why it is malformed."""
    try:
        return conversation_arg(args.conversation, args.agent, args.owner)
    except ValueError as error:
        print(f"memoryd: {error}", file=sys.stderr)  # noqa: T201 - CLI output
        return None


def _owner(args: argparse.Namespace) -> md.OwnerScope:
    return md.OwnerScope(agent_id=args.agent, owner_id=args.owner)


def _ref(args: argparse.Namespace) -> md.ResourceRef:
    number = md.ResourceType.Value(f"RESOURCE_TYPE_{args.type.upper()}")
    return md.ResourceRef(agent_id=args.agent, type=number, scope_id=args.owner)


def _json_answered(args: argparse.Namespace, out: TextIO, response: Message) -> bool:
    """With --json, print the response as JSON and say so; the text answer is skipped."""
    if not args.json:
        return False
    document = json_format.MessageToDict(response, preserving_proto_field_name=True)
    out.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    return True


def _describe(memory: md.Memory) -> str:
    category = md.Category.Name(memory.category).removeprefix("CATEGORY_").lower()
    scope = md.ScopeType.Name(memory.scope_type).removeprefix("SCOPE_TYPE_").lower()
    state = " (archived)" if memory.archived else ""
    return (
        f"{memory.id}\t{scope}:{memory.scope_id}\t{category}\t{memory.key}: {memory.value}{state}"
    )


def _memory_list(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    request = md.ListMemoriesRequest(
        owner=_owner(args),
        categories=[md.Category.Value(f"CATEGORY_{name.upper()}") for name in args.category],
        archived=md.ArchivedFilter.Value(f"ARCHIVED_FILTER_{args.archived.upper()}"),
        key_prefix=args.prefix,
        page_size=args.limit,
    )
    if args.scope:
        request.scope_type = md.ScopeType.Value(f"SCOPE_TYPE_{args.scope.upper()}")
    response = stubs.memory.ListMemories(request)
    if not _json_answered(args, out, response):
        for item in response.memories:
            out.write(_describe(item.memory) + "\n")
        if not response.memories:
            out.write("no memory rows match\n")
    return 0


def _memory_show(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    response = stubs.memory.GetMemory(md.GetMemoryRequest(owner=_owner(args), id=args.id))
    if not _json_answered(args, out, response):
        out.write(_describe(response.memory) + "\n")
    return 0


def _memory_forget(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    response = stubs.memory.ArchiveMemory(
        md.ArchiveMemoryRequest(owner=_owner(args), id=args.id, reason=args.reason)
    )
    if not _json_answered(args, out, response):
        out.write(f"forgot memory {response.memory.id}\n")
    return 0


def _memory_restore(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    response = stubs.memory.RestoreMemory(md.RestoreMemoryRequest(owner=_owner(args), id=args.id))
    if not _json_answered(args, out, response):
        out.write(response.notice + "\n")
    return 0


def conversation_arg(text: str, agent: str, owner: str) -> md.Conversation:
    """`channel:chat_id[:thread]`, split into at most three parts; two parts mean thread root."""
    parts = text.split(":", 2)
    if len(parts) < 2 or not all(parts):
        message = f"--conversation must be CHANNEL:CHAT[:THREAD], got {text!r}"
        raise ValueError(message)
    return md.Conversation(
        agent_id=agent,
        owner_id=owner,
        channel=parts[0],
        chat_id=parts[1],
        thread_scope=parts[2] if len(parts) == 3 else "",
    )


def _memory_review(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    request = md.ReviewNowRequest(agent_id=args.agent, owner_id=args.owner)
    if args.conversation:
        conversation = _conversation(args)
        if conversation is None:
            return EXIT_USAGE
        request.conversation.CopyFrom(conversation)
        request.ClearField("agent_id")
        request.ClearField("owner_id")
    response = stubs.memory.ReviewNow(request)
    if args.json:
        reviews = json_format.MessageToDict(response, preserving_proto_field_name=True)
        document = {"checked": len(response.reviews), "reviews": reviews.get("reviews", [])}
        out.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    else:
        out.write(f"memory review completed: {len(response.reviews)} conversation(s) checked\n")
    return 0


def _resource_list(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    response = md.ListResourcesResponse()
    token = ""
    while True:  # every page: an agent with many owners has many resources
        page = stubs.memory.ListResources(
            md.ListResourcesRequest(agent_id=args.agent, page_token=token)
        )
        response.resources.extend(page.resources)
        token = page.next_page_token
        if not token:
            break
    if not _json_answered(args, out, response):
        for resource in response.resources:
            kind = md.ResourceType.Name(resource.ref.type).removeprefix("RESOURCE_TYPE_").lower()
            out.write(
                f"{kind}\t{resource.ref.scope_id}\trevision {resource.current_revision}\t"
                f"{resource.path}\n"
            )
    return 0


def _resource_history(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    response = stubs.memory.ListRevisions(md.ListRevisionsRequest(ref=_ref(args), limit=args.limit))
    if not _json_answered(args, out, response):
        for revision in response.revisions:
            created = revision.created_at.ToJsonString()
            out.write(
                f"{revision.revision}\t{created}\t{revision.mutation_source}\t"
                f"{revision.byte_size} bytes\n"
            )
    return 0


def _resource_show(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    response = stubs.memory.GetRevision(
        md.GetRevisionRequest(ref=_ref(args), revision=args.revision)
    )
    if not _json_answered(args, out, response):
        out.write(response.revision.content + "\n")
    return 0


def _resource_diff(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    response = stubs.memory.DiffRevisions(
        md.DiffRevisionsRequest(ref=_ref(args), from_revision=args.older, to_revision=args.newer)
    )
    if not _json_answered(args, out, response):
        out.write((response.diff or "(no differences)") + "\n")
    return 0


def _resource_rollback(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    """Show what the rollback changes, then roll back. Only on a terminal, and without --yes, is
    the user asked first: a script or a pipe is not asked, as the seed's command is not. With
    --json the preview and the question go to stderr, so stdout stays one JSON document."""
    ref = _ref(args)
    ask = not args.yes and sys.stdin.isatty()
    talk = sys.stderr if args.json else out
    if ask or not args.json:
        current = stubs.memory.GetRevision(md.GetRevisionRequest(ref=ref))
        preview = stubs.memory.DiffRevisions(
            md.DiffRevisionsRequest(
                ref=ref, from_revision=current.revision.revision, to_revision=args.revision
            )
        )
        talk.write((preview.diff or "(no differences)") + "\n")
    if ask:
        talk.write(f"Roll back {args.type} to revision {args.revision}? [y/N] ")
        talk.flush()
        answer = sys.stdin.readline()  # end of input answers no
        if answer.strip().lower() not in ("y", "yes"):
            talk.write("rollback cancelled\n")
            return EXIT_FAILED
    response = stubs.memory.RollbackResource(
        md.RollbackResourceRequest(ref=ref, revision=args.revision)
    )
    if not _json_answered(args, out, response):
        out.write(response.notice + "\n")
    return 0


def _purge_owner(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    """PurgeOwner. Asks first only on a terminal without --yes (a script is not asked)."""
    if not args.yes and sys.stdin.isatty():
        talk = sys.stderr if args.json else out
        talk.write(
            f"Erase everything of owner {args.owner!r} of agent {args.agent!r} (messages, memory, "
            "prompt files, revisions)? This cannot be undone. [y/N] "
        )
        talk.flush()
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            talk.write("nothing was erased\n")
            return EXIT_FAILED
    response = stubs.memory.PurgeOwner(
        md.PurgeOwnerRequest(agent_id=args.agent, owner_id=args.owner)
    )
    if not _json_answered(args, out, response):
        for item in response.erased:
            out.write(f"{item.table}\t{item.rows}\n")
        out.write(f"prompt files removed\t{response.prompt_files_removed}\n")
        truncated = response.wal_truncated
        out.write(f"WAL truncated\t{'yes' if truncated else 'no (readers hold it; retried)'}\n")
        for path in response.residual_files:
            out.write(f"may still hold the owner's data\t{path}\n")
    return 0


def _compact(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    """/compact. Exits 1 when it failed or the conversation changed meanwhile (run it again)."""
    conversation = _conversation(args)
    if conversation is None:
        return EXIT_USAGE
    response = stubs.compaction.Compact(
        md.CompactRequest(conversation=conversation, context_window=args.window)
    )
    if not _json_answered(args, out, response):
        out.write(response.message + "\n")
    done = (md.COMPACTION_OUTCOME_COMPACTED, md.COMPACTION_OUTCOME_NOTHING_TO_COMPACT)
    return 0 if response.outcome in done else EXIT_FAILED


def _context(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    """The composed context: each part as `--- role (what, N tokens)` and its text."""
    conversation = _conversation(args)
    if conversation is None:
        return EXIT_USAGE
    response = stubs.compaction.ComposeContext(
        md.ComposeContextRequest(
            conversation=conversation,
            context_window=args.window,
            trust=md.TRUST_GUEST if args.guest else md.TRUST_OPERATOR,
        )
    )
    if _json_answered(args, out, response):
        return 0
    for part in response.parts:
        role = md.Role.Name(part.role).removeprefix("ROLE_").lower()
        what = md.ContextPartKind.Name(part.kind).removeprefix("CONTEXT_PART_KIND_").lower()
        out.write(f"--- {role} ({what}, {part.tokens:,} tokens)\n{part.content}\n")
    left_out = (
        f"; {response.omitted_messages:,} older messages ({response.omitted_tokens:,} tokens) "
        "left out"
        if response.omitted_messages
        else ""
    )
    out.write(
        f"=== {response.total_tokens:,} of {response.limit_tokens:,} tokens "
        f"(context window {response.context_window:,}){left_out}\n"
    )
    return 0
