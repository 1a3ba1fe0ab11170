"""A backfill stored as already reviewed (IngestMessages' as_reviewed) costs no model calls,
and never makes the review skip input that was waiting before it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import memoryd_client as md
from memoryd.testing.fake_model import FakeModel
from tests.data.test_export_import import conversation_line, header, message_line, run_cli
from tests.helpers import fresh_conversation
from tests.review_helpers import Reviewing, review_now, turn

# Exercises storage: make test runs it on PostgreSQL too.
pytestmark = pytest.mark.storage

NOTHING = json.dumps({"operations": []})


def old(
    conversation: md.Conversation, count: int, role: md.Role.ValueType = md.ROLE_USER
) -> list[md.IngestedMessage]:
    return [
        md.IngestedMessage(
            conversation=conversation,
            message=md.NewMessage(role=role, sender="ada", content=f"old message {n}"),
        )
        for n in range(count)
    ]


async def ingest(
    memory: md.Stubs, *batches: list[md.IngestedMessage], as_reviewed: bool
) -> md.IngestMessagesResponse:
    async def requests() -> AsyncIterator[md.IngestMessagesRequest]:
        for batch in batches:
            yield md.IngestMessagesRequest(messages=batch, as_reviewed=as_reviewed)

    return await memory.conversations.IngestMessages(requests())


async def unread(memory: md.Stubs, conversation: md.Conversation) -> int:
    state = await memory.reviews.GetReviewState(md.GetReviewStateRequest(conversation=conversation))
    return state.unread_messages


async def test_a_backfill_stored_as_reviewed_is_never_sent_to_the_model(
    reviewing: Reviewing, model: FakeModel
) -> None:
    memory = reviewing.memory
    conversation = fresh_conversation()
    assistant = old(conversation, 3, md.ROLE_ASSISTANT)
    report = await ingest(
        memory, old(conversation, 60) + assistant, old(conversation, 40), as_reviewed=True
    )
    assert (report.stored, report.stored_as_reviewed, report.queued_for_review) == (103, 100, 0)
    assert await unread(memory, conversation) == 0
    result = await review_now(memory, conversation)
    assert result.status == md.REVIEW_STATUS_SKIPPED
    assert model.requests == []

    # What is said after the backfill is reviewed, and only that.
    model.reply(NOTHING)
    await memory.conversations.AppendMessages(
        md.AppendMessagesRequest(conversation=conversation, messages=turn("I moved to Lisbon"))
    )
    assert await unread(memory, conversation) == 1
    await review_now(memory, conversation)
    (request,) = model.requests
    prompt = json.dumps(request["messages"])
    assert "I moved to Lisbon" in prompt
    assert "old message" not in prompt


async def test_without_the_option_a_backfill_is_queued_and_counted(
    reviewing: Reviewing,
) -> None:
    memory = reviewing.memory
    conversation = fresh_conversation()
    report = await ingest(memory, old(conversation, 50), as_reviewed=False)
    assert (report.stored, report.queued_for_review, report.stored_as_reviewed) == (50, 50, 0)
    assert await unread(memory, conversation) == 50


async def test_input_waiting_before_a_backfill_keeps_the_backfill_for_review(
    reviewing: Reviewing,
) -> None:
    """The review reads in order: passing over the backfill would pass over the waiting input."""
    memory = reviewing.memory
    waiting, clean = fresh_conversation(), fresh_conversation()
    await memory.conversations.AppendMessages(
        md.AppendMessagesRequest(conversation=waiting, messages=turn("my sister is called Ines"))
    )
    report = await ingest(memory, old(waiting, 5) + old(clean, 7), as_reviewed=True)
    assert (report.stored, report.queued_for_review, report.stored_as_reviewed) == (12, 5, 7)
    assert await unread(memory, waiting) == 6
    assert await unread(memory, clean) == 0


async def test_a_resent_backfill_is_still_counted_once(reviewing: Reviewing) -> None:
    memory = reviewing.memory
    conversation = fresh_conversation()
    batch = [
        md.IngestedMessage(
            conversation=conversation,
            message=md.NewMessage(
                role=md.ROLE_USER, sender="ada", content=f"m{n}", client_message_id=f"b-{n}"
            ),
        )
        for n in range(4)
    ]
    first = await ingest(memory, batch[:2], as_reviewed=True)
    again = await ingest(memory, batch, as_reviewed=True)
    assert (first.stored_as_reviewed, again.stored_as_reviewed, again.duplicates) == (2, 2, 2)
    assert await unread(memory, conversation) == 0


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
    assert await unread(memory, md.Conversation(chat_id="hand-made", **owner)) == 0
    assert await unread(memory, md.Conversation(chat_id="exported", **owner)) == 2

    # Without the flag, the same kind of file leaves its history for review.
    plain = tmp_path / "plain.jsonl"
    plain.write_text(
        "\n".join([header(), conversation_line("plain"), message_line(9_000_201, "plain")]) + "\n",
        encoding="utf-8",
    )
    text = run_cli(reviewing.server, "import", str(plain)).stdout
    assert "stored as already reviewed" not in text
    assert await unread(memory, md.Conversation(chat_id="plain", **owner)) == 1
