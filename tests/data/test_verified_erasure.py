"""Verified erasure through the real server: after PurgeOwner (and after PurgeConversation) a
unique marker written by the erased owner is in neither memory.db nor memory.db-wal, byte for
byte, while another owner's marker, written alongside, still is (so the search can find what is
there). The receipt counts every table; the owner's prompt files are gone from the disk."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import apsw
import grpc
import pytest

import memoryd_client as md
from memoryd.storage.connection import SqliteConnection
from memoryd.storage.sql import one
from memoryd.testing.configs import review_config
from memoryd.testing.fake_model import FakeModel
from memoryd.testing.server_process import ServerProcess
from tests.backends import on_postgres
from tests.memory.test_resources import cli, terminal_cli
from tests.memory.test_retrieval import embedded

# Exercises storage: make test runs it on PostgreSQL too.
pytestmark = pytest.mark.storage

CONFIG_EXTRA = "\n[memoryd.realtime]\npersist_transcripts = true\n"


def every_file(home: Path) -> bytes:
    """Every byte of every file under the data directory."""
    return b"".join(path.read_bytes() for path in sorted(home.rglob("*")) if path.is_file())


def vectors_of(home: Path, owner: str) -> int:
    """The owner's message and memory-row vectors in the database, and any vector whose message
    or row is gone (there must be none)."""
    connection = SqliteConnection(str(home / "memory.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        (count,) = one(
            connection,
            "SELECT (SELECT count(*) FROM message_vectors AS v LEFT JOIN messages AS m "
            "ON m.id = v.message_id WHERE m.id IS NULL OR m.owner_id = ?) + "
            "(SELECT count(*) FROM memory_vectors AS v LEFT JOIN memories AS r "
            "ON r.id = v.memory_id WHERE r.id IS NULL OR r.owner_id = ?)",
            (owner, owner),
        )
    finally:
        connection.close()
    return int(count)


def raw(home: Path) -> bytes:
    """Every byte of the database and its WAL, as they are on disk now."""
    found = b""
    for name in ("memory.db", "memory.db-wal"):
        path = home / name
        if path.exists():
            found += path.read_bytes()
    return found


class Served:
    """A started server, its stubs and its fake model."""

    def __init__(self, server: ServerProcess, channel: grpc.aio.Channel, model: FakeModel) -> None:
        self.server = server
        self.channel = channel
        self.memory = md.Stubs(channel)
        self.compaction = md.Stubs(channel)
        self.model = model


@pytest.fixture
async def served(start_server: type[ServerProcess], tmp_path: Path) -> AsyncIterator[Served]:
    with FakeModel() as model:
        config = review_config(model, enabled=False) + CONFIG_EXTRA
        server = start_server(tmp_path / "home", config=config).start()
        async with md.connect(server.address) as channel:
            yield Served(server, channel, model)


async def fill(served: Served, owner: str, marker: str) -> None:
    """The marker in every place an owner's words can be: messages, a memory row rendered into
    USER.md, a conversation note, a voice transcript, a checkpoint summary, a job run."""
    chat = md.Conversation(owner_id=owner, channel="telegram", chat_id=f"{owner}-chat")
    memory = served.memory
    await memory.conversations.AppendMessages(
        md.AppendMessagesRequest(
            conversation=chat,
            messages=[md.user(owner, f"my code word is {marker}") for _ in range(3)],
        )
    )
    await memory.memory.StoreMemory(
        md.StoreMemoryRequest(
            conversation=chat, category=md.CATEGORY_PREFERENCE, key="word", value=f"Uses {marker}"
        )
    )
    await memory.memory.StoreMemory(
        md.StoreMemoryRequest(conversation=chat, key="note", value=f"note {marker}")
    )
    await memory.memory.StoreMemory(
        md.StoreMemoryRequest(
            owner=md.OwnerScope(owner_id=owner),
            job_id="digest",
            run_id="r1",
            category=md.CATEGORY_JOB_RUN_SUMMARY,
            key="r1",
            value=f"digest {marker}",
        )
    )

    # A fact the review learnt: its run keeps the value it wrote (review_operations).
    served.model.reply(
        json.dumps(
            {
                "operations": [
                    {
                        "action": "add",
                        "target": "user",
                        "category": "interest",
                        "value": f"Collects {marker}",
                    }
                ]
            }
        )
    )
    learnt = await memory.reviews.ReviewNow(md.ReviewNowRequest(conversation=chat))
    assert learnt.reviews[0].ops_added == 1, learnt

    async def voice() -> AsyncIterator[md.StreamTranscriptRequest]:
        yield md.StreamTranscriptRequest(
            open=md.TranscriptOpen(device_id=f"{owner}-dev", session_id="s", owner_id=owner)
        )
        yield md.StreamTranscriptRequest(
            segment=md.TranscriptSegment(seq=1, speaker=md.SPEAKER_USER, text=f"said {marker}")
        )
        yield md.StreamTranscriptRequest(end=md.TranscriptEnd())

    async for _ in memory.conversations.StreamTranscript(voice()):
        pass
    long = md.Conversation(owner_id=owner, channel="telegram", chat_id=f"{owner}-long")
    words = " ".join(["trip"] * 300)
    await memory.conversations.AppendMessages(
        md.AppendMessagesRequest(
            conversation=long, messages=[md.user(owner, words) for _ in range(4)]
        )
    )
    served.model.reply("Nothing to save.")
    await memory.reviews.ReviewNow(md.ReviewNowRequest(conversation=long))
    served.model.reply(f"The user planned a trip; code word {marker}.")
    compacted = await served.compaction.context.Compact(
        md.CompactRequest(conversation=long, context_window=1200)
    )
    assert compacted.outcome == md.COMPACTION_OUTCOME_COMPACTED, compacted.message


@pytest.mark.sqlite_only(
    "reads SQLite's files byte by byte (PostgreSQL: tests/storage/test_postgres_operations.py)"
)
async def test_purge_owner_leaves_no_byte_of_the_owner_in_the_database_files(
    served: Served,
) -> None:
    victim, keeper = "victim", "keeper"
    gone, kept = f"zq{uuid.uuid4().hex[:12]}gone", f"zq{uuid.uuid4().hex[:12]}kept"
    await fill(served, victim, gone)
    await fill(served, keeper, kept)
    home = served.server.home
    assert gone.encode() in raw(home)  # the search finds what is there
    user_md = home / "memory" / "main" / "owners" / victim / "USER.md"
    assert gone in user_md.read_text(encoding="utf-8")

    checkpoint = md.ResourceRef(
        agent_id="main",
        type=md.RESOURCE_TYPE_CHECKPOINT,
        scope_id="victim:telegram:victim-long:root",
    )
    summaries = await served.memory.resources.ListRevisions(md.ListRevisionsRequest(ref=checkpoint))
    assert len(summaries.revisions) == 1
    await embedded(served.memory)  # every message and row has its vector
    assert vectors_of(home, victim) > 0

    done = cli(served.server, "purge-owner", "main", victim, "--json")
    assert done.returncode == 0, done.stderr
    receipt = json.loads(done.stdout)
    erased = {item["table"]: int(item.get("rows", 0)) for item in receipt["erased"]}
    assert erased["messages"] >= 9  # 3 + the transcript's + 4 long + the checkpoint message
    assert erased["conversations"] == 3
    assert erased["memories"] >= 3
    assert erased["resource_revisions"] >= 2  # USER.md's, and the checkpoint summary
    assert erased["transcript_sessions"] == 1
    assert erased["scheduled_jobs"] == 1
    assert erased["message_vectors"] >= 9
    assert erased["memory_vectors"] >= 3
    assert erased["review_operations"] == 1
    assert erased["activity_hours"] >= 3
    assert int(receipt["prompt_files_removed"]) == 1  # USER.md (nothing went to MEMORY.md)
    assert receipt["wal_truncated"] is True

    data = raw(home)
    assert gone.encode() not in data
    assert kept.encode() in data
    assert vectors_of(home, victim) == 0
    assert vectors_of(home, keeper) > 0
    assert not user_md.exists()
    assert (home / "memory" / "main" / "owners" / keeper / "USER.md").exists()
    listed = await served.memory.conversations.ListMessages(
        md.ListMessagesRequest(
            conversation=md.Conversation(owner_id=victim, channel="telegram", chat_id="victim-chat")
        )
    )
    assert list(listed.messages) == []
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await served.memory.resources.ListRevisions(md.ListRevisionsRequest(ref=checkpoint))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    prompt = await served.memory.context.GetPromptContext(
        md.GetPromptContextRequest(owner_id=victim)
    )
    assert gone not in prompt.user_md
    recalled = await served.memory.memory.Recall(
        md.RecallRequest(
            conversation=md.Conversation(
                owner_id=keeper, channel="telegram", chat_id="keeper-chat"
            ),
            query=kept,
            scope=md.RECALL_SCOPE_ALL,
        )
    )
    assert recalled.hits  # the other owner is untouched

    again = cli(served.server, "purge-owner", "main", victim, "--json")
    assert again.returncode == 0, again.stderr
    assert all(int(item.get("rows", 0)) == 0 for item in json.loads(again.stdout)["erased"])


async def test_purge_owner_needs_an_owner(served: Served) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await served.memory.admin.PurgeOwner(md.PurgeOwnerRequest(agent_id="main"))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details() == "owner_id is required"


@pytest.mark.sqlite_only("reads SQLite's files byte by byte")
async def test_purge_conversation_scrubs_too_and_old_revisions_that_quoted_it_go(
    served: Served,
) -> None:
    gone = f"zq{uuid.uuid4().hex[:12]}conv"
    chat = md.Conversation(owner_id="ada", channel="telegram", chat_id="to-purge")
    other = md.Conversation(owner_id="ada", channel="telegram", chat_id="stays")
    memory = served.memory
    await memory.conversations.AppendMessages(
        md.AppendMessagesRequest(conversation=chat, messages=[md.user("ada", f"said {gone}")])
    )
    await memory.memory.StoreMemory(
        md.StoreMemoryRequest(
            conversation=chat,
            scope_type=md.SCOPE_TYPE_CONVERSATION,
            category=md.CATEGORY_CONTEXT,
            key="ctx",
            value=f"Context {gone}",
        )
    )
    # A later change renders MEMORY.md again: the older revision still quotes the row.
    await memory.memory.StoreMemory(
        md.StoreMemoryRequest(
            conversation=other, category=md.CATEGORY_CONTEXT, key="later", value="Later context"
        )
    )
    ref = md.ResourceRef(agent_id="main", type=md.RESOURCE_TYPE_MEMORY_MD, scope_id="ada")
    revisions = await memory.resources.ListRevisions(md.ListRevisionsRequest(ref=ref, limit=50))
    contents = [
        (
            await memory.resources.GetRevision(md.GetRevisionRequest(ref=ref, revision=r.revision))
        ).revision
        for r in revisions.revisions
    ]
    quoted = [r.revision for r in contents if gone in r.content]
    assert quoted, "the conversation context was rendered into MEMORY.md"
    assert gone.encode() in raw(served.server.home)
    await embedded(memory)
    assert vectors_of(served.server.home, "ada") == 3  # the message, and two rows

    purged = await memory.conversations.PurgeConversation(
        md.PurgeConversationRequest(conversation=chat)
    )
    assert (purged.messages_deleted, purged.memories_deleted) == (1, 1)
    assert gone.encode() not in raw(served.server.home)
    assert vectors_of(served.server.home, "ada") == 1  # the row of the other conversation
    left = await memory.resources.ListRevisions(md.ListRevisionsRequest(ref=ref, limit=50))
    assert not {r.revision for r in left.revisions} & set(quoted)
    current = await memory.resources.GetRevision(md.GetRevisionRequest(ref=ref))
    assert "Later context" in current.revision.content


async def test_purge_owner_asks_first_on_a_terminal(served: Served) -> None:
    chat = md.Conversation(owner_id="asked", channel="telegram", chat_id="c")
    await served.memory.conversations.AppendMessages(
        md.AppendMessagesRequest(conversation=chat, messages=[md.user("asked", "hello")])
    )
    declined = terminal_cli(served.server, "purge-owner", "main", "asked", answer="n\n")
    assert declined.returncode == 1
    assert "Erase everything of owner 'asked' of agent 'main'" in declined.stdout
    assert "nothing was erased" in declined.stdout
    listed = await served.memory.conversations.ListMessages(
        md.ListMessagesRequest(conversation=chat)
    )
    assert [m.content for m in listed.messages] == ["hello"]
    accepted = terminal_cli(served.server, "purge-owner", "main", "asked", answer="y\n")
    assert accepted.returncode == 0, accepted.stderr
    assert "messages\t1" in accepted.stdout
    listed = await served.memory.conversations.ListMessages(
        md.ListMessagesRequest(conversation=chat)
    )
    assert list(listed.messages) == []


async def compacted(served: Served, conversation: md.Conversation, summary: str) -> md.Checkpoint:
    """Long messages in `conversation`, reviewed, then compacted into `summary`."""
    words = " ".join(["trip"] * 300)
    await served.memory.conversations.AppendMessages(
        md.AppendMessagesRequest(
            conversation=conversation, messages=[md.user("ada", words) for _ in range(4)]
        )
    )
    await served.memory.reviews.ReviewNow(md.ReviewNowRequest(conversation=conversation))
    served.model.reply(summary)
    done = await served.compaction.context.Compact(
        md.CompactRequest(conversation=conversation, context_window=1200)
    )
    assert done.outcome == md.COMPACTION_OUTCOME_COMPACTED, done.message
    state = await served.compaction.context.GetCompactionState(
        md.GetCompactionStateRequest(conversation=conversation)
    )
    return state.checkpoint


@pytest.mark.sqlite_only("reads SQLite's files byte by byte")
async def test_purge_conversation_erases_every_revision_that_rendered_its_rows(
    served: Served,
) -> None:
    """The red team's four cases: an earlier value of an updated row, a row archived before the
    purge, a value with a line break, and a checkpoint revision made by a rollback."""
    marks = [f"zq{uuid.uuid4().hex[:10]}m{n}" for n in range(4)]
    earlier, archived, broken, rolled_back = marks
    kept = f"zq{uuid.uuid4().hex[:10]}kept"
    chat = md.Conversation(owner_id="ada", channel="telegram", chat_id="purged")
    stays = md.Conversation(owner_id="ada", channel="telegram", chat_id="stays")
    memory = served.memory

    async def context(key: str, value: str, conversation: md.Conversation = chat) -> int:
        stored = await memory.memory.StoreMemory(
            md.StoreMemoryRequest(
                conversation=conversation,
                scope_type=md.SCOPE_TYPE_CONVERSATION,
                category=md.CATEGORY_CONTEXT,
                key=key,
                value=value,
            )
        )
        return stored.memory.id

    updated = await context("earlier", f"Earlier {earlier}")
    await memory.memory.UpdateMemory(
        md.UpdateMemoryRequest(conversation=chat, id=updated, value="Replaced since")
    )
    gone = await context("archived", f"Archived {archived}")
    await memory.memory.ArchiveMemory(md.ArchiveMemoryRequest(conversation=chat, id=gone))
    await context("broken", f"First line {broken}\nsecond line")
    await context("kept", f"Kept {kept}", stays)
    first = await compacted(served, chat, f"Summary one {rolled_back}")
    await compacted(served, chat, "Summary two")
    back = await memory.resources.RollbackResource(
        md.RollbackResourceRequest(ref=first.resource, revision=first.revision)
    )
    assert rolled_back in back.revision.content
    files = every_file(served.server.home)
    assert all(mark.encode() in files for mark in marks)

    purged = await memory.conversations.PurgeConversation(
        md.PurgeConversationRequest(conversation=chat)
    )
    assert purged.memories_deleted == 3
    assert purged.wal_truncated
    assert list(purged.residual_files) == []
    files = every_file(served.server.home)
    for mark in marks:
        assert mark.encode() not in files, mark
    assert kept.encode() in files
    ref = md.ResourceRef(agent_id="main", type=md.RESOURCE_TYPE_MEMORY_MD, scope_id="ada")
    current = await memory.resources.GetRevision(md.GetRevisionRequest(ref=ref))
    assert current.revision.content == f"## Context\n- Kept {kept}"
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await memory.resources.ListRevisions(md.ListRevisionsRequest(ref=first.resource))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


async def test_two_owners_in_one_chat_keep_their_own_checkpoints_through_rollback_and_purge(
    served: Served,
) -> None:
    victim_mark, keeper_mark = (f"zq{uuid.uuid4().hex[:10]}{who}" for who in ("v", "k"))
    victim = md.Conversation(owner_id="victim", channel="telegram", chat_id="shared")
    keeper = md.Conversation(owner_id="keeper", channel="telegram", chat_id="shared")
    mine = await compacted(served, victim, f"Victim said {victim_mark}")
    theirs = await compacted(served, keeper, f"Keeper said {keeper_mark}")
    assert mine.resource.scope_id == "victim:telegram:shared:root"
    assert theirs.resource.scope_id == "keeper:telegram:shared:root"
    listed = await served.memory.resources.ListRevisions(
        md.ListRevisionsRequest(ref=theirs.resource)
    )
    assert [r.revision for r in listed.revisions] == [theirs.revision]
    # The keeper's resource holds none of the victim's revisions to roll back to.
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await served.memory.resources.RollbackResource(
            md.RollbackResourceRequest(ref=theirs.resource, revision=theirs.revision + 1)
        )
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    await compacted(served, victim, "Victim again")
    await served.memory.resources.RollbackResource(
        md.RollbackResourceRequest(ref=mine.resource, revision=mine.revision)
    )

    done = cli(served.server, "purge-owner", "main", "victim", "--json")
    assert done.returncode == 0, done.stderr
    if (
        not on_postgres()
    ):  # SQLite's files (PostgreSQL's: tests/storage/test_postgres_operations.py)
        files = every_file(served.server.home)
        assert victim_mark.encode() not in files
        assert keeper_mark.encode() in files
    state = await served.compaction.context.GetCompactionState(
        md.GetCompactionStateRequest(conversation=keeper)
    )
    current = await served.memory.resources.GetRevision(
        md.GetRevisionRequest(ref=state.checkpoint.resource, revision=state.checkpoint.revision)
    )
    assert current.revision.content == f"Keeper said {keeper_mark}"
