"""`memoryd resource list|history|show|diff|rollback`: the versioned USER.md and MEMORY.md."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

import memoryd_client as md
from memoryd.cli.remote import (
    EXIT_FAILED,
    Stubs,
    command,
    json_answered,
)

RESOURCE_NAMES = ("user_md", "memory_md", "checkpoint")


def add_commands(commands: Any) -> None:
    """Add the `resource` command group to the top-level parser."""
    resource = commands.add_parser("resource", help="versioned USER.md / MEMORY.md revisions")
    resource_commands = resource.add_subparsers(dest="action", required=True, metavar="ACTION")
    listed = command(resource_commands, "list", "list resources", _resource_list, owner=False)
    listed.add_argument("--agent", default="", help="the agent (default main)")
    history = command(resource_commands, "history", "list revisions", _resource_history, owner=True)
    history.add_argument("type", choices=RESOURCE_NAMES)
    history.add_argument("--limit", type=int, default=10, help="at most this many (10)")
    shown = command(resource_commands, "show", "print one revision", _resource_show, owner=True)
    shown.add_argument("type", choices=RESOURCE_NAMES)
    shown.add_argument("revision", type=int)
    diff = command(resource_commands, "diff", "diff two revisions", _resource_diff, owner=True)
    diff.add_argument("type", choices=RESOURCE_NAMES)
    diff.add_argument("older", type=int)
    diff.add_argument("newer", type=int)
    rollback = command(
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


def _ref(args: argparse.Namespace) -> md.ResourceRef:
    number = md.ResourceType.Value(f"RESOURCE_TYPE_{args.type.upper()}")
    return md.ResourceRef(agent_id=args.agent, type=number, scope_id=args.owner)


def _resource_list(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    response = md.ListResourcesResponse()
    token = ""
    while True:  # every page: an agent with many owners has many resources
        page = stubs.api.resources.ListResources(
            md.ListResourcesRequest(agent_id=args.agent, page_token=token)
        )
        response.resources.extend(page.resources)
        token = page.next_page_token
        if not token:
            break
    if not json_answered(args, out, response):
        for resource in response.resources:
            kind = md.ResourceType.Name(resource.ref.type).removeprefix("RESOURCE_TYPE_").lower()
            out.write(
                f"{kind}\t{resource.ref.scope_id}\trevision {resource.current_revision}\t"
                f"{resource.path}\n"
            )
    return 0


def _resource_history(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    request = md.ListRevisionsRequest(ref=_ref(args), page_size=args.limit)
    response = stubs.api.resources.ListRevisions(request)
    if not json_answered(args, out, response):
        for revision in response.revisions:
            created = revision.created_at.ToJsonString()
            out.write(
                f"{revision.revision}\t{created}\t{revision.mutation_source}\t"
                f"{revision.byte_size} bytes\n"
            )
    return 0


def _resource_show(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    response = stubs.api.resources.GetRevision(
        md.GetRevisionRequest(ref=_ref(args), revision=args.revision)
    )
    if not json_answered(args, out, response):
        out.write(response.revision.content + "\n")
    return 0


def _resource_diff(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    response = stubs.api.resources.DiffRevisions(
        md.DiffRevisionsRequest(ref=_ref(args), from_revision=args.older, to_revision=args.newer)
    )
    if not json_answered(args, out, response):
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
        current = stubs.api.resources.GetRevision(md.GetRevisionRequest(ref=ref))
        preview = stubs.api.resources.DiffRevisions(
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
    response = stubs.api.resources.RollbackResource(
        md.RollbackResourceRequest(ref=ref, revision=args.revision)
    )
    if not json_answered(args, out, response):
        out.write(response.notice + "\n")
    return 0
