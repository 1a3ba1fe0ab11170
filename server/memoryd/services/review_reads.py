"""What a review reads in its own transactions: the gate's input (the state, and whether input
waits), the snapshot of what it reviews, and the settling of a conversation it caught up
(memoryd.services.review runs the review)."""

from __future__ import annotations

import dataclasses

from memoryd.domain import review_prompt as prompts
from memoryd.domain.conversation import ConversationKey, OwnerKey
from memoryd.domain.memories import (
    MemoryRecord,
)
from memoryd.domain.review_runs import ReadPart, ReviewState, StoredRun
from memoryd.storage import (
    history_reads,
    memory_reads,
    review_input,
    review_run_store,
    review_store,
)
from memoryd.storage.transaction import Transaction


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ReviewSnapshot:
    """What one review reads after its claim: the messages, the rows, the conversation's texts."""

    messages: list[prompts.InputMessage]
    records: list[MemoryRecord]
    working_memory: str
    description: str
    session_start_id: int
    # How far the reviews have read into a long message after the cursor.
    part: ReadPart


def gate_input(
    connection: Transaction, key: ConversationKey
) -> tuple[ReviewState | None, bool] | None:
    if history_reads.window_state(connection, key) is None:
        return None
    state = review_store.state(connection, key)
    cursor = state.cursor if state is not None else 0
    return state, review_input.has_input_after(connection, key, cursor)


def snapshot(connection: Transaction, key: ConversationKey, limit: int) -> ReviewSnapshot:
    state = review_store.state(connection, key)
    cursor = state.cursor if state is not None else 0
    working_memory, description = review_input.conversation_texts(connection, key)
    return ReviewSnapshot(
        part=state.part if state is not None else ReadPart(),
        messages=review_input.reviewable_after(connection, key, cursor, limit),
        records=memory_reads.render_input(connection, OwnerKey(key.agent_id, key.owner_id)),
        working_memory=working_memory,
        description=description,
        session_start_id=review_input.session_start(connection, key),
    )


def settle(connection: Transaction, key: ConversationKey) -> None:
    if not review_input.has_input_after(connection, key, review_store.cursor(connection, key)):
        review_store.clear_pending(connection, key)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ReviewDescription:
    """GetReviewState: the state, the latest run, and the backlog of unread messages."""

    state: ReviewState
    last_run: StoredRun | None
    unread: int


def unread(connection: Transaction, key: ConversationKey) -> int:
    """The backlog: reviewable messages after the cursor."""
    return review_input.unread_count(connection, key, review_store.cursor(connection, key))


def described(connection: Transaction, key: ConversationKey) -> ReviewDescription | None:
    """A conversation's review state, backlog and latest run; None without a record."""
    found = gate_input(connection, key)
    if found is None:
        return None
    state = found[0] or ReviewState()
    return ReviewDescription(
        state=state,
        last_run=review_run_store.last_run(connection, key),
        unread=review_input.unread_count(connection, key, state.cursor),
    )
