"""`memoryd memory list|show|forget|restore|review`: long-term memory rows, and reviews now."""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from google.protobuf import json_format

import memoryd_client as md
from memoryd.cli.remote import (
    EXIT_USAGE,
    Stubs,
    command,
    conversation_of,
    conversation_option,
    json_answered,
    owner_scope,
)

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


def add_commands(commands: Any) -> None:
    """Add the `memory` command group to the top-level parser."""
    memory = commands.add_parser("memory", help="inspect and edit long-term memory rows")
    memory_commands = memory.add_subparsers(dest="action", required=True, metavar="ACTION")

    listing = command(memory_commands, "list", "list memory rows", _memory_list, owner=True)
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

    show = command(memory_commands, "show", "show one memory row", _memory_show, owner=True)
    show.add_argument("id", type=int)
    forget = command(
        memory_commands, "forget", "archive (forget) a row", _memory_forget, owner=True
    )
    forget.add_argument("id", type=int)
    forget.add_argument("--reason", default="", help="why it is forgotten")
    restore = command(memory_commands, "restore", "un-archive a row", _memory_restore, owner=True)
    restore.add_argument("id", type=int)

    review = command(
        memory_commands,
        "review",
        "review conversations with new messages now",
        _memory_review,
        owner=True,
        every=True,
    )
    review.add_argument("--now", action="store_true", required=True, help="run the review now")
    conversation_option(review, required=False)


def _describe(memory: md.Memory) -> str:
    category = md.Category.Name(memory.category).removeprefix("CATEGORY_").lower()
    scope = md.ScopeType.Name(memory.scope_type).removeprefix("SCOPE_TYPE_").lower()
    state = " (archived)" if memory.archived else ""
    return (
        f"{memory.id}\t{scope}:{memory.scope_id}\t{category}\t{memory.key}: {memory.value}{state}"
    )


def _memory_list(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    request = md.ListMemoriesRequest(
        owner=owner_scope(args),
        categories=[md.Category.Value(f"CATEGORY_{name.upper()}") for name in args.category],
        archived=md.ArchivedFilter.Value(f"ARCHIVED_FILTER_{args.archived.upper()}"),
        key_prefix=args.prefix,
        page_size=args.limit,
    )
    if args.scope:
        request.scope_type = md.ScopeType.Value(f"SCOPE_TYPE_{args.scope.upper()}")
    response = stubs.api.memory.ListMemories(request)
    if not json_answered(args, out, response):
        for item in response.memories:
            out.write(_describe(item.memory) + "\n")
        if not response.memories:
            out.write("no memory rows match\n")
    return 0


def _memory_show(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    response = stubs.api.memory.GetMemory(md.GetMemoryRequest(owner=owner_scope(args), id=args.id))
    if not json_answered(args, out, response):
        out.write(_describe(response.memory) + "\n")
    return 0


def _memory_forget(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    response = stubs.api.memory.ArchiveMemory(
        md.ArchiveMemoryRequest(owner=owner_scope(args), id=args.id, reason=args.reason)
    )
    if not json_answered(args, out, response):
        out.write(f"forgot memory {response.memory.id}\n")
    return 0


def _memory_restore(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    response = stubs.api.memory.RestoreMemory(
        md.RestoreMemoryRequest(owner=owner_scope(args), id=args.id)
    )
    if not json_answered(args, out, response):
        out.write(response.notice + "\n")
    return 0


def _memory_review(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    request = md.ReviewNowRequest(agent_id=args.agent, owner_id=args.owner)
    if args.conversation:
        conversation = conversation_of(args)
        if conversation is None:
            return EXIT_USAGE
        request.conversation.CopyFrom(conversation)
        request.ClearField("agent_id")
        request.ClearField("owner_id")
    response = stubs.api.reviews.ReviewNow(request)
    if args.json:
        reviews = json_format.MessageToDict(response, preserving_proto_field_name=True)
        document = {"checked": len(response.reviews), "reviews": reviews.get("reviews", [])}
        out.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    else:
        out.write(f"memory review completed: {len(response.reviews)} conversation(s) checked\n")
    return 0
