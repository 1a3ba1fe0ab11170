"""Refusals quote at most a short prefix of what was sent: a 1 MB value gets a short
INVALID_ARGUMENT, never its own echo (which broke the status trailer past 16 KiB)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import pytest

import memoryd_client as md
from tests.helpers import rpc_error, user

HUGE = "x" * 1_000_000
PADDED = " " + HUGE  # whitespace and length both wrong: the length is what gets reported
CHAT = md.Conversation(channel="t", chat_id="errors")
MAX_DETAILS = 300

Call = Callable[[md.Stubs], Any]
CASES: list[tuple[str, Call, str]] = [
    (
        "padded-chat-id",
        lambda s: s.conversations.AppendMessages(
            md.AppendMessagesRequest(
                conversation=md.Conversation(channel="t", chat_id=PADDED), messages=[user("hi")]
            )
        ),
        "conversation.chat_id is 1000001 characters long; the limit is 256",
    ),
    (
        "channel-with-colon",
        lambda s: s.conversations.AppendMessages(
            md.AppendMessagesRequest(
                conversation=md.Conversation(channel=":" + "c" * 200, chat_id="1"),
                messages=[user("hi")],
            )
        ),
        "conversation.channel must not contain ':', got ':" + "c" * 63 + "'... (201 characters)",
    ),
    (
        "huge-kind",
        lambda s: s.conversations.AppendMessages(
            md.AppendMessagesRequest(conversation=CHAT, messages=[user("hi", kind="K" * 10_000)])
        ),
        "messages[0].kind must be lowercase letters, digits and '_', starting with a letter, at "
        "most 64 characters; got '" + "K" * 64 + "'... (10,000 characters)",
    ),
    (
        "huge-kind-filter",
        lambda s: s.conversations.SearchHistory(
            md.SearchHistoryRequest(query="x", conversation=CHAT, kinds=[HUGE])
        ),
        "kinds[0] must be lowercase letters, digits and '_', starting with a letter, at most 64 "
        "characters; got '" + "x" * 64 + "'... (1,000,000 characters)",
    ),
    (
        "huge-source-status",
        lambda s: s.memory.ListMemorySources(md.ListMemorySourcesRequest(status=HUGE)),
        "status must be one of active, paused, deleted; got '"
        + "x" * 64
        + "'... (1,000,000 characters)",
    ),
    (
        "huge-source-type",
        lambda s: s.memory.ListMemorySources(md.ListMemorySourcesRequest(source_type=PADDED)),
        "source_type must be one of conversation, api, scheduled_job, memory_reviewer; got ' "
        + "x" * 63
        + "'... (1,000,001 characters)",
    ),
    (
        "padded-key",
        lambda s: s.memory.StoreMemory(
            md.StoreMemoryRequest(
                conversation=CHAT, category=md.CATEGORY_GOAL, key=PADDED, value="v"
            )
        ),
        "key is 1000000 characters long; the limit is 256",
    ),
    (
        "padded-archived-by",
        lambda s: s.memory.ArchiveMemory(md.ArchiveMemoryRequest(id=1, archived_by=PADDED)),
        "archived_by is 1000001 characters long; the limit is 256",
    ),
    (
        "padded-job-id",
        lambda s: s.memory.Recall(md.RecallRequest(conversation=CHAT, query="x", job_id=PADDED)),
        "job_id is 1000001 characters long; the limit is 256",
    ),
    (
        "huge-page-token",
        lambda s: s.conversations.ListMessages(
            md.ListMessagesRequest(conversation=CHAT, page_token=HUGE)
        ),
        "page_token is malformed",
    ),
    (
        "padded-resource-scope",
        lambda s: s.resources.ListResources(md.ListResourcesRequest(scope_id=PADDED)),
        "scope_id is 1000001 characters long; the limit is 256",
    ),
    (
        "padded-review-owner",
        lambda s: s.reviews.ReviewNow(md.ReviewNowRequest(owner_id=PADDED)),
        "owner_id is 1000001 characters long; the limit is 256",
    ),
    (
        "huge-prompt-owner",
        lambda s: s.context.GetPromptContext(md.GetPromptContextRequest(owner_id=HUGE)),
        "request.owner_id is 1000000 characters long; the limit is 256",
    ),
]


@pytest.mark.parametrize(("call", "message"), [pytest.param(c, m, id=i) for i, c, m in CASES])
async def test_a_huge_value_is_refused_with_a_short_precise_message(
    memory: md.Stubs, call: Call, message: str
) -> None:
    error = await rpc_error(call(memory))
    assert (error.code(), error.details()) == (grpc.StatusCode.INVALID_ARGUMENT, message)
    assert len(error.details() or "") <= MAX_DETAILS


async def test_a_missing_row_named_by_a_long_key_is_described_briefly(
    memory: md.Stubs,
) -> None:
    owner = md.OwnerScope(agent_id="a" * 256, owner_id="o" * 256)
    error = await rpc_error(
        memory.memory.GetMemory(
            md.GetMemoryRequest(owner=owner, scope_type=md.SCOPE_TYPE_OWNER, key="k" * 256)
        )
    )
    assert error.code() == grpc.StatusCode.NOT_FOUND
    assert error.details() == (
        f"memory {'k' * 64!r}... (256 characters) in owner scope {'o' * 64}... not found"
    )
