"""Sessions through the real server: working memory and description belong to one session,
`/new` keeps the old ones and reviews what the ending session said first, a description falls
back to the session's first user message, and ComposeContext shows the description."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import grpc
import pytest

import memoryd_client as md
from memoryd.testing.configs import review_config
from memoryd.testing.fake_model import FakeModel
from memoryd.testing.server_process import ServerProcess
from tests.helpers import append, fresh_conversation
from tests.memory.test_resources import cli
from tests.review_helpers import Reviewing, commit, eventually, review_now, turn

# Exercises storage: make test runs it on PostgreSQL too.
pytestmark = pytest.mark.storage


def session_texts(working_memory: str, description: str) -> str:
    return json.dumps(
        {
            "operations": [
                {"action": "working_memory", "text": working_memory},
                {"action": "describe", "text": description},
            ]
        }
    )


async def conversation_of(
    memory: md.Stubs, conversation: md.Conversation
) -> md.GetConversationResponse:
    return await memory.conversations.GetConversation(
        md.GetConversationRequest(conversation=conversation)
    )


async def composed(
    channel: grpc.aio.Channel, conversation: md.Conversation
) -> md.ComposeContextResponse:
    return await md.Stubs(channel).context.ComposeContext(
        md.ComposeContextRequest(conversation=conversation, context_window=8000)
    )


def working_blocks(response: md.ComposeContextResponse) -> list[str]:
    return [p.content for p in response.parts if p.kind == md.CONTEXT_PART_KIND_WORKING_MEMORY]


async def new_session(
    memory: md.Stubs, conversation: md.Conversation
) -> md.ClearConversationResponse:
    return await memory.conversations.ClearConversation(
        md.ClearConversationRequest(conversation=conversation)
    )


async def test_new_starts_a_fresh_working_memory_and_keeps_the_old_one(
    reviewing: Reviewing, model: FakeModel
) -> None:
    memory = reviewing.memory
    conversation = fresh_conversation()
    model.reply(session_texts("Booking the Lisbon trip: trains only", "Lisbon trip planning"))
    await commit(memory, conversation, *turn("Help me plan the Lisbon trip, trains only"))
    await review_now(memory, conversation)
    before = await conversation_of(memory, conversation)
    assert (before.working_memory, before.description) == (
        "Booking the Lisbon trip: trains only",
        "Lisbon trip planning",
    )
    # The description is part of ComposeContext, in the working-memory block.
    (block,) = working_blocks(await composed(reviewing.channel, conversation))
    assert block == (
        "Session-local working memory (read-only context):\n"
        "Session description: Lisbon trip planning\n\n"
        "Booking the Lisbon trip: trains only"
    )

    await new_session(memory, conversation)
    after = await conversation_of(memory, conversation)
    assert (after.working_memory, after.description) == ("", "")
    assert working_blocks(await composed(reviewing.channel, conversation)) == []
    ended = after.previous_session
    assert (ended.working_memory, ended.description) == (
        "Booking the Lisbon trip: trains only",
        "Lisbon trip planning",
    )
    assert ended.started_after_id == 0
    assert ended.last_message_id == before.last_message_id

    # The new session's description falls back to its first user message, normalised.
    first = (
        "  # 'Now the dentist:   I need an appointment next week, ideally on a Tuesday morning "
        "or Wednesday'"
    )
    await append(
        memory,
        conversation,
        md.NewMessage(role=md.ROLE_ASSISTANT, sender="bot", content="Welcome back."),
        md.NewMessage(role=md.ROLE_USER, sender="ada", content=first),
        md.NewMessage(role=md.ROLE_USER, sender="ada", content="And a cleaning."),
    )
    described = (await conversation_of(memory, conversation)).description
    assert described == (
        "Now the dentist: I need an appointment next week, ideally on a Tuesday mornin..."
    )
    assert len(described) == 80
    # It is not composed: that message is in the context itself.
    assert working_blocks(await composed(reviewing.channel, conversation)) == []

    # A second /new keeps the second session too (with its fallback description).
    await new_session(memory, conversation)
    again = (await conversation_of(memory, conversation)).previous_session
    assert (again.working_memory, again.description) == ("", described)
    assert again.started_after_id == before.last_message_id
    exported = cli(reviewing.server, "export", "--agent", conversation.agent_id)
    assert exported.returncode == 0, exported.stderr
    records = [json.loads(line) for line in exported.stdout.splitlines()[1:]]
    ended_records = [r for r in records if r["record"] == "ended_session"]
    assert [r["description"] for r in ended_records] == ["Lisbon trip planning", described]


async def test_a_review_that_ends_after_new_leaves_the_new_session_alone(
    reviewing: Reviewing, model: FakeModel
) -> None:
    """A review that read the old session and commits after `/new` keeps its working memory
    and description with the session it read, not the new one; its facts still count."""
    memory = reviewing.memory
    conversation = fresh_conversation()
    model.reply(session_texts("Old session notes", "Old topic"), delay_seconds=1.0)
    await commit(memory, conversation, *turn("Something for the old session"))
    running = asyncio.create_task(review_now(memory, conversation))
    await eventually(lambda: bool(model.requests))
    await new_session(memory, conversation)  # background review is off: no wait
    result = await running
    assert result.ops_skipped == 0
    after = await conversation_of(memory, conversation)
    assert (after.working_memory, after.description) == ("", "")
    ended = after.previous_session
    assert (ended.working_memory, ended.description) == ("Old session notes", "Old topic")
    state = await memory.reviews.GetReviewState(md.GetReviewStateRequest(conversation=conversation))
    assert state.unread_messages == 0


def quiet_reviewer(model: FakeModel, **memory: Any) -> str:
    """Background review on with every trigger off: only /new's review runs. The interval
    trigger is off too: it fires at once for a conversation never reviewed, so a scheduler pass
    that came after the append reviewed it before /new did."""
    settings: dict[str, Any] = {
        "review_interval_hours": 0,
        "turn_interval": 0,
        "idle_timeout_minutes": 0,
        "passive_turn_interval": 0,
    }
    settings.update(memory)
    return review_config(model, **settings)


async def test_new_reviews_the_ending_session_first(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    with FakeModel() as model:
        model.reply(session_texts("Choosing a gift for Ines", "Gift for Ines"))
        server = start_server(tmp_path / "home", config=quiet_reviewer(model)).start()
        async with md.connect(server.address) as channel:
            memory = md.Stubs(channel)
            conversation = fresh_conversation()
            # Appended, not a turn, and every trigger off: the scheduler reviews nothing.
            await append(memory, conversation, *turn("My sister Ines turns 30; she loves ceramics"))
            assert model.requests == []
            await new_session(memory, conversation)
            (request,) = model.requests
            assert "she loves ceramics" in json.dumps(request["messages"])
            after = await conversation_of(memory, conversation)
            assert after.previous_session.working_memory == "Choosing a gift for Ines"
            assert after.working_memory == ""
            state = await memory.reviews.GetReviewState(
                md.GetReviewStateRequest(conversation=conversation)
            )
            assert state.unread_messages == 0


async def test_a_failed_review_before_new_loses_nothing(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    with FakeModel() as model:
        model.fail(500)
        config = quiet_reviewer(model, review_failure_backoff_ms=0)
        server = start_server(tmp_path / "home", config=config).start()
        async with md.connect(server.address) as channel:
            memory = md.Stubs(channel)
            conversation = fresh_conversation()
            await append(memory, conversation, *turn("I am allergic to penicillin"))
            cleared = await new_session(memory, conversation)
            assert cleared.notice == "Started a fresh session. Long-term memory is preserved."
            assert len(model.requests) == 1
            state = await memory.reviews.GetReviewState(
                md.GetReviewStateRequest(conversation=conversation)
            )
            assert state.unread_messages == 1  # still queued: the cursor is not the window
            model.reply(json.dumps({"operations": []}))
            result = await review_now(memory, conversation)
            assert result.status == md.REVIEW_STATUS_NOTHING_TO_SAVE
            assert "allergic to penicillin" in json.dumps(model.requests[-1]["messages"])
