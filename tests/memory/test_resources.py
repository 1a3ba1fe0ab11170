"""Resource versioning through the RPCs and the `memoryd memory|resource` commands."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import pytest

import memoryd_client as md
from memoryd.testing.server_process import ServerProcess
from tests.helpers import Ran, Serving, fresh_conversation, rpc_error, run_memoryd, store

LABEL = r"user_md @ revision {n} \(\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{{3}}Z\)"


def cli(server: Serving, *args: str, stdin: str = "") -> Ran:
    """A CLI command against `server`, in this process."""
    return run_memoryd(*args, "--address", server.address, stdin=stdin)


def terminal_cli(
    server: ServerProcess, *args: str, answer: str
) -> subprocess.CompletedProcess[str]:
    """The CLI with a terminal (a pseudo-terminal) as stdin, typing `answer`."""
    controller, terminal = pty.openpty()
    try:
        os.write(controller, answer.encode())
        return subprocess.run(
            [sys.executable, "-m", "memoryd", *args, "--address", server.address],
            stdin=terminal,
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
    finally:
        os.close(terminal)
        os.close(controller)


@pytest.fixture
async def versioned(memory: md.Stubs) -> md.Conversation:
    """An agent whose USER.md has three revisions: tea, + chess, tea archived."""
    conversation = fresh_conversation()
    tea = await store(memory, conversation, "tea", "Prefers tea", md.CATEGORY_PREFERENCE)
    await store(memory, conversation, "chess", "Likes chess", md.CATEGORY_INTEREST)
    await memory.memory.ArchiveMemory(md.ArchiveMemoryRequest(conversation=conversation, id=tea.id))
    return conversation


def user_ref(conversation: md.Conversation) -> md.ResourceRef:
    return md.ResourceRef(agent_id=conversation.agent_id, type=md.RESOURCE_TYPE_USER_MD)


async def test_diff_is_unified_and_labelled(memory: md.Stubs, versioned: md.Conversation) -> None:
    diff = await memory.resources.DiffRevisions(
        md.DiffRevisionsRequest(ref=user_ref(versioned), from_revision=1, to_revision=2)
    )
    lines = diff.diff.split("\n")
    assert re.fullmatch("--- " + LABEL.format(n=1), lines[0])
    assert re.fullmatch(r"\+\+\+ " + LABEL.format(n=2), lines[1])
    assert lines[2:] == [
        "@@ -1,2 +1,5 @@",
        " ## Preferences",
        " - Prefers tea",
        "+",
        "+## Interests",
        "+- Likes chess",
    ]
    assert diff.from_label == lines[0][4:]
    same = await memory.resources.DiffRevisions(
        md.DiffRevisionsRequest(ref=user_ref(versioned), from_revision=2, to_revision=2)
    )
    assert same.diff == ""


async def test_a_rollback_puts_the_rows_back_so_the_file_stays_rolled_back(
    memory: md.Stubs, server: ServerProcess, versioned: md.Conversation
) -> None:
    """USER.md rolled back to revision 1 (tea): the row archived since is restored, the row
    learnt since archived, and a later write that changes nothing in USER.md leaves it so (the
    file used to be rebuilt from rows that still said chess)."""
    done = await memory.resources.RollbackResource(
        md.RollbackResourceRequest(ref=user_ref(versioned), revision=1)
    )
    assert done.changed
    assert (done.revision.revision, done.revision.parent_revision) == (4, 3)
    assert done.revision.mutation_source == "rollback"
    # A rollback keeps the record of what the content renders, for erasure to find it.
    first = await memory.resources.GetRevision(
        md.GetRevisionRequest(ref=user_ref(versioned), revision=1)
    )
    first_provenance = json.loads(first.revision.provenance)
    assert len(first_provenance["rendered"]) == 1
    assert json.loads(done.revision.provenance) == {
        "rolled_back_to": 1,
        "rendered": first_provenance["rendered"],
        "values": {str(first_provenance["rendered"][0]): "Prefers tea"},
    }
    assert done.notice == (
        "Rolled back user_md to the content of revision 1 (new revision 4). Memory rows put "
        "back as the revision had them (1 learnt since archived (RestoreMemory brings one "
        "back); 1 archived since restored). The file stays so until something new is learnt."
    )
    user_md = server.home / "memory" / versioned.agent_id / "USER.md"
    assert user_md.read_text(encoding="utf-8") == "## Preferences\n- Prefers tea"
    prompt = await memory.context.GetPromptContext(
        md.GetPromptContextRequest(agent_id=versioned.agent_id)
    )
    assert prompt.user_md == "## Preferences\n- Prefers tea"
    assert prompt.user_usage.revision == 4
    rows = await memory.memory.ListMemories(
        md.ListMemoriesRequest(conversation=versioned, archived=md.ARCHIVED_FILTER_ALL)
    )
    states = {
        row.memory.key: (row.memory.archived, row.memory.archived_by) for row in rows.memories
    }
    assert states == {"tea": (False, ""), "chess": (True, "rollback")}
    again = await memory.resources.RollbackResource(
        md.RollbackResourceRequest(ref=user_ref(versioned), revision=1)
    )
    assert not again.changed
    assert again.revision.revision == 4
    assert "already were as the revision had them" in again.notice
    # A write that USER.md does not show: the file stays as rolled back.
    await store(
        memory,
        versioned,
        "project",
        "Drafting the Q3 plan",
        md.CATEGORY_CONTEXT,
        scope_type=md.SCOPE_TYPE_CONVERSATION,
    )
    unchanged = await memory.context.GetPromptContext(
        md.GetPromptContextRequest(agent_id=versioned.agent_id)
    )
    assert unchanged.user_md == "## Preferences\n- Prefers tea"
    assert unchanged.user_usage.revision == 4
    # Something new about the user: the file shows it beside what was rolled back to.
    await store(memory, versioned, "goal", "Learn Go", md.CATEGORY_GOAL)
    rebuilt = await memory.context.GetPromptContext(
        md.GetPromptContextRequest(agent_id=versioned.agent_id)
    )
    assert rebuilt.user_md == "## Preferences\n- Prefers tea\n\n## Goals\n- Learn Go"
    assert user_md.read_text(encoding="utf-8") == rebuilt.user_md
    history = await memory.resources.ListRevisions(
        md.ListRevisionsRequest(ref=user_ref(versioned), limit=2)
    )
    assert [r.revision for r in history.revisions] == [5, 4]
    older = await memory.resources.ListRevisions(
        md.ListRevisionsRequest(ref=user_ref(versioned), before_revision=4)
    )
    assert [r.revision for r in older.revisions] == [3, 2, 1]


async def test_a_rollback_sets_back_a_value_changed_since_and_keeps_the_order(
    memory: md.Stubs, server: ServerProcess
) -> None:
    conversation = fresh_conversation()
    await store(memory, conversation, "city", "Lives in Berlin", md.CATEGORY_IDENTITY)
    await store(memory, conversation, "name", "Called Ada", md.CATEGORY_IDENTITY)
    before = await memory.context.GetPromptContext(
        md.GetPromptContextRequest(agent_id=conversation.agent_id)
    )
    await store(memory, conversation, "city", "Lives in Paris", md.CATEGORY_IDENTITY)
    done = await memory.resources.RollbackResource(
        md.RollbackResourceRequest(ref=user_ref(conversation), revision=before.user_usage.revision)
    )
    assert "1 changed since set back" in done.notice
    assert done.revision.content == before.user_md
    rows = await memory.memory.ListMemories(md.ListMemoriesRequest(conversation=conversation))
    assert {row.memory.key: row.memory.value for row in rows.memories}["city"] == "Lives in Berlin"
    await store(memory, conversation, "project", "Q3", md.CATEGORY_CONTEXT)
    after = await memory.context.GetPromptContext(
        md.GetPromptContextRequest(agent_id=conversation.agent_id)
    )
    assert after.user_md == before.user_md


@pytest.mark.parametrize(
    ("call", "status", "message"),
    [
        (
            lambda m, ref: m.resources.GetRevision(md.GetRevisionRequest(ref=ref, revision=99)),
            grpc.StatusCode.NOT_FOUND,
            "has no revision 99",
        ),
        (
            lambda m, ref: m.resources.RollbackResource(
                md.RollbackResourceRequest(ref=ref, revision=99)
            ),
            grpc.StatusCode.NOT_FOUND,
            "has no revision 99",
        ),
        (
            lambda m, ref: m.resources.RollbackResource(md.RollbackResourceRequest(ref=ref)),
            grpc.StatusCode.INVALID_ARGUMENT,
            "revision is required",
        ),
        (
            lambda m, ref: m.resources.DiffRevisions(
                md.DiffRevisionsRequest(ref=ref, from_revision=1)
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "to_revision is required",
        ),
        (
            lambda m, _ref: m.resources.GetRevision(md.GetRevisionRequest(ref=md.ResourceRef())),
            grpc.StatusCode.INVALID_ARGUMENT,
            "ref.type is required",
        ),
        (
            lambda m, _ref: m.resources.ListRevisions(
                md.ListRevisionsRequest(
                    ref=md.ResourceRef(agent_id="nobody-here", type=md.RESOURCE_TYPE_MEMORY_MD)
                )
            ),
            grpc.StatusCode.NOT_FOUND,
            "has no revisions",
        ),
    ],
)
async def test_bad_resource_requests(
    memory: md.Stubs,
    versioned: md.Conversation,
    call: Callable[[md.Stubs, md.ResourceRef], Awaitable[Any]],
    status: grpc.StatusCode,
    message: str,
) -> None:
    error = await rpc_error(call(memory, user_ref(versioned)))
    assert error.code() == status
    assert message in (error.details() or "")


async def test_the_cli_commands(server: ServerProcess, versioned: md.Conversation) -> None:
    agent = ["--agent", versioned.agent_id]
    listed = cli(server, "resource", "list", *agent)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout == f"user_md\tdefault\trevision 3\tmemory/{versioned.agent_id}/USER.md\n"
    history = cli(server, "resource", "history", "user_md", "--limit", "2", *agent)
    assert [line.split("\t")[0] for line in history.stdout.splitlines()] == ["3", "2"]
    assert history.stdout.splitlines()[0].endswith("\tmemory_archive\t26 bytes")
    shown = cli(server, "resource", "show", "user_md", "1", *agent)
    assert shown.stdout == "## Preferences\n- Prefers tea\n"
    diff = cli(server, "resource", "diff", "user_md", "2", "3", *agent)
    assert diff.stdout.splitlines()[2:] == [
        "@@ -1,5 +1,2 @@",
        "-## Preferences",
        "-- Prefers tea",
        "-",
        " ## Interests",
        " - Likes chess",
    ]
    # On a terminal the user is asked first.
    declined = terminal_cli(server, "resource", "rollback", "user_md", "1", *agent, answer="n\n")
    assert declined.returncode == 1
    assert "Roll back user_md to revision 1? [y/N] rollback cancelled" in declined.stdout
    assert "+## Preferences" in declined.stdout  # the preview
    accepted = terminal_cli(server, "resource", "rollback", "user_md", "1", *agent, answer="y\n")
    assert accepted.returncode == 0
    assert "new revision 4" in accepted.stdout
    # A script is not asked (whatever its stdin holds): it rolls back and prints what changed.
    scripted = cli(server, "resource", "rollback", "user_md", "3", *agent, stdin="n\n")
    assert scripted.returncode == 0, scripted.stderr
    assert "[y/N]" not in scripted.stdout
    assert "-## Preferences" in scripted.stdout  # what changed
    assert "new revision 5" in scripted.stdout
    as_json = json.loads(
        cli(server, "resource", "rollback", "user_md", "2", "--yes", "--json", *agent).stdout
    )
    assert as_json["changed"] is True
    assert as_json["revision"]["revision"] == "6"
    # Revision 2 showed tea and chess: the rollback put both rows back.
    memories = cli(server, "memory", "list", "--archived", "all", *agent)
    tea_id = next(line.split("\t")[0] for line in memories.stdout.splitlines() if "tea" in line)
    assert "(archived)" not in memories.stdout
    forgot = cli(server, "memory", "forget", tea_id, "--reason", "no longer true", *agent)
    assert forgot.stdout == f"forgot memory {tea_id}\n"
    assert "(archived)" in cli(server, "memory", "list", "--archived", "all", *agent).stdout
    restored = cli(server, "memory", "restore", tea_id, *agent)
    assert restored.stdout == f"restored memory {tea_id}\n"
    shown_json = json.loads(cli(server, "memory", "show", tea_id, "--json", *agent).stdout)
    assert shown_json["memory"]["key"] == "tea"
    assert "archived" not in shown_json["memory"]
    missing = cli(server, "memory", "show", "999999999", *agent)
    assert missing.returncode == 1
    assert missing.stderr == "memoryd: NOT_FOUND: memory 999999999 not found\n"
    for command in (["memory", "list"], ["resource", "list"], ["resource", "history", "user_md"]):
        output = cli(server, *command, "--json", *agent)
        assert output.returncode == 0
        assert isinstance(json.loads(output.stdout), dict)
