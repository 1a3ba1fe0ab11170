"""A backfill stored as already reviewed (IngestMessages' as_reviewed) costs no model calls,
and never makes the review skip input that was waiting before it. The use cases are called
in-process (tests/in_process.py); `memoryd import --as-reviewed` goes through a server."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import memoryd_client as md
from memoryd.domain.conversation import ConversationKey, conversation_key
from memoryd.domain.messages import Role, SentMessage
from memoryd.domain.review_runs import ReviewResult, ReviewSelection, ReviewStatus
from memoryd.runtime import Runtime
from memoryd.services.ingest import IngestBatch, IngestItem, IngestReport
from memoryd.testing.configs import review_config
from memoryd.testing.fake_model import FakeModel
from tests.data.test_export_import import conversation_line, header, message_line, run_cli
from tests.in_process import use_cases
from tests.review_helpers import Reviewing

# Exercises storage: make test runs it on PostgreSQL too.
pytestmark = pytest.mark.storage

NOTHING = json.dumps({"operations": []})


# --- the use cases, in-process (tests/in_process.py) ---------------------------------------------


@pytest.fixture
async def served(tmp_path: Path, model: FakeModel) -> AsyncIterator[Runtime]:
    """The use cases of a memoryd whose background reviewer is off: reviews run when asked."""
    async with use_cases(tmp_path / "home", config=review_config(model, enabled=False)) as runtime:
        yield runtime


def chat() -> ConversationKey:
    """A conversation no other test uses."""
    return conversation_key(
        agent_id="main",
        owner_id="ada",
        channel="telegram",
        chat_id=uuid.uuid4().hex,
        thread_scope="",
    )


def said(text: str, role: Role = Role.USER, client_id: str | None = None) -> SentMessage:
    return SentMessage(
        sender="ada",
        role=role,
        kind="chat_message",
        content=text,
        metadata_json="{}",
        client_message_id=client_id,
        created_at=None,
        trust=None,
    )


def old(key: ConversationKey, count: int, role: Role = Role.USER) -> list[IngestItem]:
    return [IngestItem(key, said(f"old message {n}", role)) for n in range(count)]


async def ingest(runtime: Runtime, *batches: list[IngestItem], as_reviewed: bool) -> IngestReport:
    async def sent() -> AsyncIterator[IngestBatch]:
        for batch in batches:
            yield IngestBatch(batch, as_reviewed=as_reviewed)

    return await runtime.services.ingest.ingest(sent())


async def unread(runtime: Runtime, key: ConversationKey) -> int:
    return (await runtime.services.reviewer.state(key)).unread


async def review(runtime: Runtime, key: ConversationKey) -> ReviewResult:
    (result,) = await runtime.services.scheduler.review_now(ReviewSelection(key, None, None))
    return result


async def test_a_backfill_stored_as_reviewed_is_never_sent_to_the_model(
    served: Runtime, model: FakeModel
) -> None:
    key = chat()
    report = await ingest(
        served, old(key, 60) + old(key, 3, Role.ASSISTANT), old(key, 40), as_reviewed=True
    )
    assert (report.stored, report.stored_as_reviewed, report.queued_for_review) == (103, 100, 0)
    assert await unread(served, key) == 0
    assert (await review(served, key)).status is ReviewStatus.SKIPPED
    assert model.requests == []

    # What is said after the backfill is reviewed, and only that.
    model.reply(NOTHING)
    await served.services.history.append(key, [said("I moved to Lisbon")])
    assert await unread(served, key) == 1
    await review(served, key)
    (request,) = model.requests
    prompt = json.dumps(request["messages"])
    assert "I moved to Lisbon" in prompt
    assert "old message" not in prompt


async def test_without_the_option_a_backfill_is_queued_and_counted(served: Runtime) -> None:
    key = chat()
    report = await ingest(served, old(key, 50), as_reviewed=False)
    assert (report.stored, report.queued_for_review, report.stored_as_reviewed) == (50, 50, 0)
    assert await unread(served, key) == 50


async def test_input_waiting_before_a_backfill_keeps_the_backfill_for_review(
    served: Runtime,
) -> None:
    """The review reads in order: passing over the backfill would pass over the waiting input."""
    waiting, clean = chat(), chat()
    await served.services.history.append(waiting, [said("my sister is called Ines")])
    report = await ingest(served, old(waiting, 5) + old(clean, 7), as_reviewed=True)
    assert (report.stored, report.queued_for_review, report.stored_as_reviewed) == (12, 5, 7)
    assert await unread(served, waiting) == 6
    assert await unread(served, clean) == 0


async def test_a_resent_backfill_is_still_counted_once(served: Runtime) -> None:
    key = chat()
    batch = [IngestItem(key, said(f"m{n}", client_id=f"b-{n}")) for n in range(4)]
    first = await ingest(served, batch[:2], as_reviewed=True)
    again = await ingest(served, batch, as_reviewed=True)
    assert (first.stored_as_reviewed, again.stored_as_reviewed, again.duplicates) == (2, 2, 2)
    assert await unread(served, key) == 0


# --- through the command line, on a server ----------------------------------------------------


async def unread_of(memory: md.Stubs, conversation: md.Conversation) -> int:
    state = await memory.reviews.GetReviewState(md.GetReviewStateRequest(conversation=conversation))
    return state.unread_messages


def review_state_line(chat: str, cursor: int) -> str:
    return json.dumps(
        {
            "record": "review_state",
            "agent_id": "main",
            "owner_id": "eve",
            "channel": "telegram",
            "chat_id": chat,
            "thread_scope": "root",
            "last_reviewed_message_id": cursor,
            "last_reviewed_at": "2026-01-01T00:00:02.000000Z",
            "last_review_started_at": "2026-01-01T00:00:02.000000Z",
            "last_review_completed_at": "2026-01-01T00:00:02.000000Z",
            "last_review_status": "ok",
            "last_review_failed_at": None,
            "failure_count": 0,
            "last_error": None,
            "pending_input": 1,
            "backlog": 0,
            "last_input_at": "2026-01-01T00:00:01.000000Z",
            "turns_since_review": 0,
        }
    )


async def test_memoryd_import_as_reviewed_keeps_an_exports_own_cursor(
    reviewing: Reviewing, tmp_path: Path
) -> None:
    """`memoryd import --as-reviewed`: history without review state is stored as reviewed; a
    conversation whose review state the file carries keeps that cursor, unread input and all."""
    lines = [
        header(),
        conversation_line("hand-made"),
        conversation_line("exported"),
        review_state_line("exported", 9_000_101),
        *(message_line(9_000_001 + n, "hand-made") for n in range(30)),
        *(message_line(9_000_101 + n, "exported") for n in range(3)),
    ]
    file = tmp_path / "old.jsonl"
    file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = run_cli(reviewing.server, "import", "--as-reviewed", str(file), "--json")
    assert json.loads(done.stdout)["stored_as_reviewed"] == 30
    memory = reviewing.memory
    owner = {"agent_id": "main", "owner_id": "eve", "channel": "telegram"}
    assert await unread_of(memory, md.Conversation(chat_id="hand-made", **owner)) == 0
    assert await unread_of(memory, md.Conversation(chat_id="exported", **owner)) == 2

    # Without the flag, the same kind of file leaves its history for review.
    plain = tmp_path / "plain.jsonl"
    plain.write_text(
        "\n".join([header(), conversation_line("plain"), message_line(9_000_201, "plain")]) + "\n",
        encoding="utf-8",
    )
    text = run_cli(reviewing.server, "import", str(plain)).stdout
    assert "stored as already reviewed" not in text
    assert await unread_of(memory, md.Conversation(chat_id="plain", **owner)) == 1
