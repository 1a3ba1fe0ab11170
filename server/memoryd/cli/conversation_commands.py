"""`memoryd compact`, `memoryd context` and `memoryd purge-owner`: one conversation's context
and compaction, and an owner's erasure."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

import memoryd_client as md
from memoryd.cli.remote import (
    EXIT_FAILED,
    EXIT_USAGE,
    Stubs,
    command,
    common_options,
    conversation_of,
    conversation_option,
    json_answered,
)


def add_commands(commands: Any) -> None:
    """Add `compact`, `context` and `purge-owner` to the top-level parser."""
    compact = command(
        commands, "compact", "compact a conversation now (/compact)", _compact, owner=True
    )
    conversation_option(compact, required=True)
    compact.add_argument("--window", type=int, default=0, help="the model's context window")
    context = command(
        commands,
        "context",
        "print the context the next model call of a conversation receives",
        _context,
        owner=True,
    )
    conversation_option(context, required=True)
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
    response = stubs.api.admin.PurgeOwner(
        md.PurgeOwnerRequest(agent_id=args.agent, owner_id=args.owner)
    )
    if not json_answered(args, out, response):
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
    conversation = conversation_of(args)
    if conversation is None:
        return EXIT_USAGE
    response = stubs.api.context.Compact(
        md.CompactRequest(conversation=conversation, context_window=args.window)
    )
    if not json_answered(args, out, response):
        out.write(response.message + "\n")
    done = (md.COMPACTION_OUTCOME_COMPACTED, md.COMPACTION_OUTCOME_NOTHING_TO_COMPACT)
    return 0 if response.outcome in done else EXIT_FAILED


def _context(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    """The composed context: each part as `--- role (what, N tokens)` and its text."""
    conversation = conversation_of(args)
    if conversation is None:
        return EXIT_USAGE
    response = stubs.api.context.ComposeContext(
        md.ComposeContextRequest(
            conversation=conversation,
            context_window=args.window,
            trust=md.TRUST_GUEST if args.guest else md.TRUST_OPERATOR,
        )
    )
    if json_answered(args, out, response):
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
    limit = (
        f"of {response.limit_tokens:,} tokens (context window {response.context_window:,})"
        if response.limit_tokens
        else "tokens (nothing said yet, and no context window known)"
    )
    out.write(f"=== {response.total_tokens:,} {limit}{left_out}\n")
    return 0
