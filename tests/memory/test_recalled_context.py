"""ComposeContext's Recalled block (recall_tokens), through the shared server and its model.

What /new moved out of the window, and the notes no prompt file renders, come back when the
newest user message is about them; by default nothing changes.
"""

from __future__ import annotations

import uuid
from typing import Any

import grpc
import pytest

import memoryd_client as md
from tests.helpers import rpc_error
from tests.memory.test_retrieval import embedded

WINDOW = 8000
SUSHI = "I love sushi, especially salmon nigiri, I could eat it every day."


@pytest.fixture
async def moved_on(memory: md.Stubs) -> md.Conversation:
    """A conversation whose first session talked about food, then /new, then a question."""
    conversation = md.Conversation(channel="telegram", chat_id=f"recalled-{uuid.uuid4().hex[:8]}")
    before = [
        ("ada", md.ROLE_USER, SUSHI),
        ("bot", md.ROLE_ASSISTANT, "Noted!"),
        ("ada", md.ROLE_USER, "My sister Lena is getting married in Lisbon in September."),
    ]
    await memory.conversations.AppendMessages(
        md.AppendMessagesRequest(
            conversation=conversation,
            messages=[md.NewMessage(sender=s, role=r, content=c) for s, r, c in before],
        )
    )
    await memory.memory.StoreMemory(
        md.StoreMemoryRequest(conversation=conversation, key="restaurant", value="Tomo Sushi Bar")
    )
    await memory.memory.StoreMemory(
        md.StoreMemoryRequest(
            owner=md.OwnerScope(owner_id=conversation.owner_id or "default"),
            category=md.CATEGORY_PREFERENCE,
            key="drink",
            value="Drinks green tea",
        )
    )
    await memory.conversations.ClearConversation(
        md.ClearConversationRequest(conversation=conversation)
    )
    await memory.conversations.AppendMessages(
        md.AppendMessagesRequest(
            conversation=conversation,
            messages=[
                md.NewMessage(
                    sender="ada",
                    role=md.ROLE_USER,
                    content="Which sushi should I order for dinner tonight?",
                )
            ],
        )
    )
    await embedded(memory)
    return conversation


async def compose(
    memory_channel: md.Stubs, conversation: md.Conversation, **fields: Any
) -> md.ComposeContextResponse:
    return await memory_channel.context.ComposeContext(
        md.ComposeContextRequest(conversation=conversation, context_window=WINDOW, **fields)
    )


async def test_the_block_brings_back_what_the_window_left_and_unrendered_notes(
    channel: grpc.aio.Channel, moved_on: md.Conversation
) -> None:
    compaction = md.Stubs(channel)
    plain = await compose(compaction, moved_on)
    assert md.CONTEXT_PART_KIND_RECALLED not in [part.kind for part in plain.parts]
    assert SUSHI not in "".join(part.content for part in plain.parts)

    recalled = await compose(compaction, moved_on, recall_tokens=300)
    blocks = [part for part in recalled.parts if part.kind == md.CONTEXT_PART_KIND_RECALLED]
    assert len(blocks) == 1
    block = blocks[0]
    assert block.role == md.ROLE_SYSTEM
    assert block.content.startswith("Recalled from long-term memory and from earlier")
    assert f"ada: {SUSHI}" in block.content
    assert "- restaurant: Tomo Sushi Bar" in block.content
    # Rendered into USER.md, it is in the memory block already: not twice.
    assert "green tea" not in block.content
    assert 0 < block.tokens <= 300
    assert recalled.total_tokens == plain.total_tokens + block.tokens
    # The rest of the context is the same parts, the block after the other system blocks.
    others = [part for part in recalled.parts if part.kind != md.CONTEXT_PART_KIND_RECALLED]
    assert [(p.kind, p.content) for p in others] == [(p.kind, p.content) for p in plain.parts]


async def test_a_guest_gets_messages_but_no_rows(
    channel: grpc.aio.Channel, moved_on: md.Conversation
) -> None:
    compaction = md.Stubs(channel)
    guest = await compose(compaction, moved_on, recall_tokens=300, trust=md.TRUST_GUEST)
    (block,) = [part for part in guest.parts if part.kind == md.CONTEXT_PART_KIND_RECALLED]
    assert SUSHI in block.content
    assert "Tomo Sushi Bar" not in block.content


@pytest.mark.parametrize(
    ("tokens", "message"),
    [
        (-1, "recall_tokens must not be negative, got -1"),
        (7000, "recall_tokens is 7,000: it leaves no room in the context limit of 6,800 tokens"),
    ],
)
async def test_a_bad_budget_is_refused(
    channel: grpc.aio.Channel, moved_on: md.Conversation, tokens: int, message: str
) -> None:
    compaction = md.Stubs(channel)
    error = await rpc_error(compose(compaction, moved_on, recall_tokens=tokens))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == message
