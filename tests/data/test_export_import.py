"""`memoryd export` / `memoryd import` through the real servers and the real CLI: a round trip into
an empty data directory exports again byte for byte (ids, times, trust, metadata, archive state,
provenance, revisions, review state, checkpoints, transcript sessions); a re-import stores
nothing twice; an owner's export holds that owner only; every malformed or conflicting line is
refused with its line number, and nothing of the refused chunk is stored."""

from __future__ import annotations

import asyncio
import datetime as dt
import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import timestamp_pb2

import memoryd_client as md
from memoryd.testing.configs import review_config
from memoryd.testing.fake_model import FakeModel
from memoryd.testing.server_process import ServerProcess
from tests.helpers import Ran, Serving, append, rpc_error, user
from tests.memory.test_resources import cli
from tests.memory.test_retrieval import embedded
from tests.review_helpers import commit, review_now, turn

# Exercises storage: make test runs it on PostgreSQL too.
pytestmark = pytest.mark.storage

SUMMARY = "Ada is planning a rail trip to Lisbon in May."
REALTIME = "\n[memoryd.realtime]\npersist_transcripts = true\n"
QUIET = review_config(enabled=False) + REALTIME  # no provider, reviewer idle


def ops(*operations: dict[str, Any]) -> str:
    return json.dumps({"operations": list(operations)})


def owner_conversation(owner: str, chat: str, channel: str = "telegram") -> md.Conversation:
    return md.Conversation(agent_id="main", owner_id=owner, channel=channel, chat_id=chat)


async def transcript(memory: md.Stubs, owner: str) -> None:
    async def send() -> AsyncIterator[md.StreamTranscriptRequest]:
        yield md.StreamTranscriptRequest(
            open=md.TranscriptOpen(
                device_id="kitchen", session_id="s-1", owner_id=owner, model="rt"
            )
        )
        for seq, (speaker, text) in enumerate(
            [(md.SPEAKER_USER, "what's the weather"), (md.SPEAKER_ASSISTANT, "sunny, 21°C")], 1
        ):
            yield md.StreamTranscriptRequest(
                segment=md.TranscriptSegment(seq=seq, speaker=speaker, text=text)
            )
        yield md.StreamTranscriptRequest(end=md.TranscriptEnd())

    async for _ in memory.conversations.StreamTranscript(send()):
        pass


async def fill(memory: md.Stubs, model: FakeModel) -> None:
    """Every kind of record, with the odd values an export must carry unchanged."""
    ada = owner_conversation("ada", "ada-chat")
    sent = await commit(memory, ada, *turn("I'm vegetarian, by the way"))
    model.reply(
        ops({"action": "add", "target": "user", "category": "preference", "value": "Vegetarian"})
    )
    await review_now(memory, ada)
    stored = await memory.memory.StoreMemory(
        md.StoreMemoryRequest(
            conversation=ada,
            category=md.CATEGORY_CONTEXT,
            key="project",
            value="Migrating the café's tills — 日本語 too 🚆",
            metadata='{"tags": ["work"], "weight": 0.25}',
            confidence=0.8,
            source_message_id=sent.results[0].id,
        )
    )
    spare = await memory.memory.StoreMemory(
        md.StoreMemoryRequest(conversation=ada, category=md.CATEGORY_GOAL, key="g", value="Run")
    )
    await memory.memory.ArchiveMemory(
        md.ArchiveMemoryRequest(conversation=ada, id=spare.memory.id, reason="done")
    )
    ref = md.ResourceRef(agent_id="main", type=md.RESOURCE_TYPE_USER_MD, scope_id="ada")
    await memory.resources.RollbackResource(md.RollbackResourceRequest(ref=ref, revision=1))
    del stored

    owner = md.OwnerScope(agent_id="main", owner_id="ada")
    await memory.memory.StoreMemory(
        md.StoreMemoryRequest(
            owner=owner,
            job_id="digest",
            run_id="run-1",
            category=md.CATEGORY_JOB_RUN_SUMMARY,
            key="run-1",
            value="Sent 3 digests",
        )
    )
    await memory.memory.FinishJobRun(
        md.FinishJobRunRequest(
            owner=owner,
            job_id="digest",
            run_id="run-1",
            outcome=md.JOB_RUN_OUTCOME_SUCCEEDED,
            summary="3 sent",
        )
    )

    bob = owner_conversation("bob", "grp:42", channel="discord")
    await append(
        memory,
        bob,
        md.NewMessage(
            role=md.ROLE_USER,
            sender="bob",
            content="東京で会いましょう 🍣\nline two\ttabbed",
            metadata='{"reply_to": 7, "nested": {"x": [1, 2.5, null]}}',
            client_message_id="discord-1",
            trust=md.TRUST_GUEST,
        ),
    )
    await memory.conversations.ClearConversation(md.ClearConversationRequest(conversation=bob))
    await append(memory, bob, md.NewMessage(role=md.ROLE_USER, sender="bob", content="again"))
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(dt.datetime(2019, 5, 4, 3, 2, 1, 123456, tzinfo=dt.UTC))

    async def ingest() -> AsyncIterator[md.IngestMessagesRequest]:
        yield md.IngestMessagesRequest(
            messages=[
                md.IngestedMessage(
                    conversation=bob,
                    message=md.NewMessage(
                        role=md.ROLE_ASSISTANT, sender="bot", content="old", created_at=stamp
                    ),
                )
            ]
        )

    await memory.conversations.IngestMessages(ingest())
    await transcript(memory, "ada")


async def compacted(memory: md.Stubs, model: FakeModel, channel: grpc.aio.Channel) -> None:
    """A conversation with a checkpoint (a moved window and a checkpoint resource)."""
    long = owner_conversation("ada", "long-chat")
    words = " ".join(["trip"] * 300)
    await append(
        memory,
        long,
        *[md.NewMessage(role=md.ROLE_USER, sender="ada", content=words) for _ in range(4)],
    )
    model.reply("Nothing to save.")
    await review_now(memory, long)
    model.reply(SUMMARY)
    compaction = md.Stubs(channel)
    done = await compaction.context.Compact(
        md.CompactRequest(conversation=long, context_window=1200)
    )
    assert done.outcome == md.COMPACTION_OUTCOME_COMPACTED, done.message


def run_cli(server: Serving, *args: str, stdin: str = "") -> Ran:
    done = cli(server, *args, stdin=stdin)
    assert done.returncode == 0, done.stderr
    return done


def partial_files(folder: Path) -> list[str]:
    return [path.name for path in folder.iterdir() if path.name.endswith(".partial")]


def prompt_files(home: Path) -> dict[str, str]:
    return {
        str(path.relative_to(home)): path.read_text(encoding="utf-8")
        for path in sorted((home / "memory").rglob("*.md"))
    }


@pytest.fixture
async def source(start_server: type[ServerProcess], tmp_path: Path) -> AsyncIterator[ServerProcess]:
    """A server holding every kind of record (its reviewer runs only when asked)."""
    with FakeModel() as model:
        server = start_server(
            tmp_path / "source", config=review_config(model, enabled=False) + REALTIME
        ).start()
        async with md.connect(server.address) as channel:
            memory = md.Stubs(channel)
            await fill(memory, model)
            await compacted(memory, model, channel)
        yield server


async def test_an_export_imported_into_an_empty_home_exports_again_byte_for_byte(
    source: ServerProcess, start_server: type[ServerProcess], tmp_path: Path
) -> None:
    first = tmp_path / "first.jsonl"
    exported = run_cli(source, "export", str(first), "--json")
    summary = json.loads(exported.stdout)
    lines = first.read_text(encoding="utf-8").splitlines()
    assert summary["records"] == len(lines) - 1
    assert json.loads(lines[0]) == {
        "format": "memoryd-export",
        "version": 2,
        "agent_id": "",
        "owner_id": "",
    }
    kinds = {json.loads(line)["record"] for line in lines[1:]}
    assert kinds == {
        "conversation",
        "review_state",
        "message",
        "memory_source",
        "scheduled_job",
        "job_run",
        "memory",
        "review_run",
        "resource",
        "resource_revision",
        "transcript_session",
        "ended_session",
    }
    assert "東京で会いましょう 🍣\\nline two\\ttabbed" in first.read_text(encoding="utf-8")
    assert oct(first.stat().st_mode & 0o777) == "0o600"
    assert partial_files(tmp_path) == []

    target = start_server(tmp_path / "target", config=QUIET).start()
    imported = run_cli(target, "import", str(first), "--json")
    counts = json.loads(imported.stdout)
    assert (counts["lines"], counts["stored"], counts["present"]) == (len(lines), len(lines) - 1, 0)

    second = tmp_path / "second.jsonl"
    run_cli(target, "export", str(second))
    assert second.read_bytes() == first.read_bytes()
    assert prompt_files(target.home) == prompt_files(source.home)
    assert prompt_files(target.home)  # USER.md and MEMORY.md were written
    # Importing the same file again stores nothing twice.
    again = run_cli(target, "import", str(first))
    assert f"imported 0 records ({len(lines) - 1:,} already present)" in again.stdout

    # The imported rows are served: search (the word indexes), the window, the prompt context.
    async with md.connect(target.address) as channel:
        memory = md.Stubs(channel)
        found = await memory.conversations.SearchHistory(
            md.SearchHistoryRequest(
                conversation=owner_conversation("bob", "grp:42", channel="discord"),
                query="東京",
                mode=md.SEARCH_MODE_LEXICAL,
            )
        )
        assert [hit.message.content for hit in found.hits] == [
            "東京で会いましょう 🍣\nline two\ttabbed"
        ]
        hits = await memory.memory.Recall(
            md.RecallRequest(
                conversation=owner_conversation("ada", "ada-chat"),
                query="café",
                scope=md.RECALL_SCOPE_ALL,
            )
        )
        assert any("café" in hit.memory.value for hit in hits.hits)
        context = await memory.context.GetPromptContext(
            md.GetPromptContextRequest(agent_id="main", owner_id="ada")
        )
        assert "Vegetarian" in context.user_md
        # Vectors are not exported: the imported messages and rows are embedded again.
        status = await embedded(memory)
        messages = sum('"message"' in line for line in lines[1:])
        assert status.embedded_messages >= messages > 0
        assert status.embedded_memories > 0
        # A new message after the import gets an id above every imported one.
        appended = await append(
            memory, owner_conversation("ada", "ada-chat"), *turn("new after import")
        )
        top = max(json.loads(line).get("id", 0) for line in lines[1:] if '"message"' in line)
        assert appended.results[0].id > top


async def test_an_owners_export_holds_that_owner_only_and_round_trips(
    source: ServerProcess, start_server: type[ServerProcess], tmp_path: Path
) -> None:
    ada = tmp_path / "ada.jsonl"
    run_cli(source, "export", "--agent", "main", "--owner", "ada", str(ada))
    records = [json.loads(line) for line in ada.read_text(encoding="utf-8").splitlines()[1:]]
    owners = {r.get("owner_id", r.get("scope_id")) for r in records if r["record"] != "resource"}
    assert "bob" not in str(owners)
    assert any(r["record"] == "resource" and r["resource_type"] == "checkpoint" for r in records)
    assert any(r["record"] == "transcript_session" for r in records)

    target = start_server(tmp_path / "target", config=QUIET).start()
    run_cli(target, "import", str(ada))
    again = tmp_path / "again.jsonl"
    run_cli(target, "export", "--agent", "main", "--owner", "ada", str(again))
    assert again.read_bytes() == ada.read_bytes()


async def test_export_to_stdout_and_plain_progress_lines(source: ServerProcess) -> None:
    done = run_cli(source, "export", "--owner", "bob")
    lines = done.stdout.splitlines()
    assert json.loads(lines[0])["owner_id"] == "bob"
    assert {json.loads(line)["record"] for line in lines[1:]} >= {"conversation", "message"}
    assert f"export: {len(lines) - 1:,} of {len(lines) - 1:,} records" in done.stderr
    assert f"exported {len(lines) - 1:,} records to stdout" in done.stderr


def on_a_terminal(*command: str) -> tuple[int, str]:
    """Run `command` with a pseudo-terminal as stderr; its exit status and what it showed."""
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    try:
        done = subprocess.run(
            command, stderr=terminal, stdout=subprocess.PIPE, check=False, timeout=30
        )
        os.close(terminal)
        shown = b""
        while True:
            try:
                piece = os.read(controller, 65536)
            except OSError:  # the terminal is closed and drained
                break
            if not piece:
                break
            shown += piece
    finally:
        os.close(controller)
    return done.returncode, shown.decode("utf-8", "replace")


async def test_a_terminal_shows_a_progress_bar_with_rate_and_eta(
    source: ServerProcess, tmp_path: Path
) -> None:
    code, shown = await asyncio.to_thread(
        on_a_terminal,
        sys.executable,
        "-m",
        "memoryd",
        "export",
        str(tmp_path / "out.jsonl"),
        "--address",
        source.address,
    )
    assert code == 0
    assert "export: 100%" in shown
    assert "records/s" in shown


def header(**fields: Any) -> str:
    document = {"format": "memoryd-export", "version": 2, "agent_id": "", "owner_id": ""}
    document.update(fields)
    return json.dumps(document)


def conversation_line(chat: str, **fields: Any) -> str:
    record: dict[str, Any] = {
        "record": "conversation",
        "agent_id": "main",
        "owner_id": "eve",
        "channel": "telegram",
        "chat_id": chat,
        "thread_scope": "root",
        "window_start_id": 0,
        "window_started_at": None,
        "session_start_id": 0,
        "checkpoint_id": 0,
        "history_version": 5,
        "working_memory": "",
        "description": "",
        "peak_prompt_tokens": None,
        "context_window": None,
        "completed_turns": 0,
        "compaction_failed_at": None,
        "compaction_error": None,
        "created_at": "2026-01-01T00:00:00.000000Z",
    }
    record.update(fields)
    return json.dumps(record, ensure_ascii=False)


def message_line(message_id: int, chat: str, **fields: Any) -> str:
    record: dict[str, Any] = {
        "record": "message",
        "id": message_id,
        "agent_id": "main",
        "owner_id": "eve",
        "channel": "telegram",
        "chat_id": chat,
        "thread_scope": "root",
        "sender": "eve",
        "role": "user",
        "kind": "message",
        "content": f"hello {message_id}",
        "metadata_json": "{}",
        "trust": "operator",
        "client_message_id": None,
        "created_at": "2026-01-01T00:00:01.000000Z",
    }
    record.update(fields)
    return json.dumps(record, ensure_ascii=False)


async def import_lines(memory: md.Stubs, *chunks: Iterable[str]) -> md.ImportDataResponse:
    async def send() -> AsyncIterator[md.ImportDataRequest]:
        for chunk in chunks:
            yield md.ImportDataRequest(lines=list(chunk))

    return await memory.admin.ImportData(send())


BAD_LINES = [
    ("", "the import is empty: the first line must be the header"),
    ('{"format": "other"}', "line 1 is not a memoryd export header"),
    (
        header(version=3),
        "line 1: export format version '3' is not supported; this memoryd reads versions 1, 2",
    ),
    ("not json", "line 2 is not JSON"),
    ('{"record": "spaceship"}', "line 2: unknown record 'spaceship'; records are conversation"),
    (
        conversation_line("c", history_version={"n": 1}),
        "line 2: conversation record: history_version must be a string, a number or null, got dict",
    ),
    (
        conversation_line("c", extra=1).replace('"description": "", ', ""),
        "line 2: conversation record: missing description; unknown 'extra'",
    ),
    (conversation_line(" padded"), "line 2: conversation record: chat_id must not start or end"),
    (
        conversation_line("c", owner_id="x" * 300),
        "line 2: conversation record: owner_id is 300 characters long; the limit is 256",
    ),
    ("[" * 100_000, "line 2 nests too deeply to be a record"),
    ("[1]", "line 2 must be a JSON object"),
    ('{"record": "message", "id": NaN}', "line 2 is not JSON: NaN is not a number JSON allows"),
    (
        conversation_line("c", channel="tele:gram"),
        "line 2: conversation record: channel must not contain ':', got 'tele:gram'",
    ),
    (
        message_line(9_100_001, "nowhere"),
        "line 2: the message refers to a row that is neither stored nor earlier in the file",
    ),
    (
        conversation_line("c", completed_turns="many"),
        "line 2: conversation record: completed_turns must be an integer, got 'many'",
    ),
    (
        conversation_line("c", completed_turns=2.5),
        "line 2: conversation record: completed_turns must be an integer, got 2.5",
    ),
]


@pytest.mark.parametrize(("line", "expected"), BAD_LINES)
async def test_a_malformed_line_is_refused_with_its_number_and_nothing_is_stored(
    memory: md.Stubs, line: str, expected: str
) -> None:
    chunks = [[line]] if not line or line.startswith('{"format') else [[header(), line]]
    if line == "":
        chunks = []
    error = await rpc_error(import_lines(memory, *chunks))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert expected in (error.details() or "")


async def test_records_out_of_order_a_bad_enum_and_a_conflict_are_refused_precisely(
    memory: md.Stubs,
) -> None:
    order = await rpc_error(
        import_lines(memory, [header(), message_line(9_000_001, "o"), conversation_line("o")])
    )
    assert order.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "line 3: a conversation record after message records" in (order.details() or "")

    role = await rpc_error(
        import_lines(
            memory,
            [header(), conversation_line("r"), message_line(9_000_002, "r", role="robot")],
        )
    )
    assert role.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert role.details() == (
        "line 3: the message cannot be stored: role is not a value its column allows "
        "(a CHECK constraint of the table)"
    )
    # The chunk was refused whole: its conversation was not stored either.
    fetched = await rpc_error(
        memory.conversations.GetConversation(
            md.GetConversationRequest(conversation=owner_conversation("eve", "r"))
        )
    )
    assert fetched.code() == grpc.StatusCode.NOT_FOUND

    stored = await import_lines(
        memory, [header(), conversation_line("k"), message_line(9_000_003, "k")]
    )
    assert (stored.stored, stored.present) == (2, 0)
    present = await import_lines(
        memory, [header(), conversation_line("k"), message_line(9_000_003, "k")]
    )
    assert (present.stored, present.present) == (0, 2)
    assert [(r.record, r.stored, r.present) for r in present.records] == [
        ("conversation", 0, 1),
        ("message", 0, 1),
    ]
    conflict = await rpc_error(
        import_lines(
            memory,
            [header(), conversation_line("k"), message_line(9_000_003, "k", content="changed")],
        )
    )
    assert conflict.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert (
        "line 3: a message with the same identity (id 9000003) is already stored with other "
        "values" in (conflict.details() or "")
    )
    twice = await rpc_error(
        import_lines(
            memory,
            [header(), conversation_line("t"), message_line(9_000_004, "t")],
            [message_line(9_000_004, "t", sender="mallory")],
        )
    )
    assert twice.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "line 4: a message with the same identity (id 9000004)" in (twice.details() or "")
    # The first chunk was stored before the second was refused.
    listed = await memory.conversations.ListMessages(
        md.ListMessagesRequest(conversation=owner_conversation("eve", "t"))
    )
    assert [m.content for m in listed.messages] == ["hello 9000004"]


def compact(line: str) -> str:
    return json.dumps(json.loads(line), ensure_ascii=False, separators=(",", ":"))


async def test_an_import_cut_by_sigkill_is_run_again_and_completes_exactly(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    lines = [compact(header()), compact(conversation_line("big", history_version=1))]
    lines += [
        compact(message_line(n, "big", content=f"message {n} 東京 🚆", client_message_id=f"c{n}"))
        for n in range(1, 40_001)
    ]
    source = tmp_path / "big.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    home = tmp_path / "home"
    server = start_server(home, config=QUIET).start()
    command = [sys.executable, "-m", "memoryd", "import", str(source), "--address", server.address]
    importing = await asyncio.create_subprocess_exec(
        *command, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        while True:  # kill once part of the import has committed
            listed = await memory.conversations.ListMessages(
                md.ListMessagesRequest(conversation=owner_conversation("eve", "big"), page_size=1)
            )
            if listed.messages and listed.messages[-1].id > 5_000:
                break
            await asyncio.sleep(0.05)
    server.process.kill()
    _, said = await asyncio.wait_for(importing.communicate(), 30)
    assert importing.returncode == 1
    assert b"memoryd: UNAVAILABLE" in said

    restarted = start_server(home, config=QUIET).start()
    done = run_cli(restarted, "import", str(source), "--json")
    counts = json.loads(done.stdout)
    assert counts["stored"] + counts["present"] == len(lines) - 1
    assert counts["present"] > 0
    again = tmp_path / "again.jsonl"
    run_cli(restarted, "export", str(again))
    assert again.read_bytes() == source.read_bytes()


def resource_line(scope: str, path: str, resource_type: str = "user_md") -> str:
    return json.dumps(
        {
            "record": "resource",
            "agent_id": "main",
            "resource_type": resource_type,
            "scope_id": scope,
            "resource_path": path,
            "current_revision": 1,
            "created_at": "2026-01-01T00:00:00.000000Z",
            "updated_at": "2026-01-01T00:00:00.000000Z",
        }
    )


def revision_line(
    scope: str, revision: int, content: str, provenance: object, **fields: Any
) -> str:
    record = {
        "record": "resource_revision",
        "agent_id": "main",
        "resource_type": "user_md",
        "scope_id": scope,
        "revision": revision,
        "parent_revision": revision - 1 or None,
        "content_hash": "0" * 64,
        "content": content,
        "byte_size": len(content),
        "mutation_source": "import",
        "provenance_json": json.dumps(provenance),
        "created_at": "2026-01-01T00:00:00.000000Z",
    }
    record.update(fields)
    return json.dumps(record)


async def test_an_import_never_chooses_where_a_file_is_written(
    memory: md.Stubs, server: ServerProcess, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    link = server.home / "memory" / "link"
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(outside, target_is_directory=True)
    victim = server.home / "memory" / "main" / "owners" / "victim" / "USER.md"
    await memory.memory.StoreMemory(
        md.StoreMemoryRequest(
            owner=md.OwnerScope(owner_id="victim"),
            category=md.CATEGORY_IDENTITY,
            key="n",
            value="Victim's own name",
        )
    )
    before = victim.read_text(encoding="utf-8")
    for path in (
        str(outside / "USER.md"),
        "../../outside/USER.md",
        "memory/link/USER.md",
        "memory/main/owners/victim/USER.md",
    ):
        error = await rpc_error(
            import_lines(
                memory,
                [
                    header(),
                    resource_line("attacker", path),
                    revision_line("attacker", 1, "written by an import", {}),
                ],
            )
        )
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, path
        assert (
            "line 2: resource record: resource_path must be 'memory/main/owners/attacker/USER.md'"
        ) in (error.details() or "")
    assert list(outside.iterdir()) == []
    assert victim.read_text(encoding="utf-8") == before
    assert not (server.home / "memory" / "main" / "owners" / "attacker").exists()
    link.unlink()


async def test_a_version_1_export_has_its_shared_checkpoints_split_by_owner(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    lines = [header(version=1), *(conversation_line("shared", owner_id=o) for o in ("eve", "bob"))]
    for number, owner in ((9_500_001, "eve"), (9_500_002, "bob")):
        lines.append(
            message_line(
                number,
                "shared",
                owner_id=owner,
                role="system",
                kind="checkpoint_summary",
                content=f"summary of {owner}",
            )
        )
    old = "telegram:shared:root"
    lines.append(resource_line(old, "", "checkpoint"))
    for revision, (checkpoint, owner) in enumerate(((9_500_001, "eve"), (9_500_002, "bob")), 1):
        lines.append(
            revision_line(
                old,
                revision,
                f"summary of {owner}",
                {"checkpoint_id": checkpoint},
                resource_type="checkpoint",
            )
        )
    server = start_server(tmp_path / "home").start()
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        done = await import_lines(memory, lines)
        assert done.stored == len(lines) - 1
        listed = await memory.resources.ListResources(
            md.ListResourcesRequest(type=md.RESOURCE_TYPE_CHECKPOINT)
        )
        assert sorted(r.ref.scope_id for r in listed.resources) == [
            "bob:telegram:shared:root",
            "eve:telegram:shared:root",
        ]
        for owner, revision in (("eve", 1), ("bob", 2)):
            ref = md.ResourceRef(
                type=md.RESOURCE_TYPE_CHECKPOINT, scope_id=f"{owner}:telegram:shared:root"
            )
            found = await memory.resources.GetRevision(md.GetRevisionRequest(ref=ref))
            assert (found.revision.revision, found.revision.content) == (
                revision,
                f"summary of {owner}",
            )


async def test_a_message_appended_after_an_import_gets_an_id_never_used(
    memory: md.Stubs,
) -> None:
    chat = f"after-import-{os.getpid()}-{dt.datetime.now(dt.UTC).timestamp():.0f}"
    imported_id = 9_200_001
    await import_lines(memory, [header(), conversation_line(chat), message_line(imported_id, chat)])
    conversation = md.Conversation(owner_id="eve", channel="telegram", chat_id=chat)
    response = await append(memory, conversation, user("next"))
    assert response.results[0].id > imported_id
