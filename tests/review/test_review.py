"""The reviewer through memoryd's gRPC services (in this process: tests/in_process.py; a server of
its own for the background scheduler), the fake model server and a real database."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import grpc
import pytest

import memoryd_client as md
from memoryd.domain import review_prompt as prompts
from memoryd.log_events import Event
from memoryd.testing.configs import review_config
from memoryd.testing.fake_model import FakeModel, Reply, ToolCall
from memoryd.testing.server_process import ServerProcess
from tests.helpers import fresh_conversation, owner_of, rpc_error, store
from tests.review_helpers import (
    Reviewing,
    after_a_scheduler_pass,
    commit,
    eventually,
    review_now,
    turn,
)

# Exercises storage: make test runs it on PostgreSQL too.
pytestmark = pytest.mark.storage

OK = md.REVIEW_STATUS_OK


def ops(*operations: dict[str, Any]) -> str:
    return json.dumps({"operations": list(operations)})


async def rows(
    reviewing: Reviewing,
    conversation: md.Conversation,
    archived: md.ArchivedFilter.ValueType = md.ARCHIVED_FILTER_ACTIVE,
) -> list[md.Memory]:
    listed = await reviewing.memory.memory.ListMemories(
        md.ListMemoriesRequest(owner=owner_of(conversation), archived=archived)
    )
    return [item.memory for item in listed.memories]


async def state(reviewing: Reviewing, conversation: md.Conversation) -> md.GetReviewStateResponse:
    return await reviewing.memory.reviews.GetReviewState(
        md.GetReviewStateRequest(conversation=conversation)
    )


async def test_an_add_lands_at_owner_scope_with_provenance_and_renders(
    reviewing: Reviewing, model: FakeModel
) -> None:
    conversation = fresh_conversation()
    sent = await commit(reviewing.memory, conversation, *turn("I'm vegetarian, by the way"))
    assert sent.review_pending
    message_id = sent.results[0].id
    model.reply(
        ops({"action": "add", "target": "user", "category": "preference", "value": "Is vegetarian"})
    )
    result = await review_now(reviewing.memory, conversation)
    assert (result.status, result.ops_added, result.ops_skipped) == (OK, 1, 0)
    assert result.provider == "fake-0"
    (row,) = await rows(reviewing, conversation)
    assert (row.scope_type, row.category, row.value) == (
        md.SCOPE_TYPE_OWNER,
        md.CATEGORY_PREFERENCE,
        "Is vegetarian",
    )
    assert re.fullmatch(r"is-vegetarian-[0-9a-f]{4}", row.key)  # read off the fact
    assert row.provenance.source_type == "memory_reviewer"
    details = json.loads(row.provenance.details)
    assert details == {
        "review_run_id": result.review_run_id,
        "model": "fake-model-0",
        "provider": "fake-0",
        "source_message_ids": [message_id],
    }
    prompt = await reviewing.memory.context.GetPromptContext(
        md.GetPromptContextRequest(agent_id=conversation.agent_id)
    )
    assert prompt.user_md == "## Preferences\n- Is vegetarian"
    after = await state(reviewing, conversation)
    assert after.last_reviewed_message_id == message_id
    assert after.last_review_status == OK
    assert not after.pending_input
    assert after.last_run.model_calls == 1
    revisions = await reviewing.memory.resources.ListRevisions(
        md.ListRevisionsRequest(
            ref=md.ResourceRef(agent_id=conversation.agent_id, type=md.RESOURCE_TYPE_USER_MD)
        )
    )
    assert revisions.revisions[0].mutation_source == "memory_review"
    assert json.loads(revisions.revisions[0].provenance)["trigger"] == "memory_review"


async def test_what_the_model_is_shown(reviewing: Reviewing, model: FakeModel) -> None:
    conversation = fresh_conversation()
    rule = await store(
        reviewing.memory, conversation, "email", "Show drafts first", md.CATEGORY_DIRECTIVE
    )
    sent = await commit(
        reviewing.memory,
        conversation,
        *turn("first thing"),
        md.NewMessage(role=md.ROLE_ASSISTANT, sender="bot", content="assistant text"),
        *turn("spoken aside", metadata='{"spoken": true}'),
        *turn("second thing"),
        *turn("guest text", metadata='{"guest": true}'),
    )
    first, _, _, last, guest = [r.id for r in sent.results]
    await review_now(reviewing.memory, conversation)
    request = model.requests[-1]
    system, user = request["messages"]
    assert system["role"] == "system"
    assert "Nothing to save." in system["content"]
    text = user["content"]
    assert f"message_id={first}: first thing\nmessage_id={last}: second thing" in text
    for hidden in ("assistant text", "guest text", "spoken aside"):
        assert hidden not in text
    assert prompts.GUEST_NOTE not in text
    scope = f"scope=agent:{conversation.agent_id}"
    assert f'(id={rule.id}, memory, {scope}, directive) email: "Show drafts first"' in text
    # "## Working Rules\n- Show drafts first" is 36 characters.
    assert '<memory_md used="36/8000 chars">' in text
    assert '<user_md used="0/6000 chars">' in text
    assert {tool["function"]["name"] for tool in request["tools"]} >= {
        "memory_add",
        "memory_replace",
        "memory_archive",
    }
    # The seed's instruction to generalize overly-specific facts.
    assert "generalize\noverly-specific facts" in system["content"]
    # A guest's message is reviewed in a batch of its own, told apart.
    await review_now(reviewing.memory, conversation)
    text = model.requests[-1]["messages"][1]["content"]
    assert text.endswith(
        f"{prompts.GUEST_NOTE}\n\nNew user messages (oldest first):\nmessage_id={guest}: guest text"
    )


async def test_nothing_to_save_prose_and_fenced_json(
    reviewing: Reviewing, model: FakeModel
) -> None:
    conversation = fresh_conversation()
    prose = md.REVIEW_STATUS_NOTHING_TO_SAVE_PROSE
    embedded = ops({"action": "add", "target": "user", "category": "goal", "value": "Run 10k"})
    for answer, expected in (
        ("Nothing to save.", md.REVIEW_STATUS_NOTHING_TO_SAVE),
        ("I looked, and there is nothing durable here.", prose),
        ("Nothing new {really}.", prose),
        ("Nothing [to] save {}, truly.", prose),
        (f"Here you go: {embedded} Done.", OK),
        (
            "```json\n"
            + ops(
                {"action": "add", "target": "memory", "category": "context", "value": "Uses Rust"}
            )
            + "\n```",
            OK,
        ),
    ):
        await commit(reviewing.memory, conversation, *turn(f"message for {expected}"))
        model.reply(answer)
        result = await review_now(reviewing.memory, conversation)
        assert result.status == expected, answer
        assert (await state(reviewing, conversation)).last_run.status == expected, answer
    assert sorted(r.value for r in await rows(reviewing, conversation)) == ["Run 10k", "Uses Rust"]
    # An answer that opens as JSON, or names "operations", but does not parse is a failure (a
    # cut-off answer is retried, never read as nothing to save).
    for broken in ('{"operations": [{"action": "add"', 'Sure: {"operations": [ oops'):
        await commit(reviewing.memory, conversation, *turn("more"))
        model.reply(broken)
        failed = await review_now(reviewing.memory, conversation)
        assert failed.status == md.REVIEW_STATUS_FAILED, broken


async def test_broken_json_fails_backs_off_and_a_retry_does_not_duplicate(
    reviewing: Reviewing, model: FakeModel
) -> None:
    conversation = fresh_conversation()
    sent = await commit(reviewing.memory, conversation, *turn("I live in Lisbon"))
    add = ops(
        {"action": "add", "target": "user", "category": "identity", "value": "Lives in Lisbon"}
    )
    model.reply(add[:-5])  # cut off
    failed = await review_now(reviewing.memory, conversation)
    assert failed.status == md.REVIEW_STATUS_FAILED
    assert "broken" in failed.reason
    after = await state(reviewing, conversation)
    assert (after.last_reviewed_message_id, after.failure_count) == (0, 1)
    assert after.last_review_status == md.REVIEW_STATUS_FAILED
    assert after.pending_input
    assert await rows(reviewing, conversation) == []
    # Forced runs pass the backoff; the same answer twice stores one row.
    model.reply(add)
    assert (await review_now(reviewing.memory, conversation)).status == OK
    await commit(reviewing.memory, conversation, *turn("Lisbon, as I said"))
    model.reply(add)
    assert (await review_now(reviewing.memory, conversation)).ops_added == 0  # already a row
    assert [r.value for r in await rows(reviewing, conversation)] == ["Lives in Lisbon"]
    assert (await state(reviewing, conversation)).failure_count == 0
    assert sent.results[0].id < (await state(reviewing, conversation)).last_reviewed_message_id


async def test_tool_calls_replace_archive_and_conversation_texts(
    reviewing: Reviewing, model: FakeModel
) -> None:
    conversation = fresh_conversation()
    city = await store(
        reviewing.memory, conversation, "city", "Lives in Lisbon", md.CATEGORY_IDENTITY
    )
    job = await store(reviewing.memory, conversation, "job", "Works at Acme", md.CATEGORY_IDENTITY)
    await reviewing.memory.conversations.CommitTurn(
        md.CommitTurnRequest(
            conversation=conversation,
            messages=turn("I moved to Porto and quit Acme"),
            usage=md.TurnUsage(peak_prompt_tokens=91_000, context_window=128_000),
        )
    )
    model.reply(
        tool_calls=[
            ToolCall("memory_replace", {"id": city.id, "value": "Lives in Porto"}),
            ToolCall("memory_archive", {"id": job.id, "reason": "quit"}),
            ToolCall("working_memory_update", {"text": "Helping with the move"}),
            ToolCall("session_description_update", {"text": '  "## Moving   to Porto"  '}),
        ]
    )
    result = await review_now(reviewing.memory, conversation)
    assert (result.ops_replaced, result.ops_archived, result.ops_skipped) == (1, 1, 0)
    replaced = (
        await reviewing.memory.memory.GetMemory(
            md.GetMemoryRequest(conversation=conversation, id=city.id)
        )
    ).memory
    assert (replaced.value, replaced.scope_type, replaced.category) == (
        "Lives in Porto",
        md.SCOPE_TYPE_OWNER,
        md.CATEGORY_IDENTITY,
    )
    assert json.loads(replaced.provenance.details)["review_run_id"] == result.review_run_id
    archived = (
        await reviewing.memory.memory.GetMemory(
            md.GetMemoryRequest(conversation=conversation, id=job.id)
        )
    ).memory
    assert (archived.archived, archived.archived_by, archived.archive_reason) == (
        True,
        "memory_reviewer",
        "quit",
    )
    described = await reviewing.memory.conversations.GetConversation(
        md.GetConversationRequest(conversation=conversation)
    )
    assert described.working_memory == "Helping with the move"
    assert described.description == "Moving to Porto"
    assert described.completed_turns == 1
    assert (described.peak_prompt_tokens, described.context_window) == (91_000, 128_000)
    # A description is one line of at most 80 characters.
    await commit(reviewing.memory, conversation, *turn("more"))
    model.reply(tool_calls=[ToolCall("session_description_update", {"text": "word " * 30})])
    await review_now(reviewing.memory, conversation)
    described = await reviewing.memory.conversations.GetConversation(
        md.GetConversationRequest(conversation=conversation)
    )
    assert len(described.description) == 80
    assert described.description.endswith("...")


async def test_invalid_operations_are_skipped_and_counted(
    reviewing: Reviewing, model: FakeModel
) -> None:
    conversation = fresh_conversation(owner_id="ada")
    other = md.Conversation(
        agent_id=conversation.agent_id, owner_id="bob", channel="t", chat_id="b"
    )
    theirs = await store(reviewing.memory, other, "k", "Bob's fact", md.CATEGORY_IDENTITY)
    gone = await store(reviewing.memory, conversation, "old", "Old fact", md.CATEGORY_IDENTITY)
    await reviewing.memory.memory.ArchiveMemory(
        md.ArchiveMemoryRequest(conversation=conversation, id=gone.id)
    )
    await commit(reviewing.memory, conversation, *turn("stuff"))
    model.reply(
        ops(
            {"action": "delete", "id": 1},
            {"action": "add", "target": "user", "category": "project", "value": "x"},
            {"action": "add", "target": "user", "category": "context", "value": "x"},
            {"action": "add", "target": "memory", "category": "directive", "value": "y" * 201},
            {"action": "replace", "id": theirs.id, "value": "hijacked"},
            {"action": "archive", "id": theirs.id},
            {"action": "archive", "id": gone.id},
            {"action": "replace", "id": "\u00b9", "value": "a superscript is not an id"},
            {
                "action": "add",
                "target": "memory",
                "category": "directive",
                "value": "Answer briefly",
            },
        )
    )
    result = await review_now(reviewing.memory, conversation)
    assert result.status == OK
    assert (result.ops_added, result.ops_skipped) == (1, 8)
    bob = (
        await reviewing.memory.memory.GetMemory(
            md.GetMemoryRequest(conversation=other, id=theirs.id)
        )
    ).memory
    assert (bob.value, bob.archived) == ("Bob's fact", False)


async def test_packing_by_count_and_by_tokens(reviewing: Reviewing, model: FakeModel) -> None:
    conversation = fresh_conversation()
    sent = await commit(
        reviewing.memory, conversation, *turn(*(f"message number {i}" for i in range(45)))
    )
    ids = [r.id for r in sent.results]
    await review_now(reviewing.memory, conversation)
    lines = model.requests[-1]["messages"][1]["content"].split(
        "New user messages (oldest first):\n"
    )[1]
    assert lines.count("message_id=") == 40
    after = await state(reviewing, conversation)
    assert after.last_reviewed_message_id == ids[39]
    assert after.pending_input  # five are left for the next review
    await review_now(reviewing.memory, conversation)
    assert (await state(reviewing, conversation)).last_reviewed_message_id == ids[-1]
    # One message over the whole budget is cut to fit.
    await commit(reviewing.memory, conversation, *turn("word " * 6000))
    result = await review_now(reviewing.memory, conversation)
    assert 3900 <= result.tokens_in <= 4000


async def test_the_scheduler_reviews_in_the_background_and_commit_turn_does_not_wait(
    start_server: type[ServerProcess],
    tmp_path: Path,
    model: FakeModel,
) -> None:
    model.default = Reply(content="Nothing to save.", delay_seconds=1.0)
    server = start_server(tmp_path / "home", config=review_config(model)).start()
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        conversation = fresh_conversation()
        committed = await commit(memory, conversation, *turn("hello"))
        # The review is not on the caller's path: CommitTurn is answered before the model is
        # (it takes a second), with the review pending and no run recorded yet.
        assert committed.review_pending
        before = await memory.reviews.GetReviewState(
            md.GetReviewStateRequest(conversation=conversation)
        )
        assert before.pending_input
        assert not before.HasField("last_run")

        async def reviewed() -> bool:
            current = await memory.reviews.GetReviewState(
                md.GetReviewStateRequest(conversation=conversation)
            )
            return current.last_review_status == md.REVIEW_STATUS_NOTHING_TO_SAVE

        await eventually(reviewed)
        first = await memory.reviews.GetReviewState(
            md.GetReviewStateRequest(conversation=conversation)
        )
        # Within the interval (24 h) a new turn waits: pending, not claimed, not reviewed again.
        await commit(memory, conversation, *turn("again"))
        await after_a_scheduler_pass(memory)
        current = await memory.reviews.GetReviewState(
            md.GetReviewStateRequest(conversation=conversation)
        )
        assert current.pending_input
        assert not current.review_running
        assert current.last_run.id == first.last_run.id


async def test_no_provider_means_failed_precondition(
    memory: md.Stubs, server: ServerProcess
) -> None:
    conversation = fresh_conversation()
    await commit(memory, conversation, *turn("hello"))
    error = await rpc_error(
        memory.reviews.ReviewNow(md.ReviewNowRequest(conversation=conversation))
    )
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "no model provider is configured" in (error.details() or "")
    assert "memoryd setup" in (error.details() or "")
    server.wait_for_event(Event.NO_PROVIDER)  # logged right after `serving`
    assert len(server.events(Event.NO_PROVIDER)) == 1


async def test_bad_turn_and_review_requests(reviewing: Reviewing) -> None:
    unknown = fresh_conversation()
    for call, status, message in (
        (
            reviewing.memory.reviews.GetReviewState(md.GetReviewStateRequest(conversation=unknown)),
            grpc.StatusCode.NOT_FOUND,
            "has no record",
        ),
        (
            reviewing.memory.reviews.ReviewNow(md.ReviewNowRequest(conversation=unknown)),
            grpc.StatusCode.NOT_FOUND,
            "has no record",
        ),
        (
            reviewing.memory.conversations.CommitTurn(
                md.CommitTurnRequest(conversation=unknown, trust=md.Trust.ValueType(7))
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "trust has unknown value 7",
        ),
        (
            reviewing.memory.conversations.CommitTurn(
                md.CommitTurnRequest(
                    conversation=unknown,
                    messages=turn("hi"),
                    usage=md.TurnUsage(peak_prompt_tokens=-1),
                )
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "usage.peak_prompt_tokens must not be negative",
        ),
        (
            reviewing.memory.conversations.CommitTurn(md.CommitTurnRequest(messages=turn("hi"))),
            grpc.StatusCode.INVALID_ARGUMENT,
            "conversation is required",
        ),
        (
            reviewing.memory.memory.ListMemorySources(md.ListMemorySourcesRequest(status="gone")),
            grpc.StatusCode.INVALID_ARGUMENT,
            "status must be one of active, paused, deleted",
        ),
    ):
        error = await rpc_error(call)
        assert error.code() == status, message
        assert message in (error.details() or "")
    # Nothing was stored by the refused turns.
    missing = await rpc_error(
        reviewing.memory.conversations.GetConversation(
            md.GetConversationRequest(conversation=unknown)
        )
    )
    assert missing.code() == grpc.StatusCode.NOT_FOUND
