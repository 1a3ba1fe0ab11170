"""`memoryd memory ...` and `memoryd resource ...`: commands that call a running server.

They speak gRPC to `--address` (default $MEMORYD_ADDRESS, else 127.0.0.1:50051) with the
generated client, print a short text answer, or with `--json` the response as JSON (protobuf's
JSON mapping, field names as in the proto). An error prints `memoryd: STATUS: message` on stderr
and exits 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from typing import Any, TextIO

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

import memoryd_client as md

EXIT_FAILED = 1
EXIT_USAGE = 2
DEFAULT_ADDRESS = "127.0.0.1:50051"
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
Command = Callable[[md.MemoryServiceStub, argparse.Namespace, TextIO], int]


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
    )
    review.add_argument("--now", action="store_true", required=True, help="run the review now")
    review.add_argument(
        "--conversation",
        metavar="CHANNEL:CHAT[:THREAD]",
        help="only this conversation (the thread part may contain ':')",
    )

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


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO = sys.stdout) -> int:
    """Run a client command against the server."""
    address = args.address or env.get("MEMORYD_ADDRESS") or DEFAULT_ADDRESS
    command: Command = args.run
    with grpc.insecure_channel(address) as channel:
        stub = md.MemoryServiceStub(channel)
        try:
            return command(stub, args, out)
        except grpc.RpcError as error:
            code = error.code().name if isinstance(error, grpc.Call) else "UNKNOWN"
            details = error.details() if isinstance(error, grpc.Call) else str(error)
            print(f"memoryd: {code}: {details}", file=sys.stderr)  # noqa: T201 - CLI output
            return EXIT_FAILED


def _command(
    group: Any, name: str, help_text: str, handler: Command, *, owner: bool
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = group.add_parser(name, help=help_text)
    parser.add_argument(
        "--address", help=f"server address (default $MEMORYD_ADDRESS or {DEFAULT_ADDRESS})"
    )
    parser.add_argument("--json", action="store_true", help="print the response as JSON")
    if owner:
        parser.add_argument("--agent", default="", help="the agent (default main)")
        parser.add_argument("--owner", default="", help="the owner (default default)")
    parser.set_defaults(run=handler)
    return parser


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


def _memory_list(stub: md.MemoryServiceStub, args: argparse.Namespace, out: TextIO) -> int:
    request = md.ListMemoriesRequest(
        owner=_owner(args),
        categories=[md.Category.Value(f"CATEGORY_{name.upper()}") for name in args.category],
        archived=md.ArchivedFilter.Value(f"ARCHIVED_FILTER_{args.archived.upper()}"),
        key_prefix=args.prefix,
        page_size=args.limit,
    )
    if args.scope:
        request.scope_type = md.ScopeType.Value(f"SCOPE_TYPE_{args.scope.upper()}")
    response = stub.ListMemories(request)
    if not _json_answered(args, out, response):
        for item in response.memories:
            out.write(_describe(item.memory) + "\n")
    return 0


def _memory_show(stub: md.MemoryServiceStub, args: argparse.Namespace, out: TextIO) -> int:
    response = stub.GetMemory(md.GetMemoryRequest(owner=_owner(args), id=args.id))
    if not _json_answered(args, out, response):
        out.write(_describe(response.memory) + "\n")
    return 0


def _memory_forget(stub: md.MemoryServiceStub, args: argparse.Namespace, out: TextIO) -> int:
    response = stub.ArchiveMemory(
        md.ArchiveMemoryRequest(owner=_owner(args), id=args.id, reason=args.reason)
    )
    if not _json_answered(args, out, response):
        out.write(f"forgot memory {response.memory.id}\n")
    return 0


def _memory_restore(stub: md.MemoryServiceStub, args: argparse.Namespace, out: TextIO) -> int:
    response = stub.RestoreMemory(md.RestoreMemoryRequest(owner=_owner(args), id=args.id))
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


def _memory_review(stub: md.MemoryServiceStub, args: argparse.Namespace, out: TextIO) -> int:
    request = md.ReviewNowRequest(agent_id=args.agent, owner_id=args.owner)
    if args.conversation:
        try:
            request.conversation.CopyFrom(
                conversation_arg(args.conversation, args.agent, args.owner)
            )
        except ValueError as error:
            print(f"memoryd: {error}", file=sys.stderr)  # noqa: T201 - CLI output
            return EXIT_USAGE
        request.ClearField("agent_id")
        request.ClearField("owner_id")
    response = stub.ReviewNow(request)
    if args.json:
        reviews = json_format.MessageToDict(response, preserving_proto_field_name=True)
        document = {"checked": len(response.reviews), "reviews": reviews.get("reviews", [])}
        out.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    else:
        out.write(f"memory review completed: {len(response.reviews)} conversation(s) checked\n")
    return 0


def _resource_list(stub: md.MemoryServiceStub, args: argparse.Namespace, out: TextIO) -> int:
    response = md.ListResourcesResponse()
    token = ""
    while True:  # every page: an agent with many owners has many resources
        page = stub.ListResources(md.ListResourcesRequest(agent_id=args.agent, page_token=token))
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


def _resource_history(stub: md.MemoryServiceStub, args: argparse.Namespace, out: TextIO) -> int:
    response = stub.ListRevisions(md.ListRevisionsRequest(ref=_ref(args), limit=args.limit))
    if not _json_answered(args, out, response):
        for revision in response.revisions:
            created = revision.created_at.ToJsonString()
            out.write(
                f"{revision.revision}\t{created}\t{revision.mutation_source}\t"
                f"{revision.byte_size} bytes\n"
            )
    return 0


def _resource_show(stub: md.MemoryServiceStub, args: argparse.Namespace, out: TextIO) -> int:
    response = stub.GetRevision(md.GetRevisionRequest(ref=_ref(args), revision=args.revision))
    if not _json_answered(args, out, response):
        out.write(response.revision.content + "\n")
    return 0


def _resource_diff(stub: md.MemoryServiceStub, args: argparse.Namespace, out: TextIO) -> int:
    response = stub.DiffRevisions(
        md.DiffRevisionsRequest(ref=_ref(args), from_revision=args.older, to_revision=args.newer)
    )
    if not _json_answered(args, out, response):
        out.write((response.diff or "(no differences)") + "\n")
    return 0


def _resource_rollback(stub: md.MemoryServiceStub, args: argparse.Namespace, out: TextIO) -> int:
    """Show what the rollback changes, then roll back. Only on a terminal, and without --yes, is
    the user asked first: a script or a pipe is not asked, as the seed's command is not. With
    --json the preview and the question go to stderr, so stdout stays one JSON document."""
    ref = _ref(args)
    ask = not args.yes and sys.stdin.isatty()
    talk = sys.stderr if args.json else out
    if ask or not args.json:
        current = stub.GetRevision(md.GetRevisionRequest(ref=ref))
        preview = stub.DiffRevisions(
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
    response = stub.RollbackResource(md.RollbackResourceRequest(ref=ref, revision=args.revision))
    if not _json_answered(args, out, response):
        out.write(response.notice + "\n")
    return 0
