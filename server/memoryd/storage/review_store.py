"""Review state in SQLite: turn marks, claims, the cursor, the triggers' counts and the due
query (a run's record is storage.review_run_store's).

Every function runs inside a read or write transaction given by the caller; the writer runs the
writes, so a claim, a cursor move and the operations of a review commit together or not at all.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

from memoryd.domain.conversation import ConversationKey
from memoryd.domain.review_runs import (
    ReadPart,
    ReviewState,
    ReviewStatus,
)
from memoryd.domain.timestamps import from_text, to_text
from memoryd.domain.turns import TurnUsage
from memoryd.storage.engine import engine_of
from memoryd.storage.review_input import reviewable
from memoryd.storage.review_run_store import stored_status
from memoryd.storage.sql import CONVERSATION_MATCH, KEY_MATCH, Columns, Row, rows
from memoryd.storage.transaction import Transaction

_STATE = Columns(
    "s",
    (
        "last_reviewed_message_id",
        "last_reviewed_at",
        "last_review_started_at",
        "last_review_completed_at",
        "last_review_status",
        "last_review_failed_at",
        "failure_count",
        "last_error",
        "pending_input",
        "last_input_at",
        "turns_since_review",
        "passive_since_review",
        "claim_token",
        "claimed_at",
        "backlog",
        "review_part_message_id",
        "review_part_offset",
    ),
)


def _time(text: str | None) -> dt.datetime | None:
    return from_text(text) if text is not None else None


def state(connection: Transaction, key: ConversationKey) -> ReviewState | None:
    """The review state, or None when the conversation was never marked or reviewed."""
    found = rows(
        connection,
        f"SELECT {_STATE.select} FROM memory_review_state AS s WHERE {CONVERSATION_MATCH}",
        key.as_row(),
    )
    return _state(found[0]) if found else None


def cursor(connection: Transaction, key: ConversationKey) -> int:
    """The id of the last reviewed message (0 before the first review)."""
    found = state(connection, key)
    return found.cursor if found is not None else 0


def _state(row: Row) -> ReviewState:
    column = _STATE.named(row)
    status = column["last_review_status"]
    return ReviewState(
        last_reviewed_message_id=column["last_reviewed_message_id"],
        last_reviewed_at=_time(column["last_reviewed_at"]),
        last_review_started_at=_time(column["last_review_started_at"]),
        last_review_completed_at=_time(column["last_review_completed_at"]),
        last_review_status=ReviewStatus(status) if status is not None else None,
        last_review_failed_at=_time(column["last_review_failed_at"]),
        failure_count=column["failure_count"],
        last_error=column["last_error"],
        pending_input=bool(column["pending_input"]),
        last_input_at=_time(column["last_input_at"]),
        turns_since_review=column["turns_since_review"],
        passive_since_review=column["passive_since_review"],
        claim_token=column["claim_token"],
        claimed_at=_time(column["claimed_at"]),
        backlog=bool(column["backlog"]),
        part=ReadPart(column["review_part_message_id"], column["review_part_offset"]),
    )


def mark_turn(
    connection: Transaction,
    key: ConversationKey,
    *,
    usage: TurnUsage,
    new_input: bool,
    now: dt.datetime,
) -> None:
    """A committed turn: its usage on the conversation; new input on the review state."""
    connection.execute(
        "UPDATE conversations SET completed_turns = completed_turns + 1, "
        "peak_prompt_tokens = coalesce(?, peak_prompt_tokens), "
        f"context_window = coalesce(?, context_window) WHERE {CONVERSATION_MATCH}",
        (usage.peak_prompt_tokens, usage.context_window, *key.as_row()),
    )
    _ensure(connection, key)
    connection.execute(
        "UPDATE memory_review_state SET turns_since_review = turns_since_review + 1, "
        f"pending_input = {engine_of(connection).greatest('pending_input', '?')}, "
        "last_input_at = CASE WHEN ? = 1 THEN ? ELSE last_input_at END "
        f"WHERE {CONVERSATION_MATCH}",
        (int(new_input), int(new_input), to_text(now), *key.as_row()),
    )


def unread_through(connection: Transaction, key: ConversationKey, through_id: int) -> bool:
    """Whether a reviewable message after the review cursor has an id up to `through_id`."""
    after_id = cursor(connection, key)
    found = rows(
        connection,
        f"SELECT 1 FROM messages AS m WHERE {KEY_MATCH} AND m.id > ? AND m.id <= ? "
        f"AND {reviewable(connection)} LIMIT 1",
        (*key.as_row(), after_id, through_id),
    )
    return bool(found)


def pass_over(connection: Transaction, key: ConversationKey, ids: Sequence[int]) -> bool:
    """Count the messages `ids` (just stored) as reviewed by moving the cursor past them, unless
    other unread input lies before the last of them (the review reads in order, so it would be
    passed over too); whether the cursor moved."""
    if not ids:
        return False
    last_id = max(ids)
    others = rows(
        connection,
        f"SELECT 1 FROM messages AS m WHERE {KEY_MATCH} AND m.id > ? AND m.id <= ? "
        f"AND {reviewable(connection)} "
        "AND m.id NOT IN (SELECT CAST(j.value AS BIGINT) FROM "
        f"{engine_of(connection).json_values('?', 'j')}) LIMIT 1",
        (*key.as_row(), cursor(connection, key), last_id, json.dumps(list(ids))),
    )
    if others:
        return False
    _ensure(connection, key)
    connection.execute(
        "UPDATE memory_review_state SET last_reviewed_message_id = "
        f"{engine_of(connection).greatest('coalesce(last_reviewed_message_id, 0)', '?')} "
        f"WHERE {CONVERSATION_MATCH}",
        (last_id, *key.as_row()),
    )
    return True


def claim(
    connection: Transaction,
    key: ConversationKey,
    token: str,
    *,
    now: dt.datetime,
    stale_before: dt.datetime,
) -> bool:
    """Take the conversation's review claim, unless a fresh one is held."""
    _ensure(connection, key)
    found = rows(
        connection,
        "UPDATE memory_review_state SET claim_token = ?, claimed_at = ?, "
        f"last_review_started_at = ? WHERE {CONVERSATION_MATCH} "
        "AND (claim_token IS NULL OR claimed_at < ?) RETURNING 1",
        (token, to_text(now), to_text(now), *key.as_row(), to_text(stale_before)),
    )
    return bool(found)


def holds_claim(connection: Transaction, key: ConversationKey, token: str) -> bool:
    """Whether `token` still holds the claim (a stale claim may have been taken over)."""
    found = rows(
        connection,
        f"SELECT 1 FROM memory_review_state WHERE {CONVERSATION_MATCH} AND claim_token = ?",
        (*key.as_row(), token),
    )
    return bool(found)


def release(connection: Transaction, key: ConversationKey, token: str) -> None:
    """Give the claim back without recording a review."""
    connection.execute(
        "UPDATE memory_review_state SET claim_token = NULL, claimed_at = NULL "
        f"WHERE {CONVERSATION_MATCH} AND claim_token = ?",
        (*key.as_row(), token),
    )


def clear_pending(connection: Transaction, key: ConversationKey) -> None:
    """No reviewable input is left after the cursor."""
    connection.execute(
        f"UPDATE memory_review_state SET pending_input = 0, backlog = 0 WHERE {CONVERSATION_MATCH}",
        key.as_row(),
    )


def clear_claims(connection: Transaction) -> int:
    """At start-up: no review is running, so every claim is a dead server's."""
    connection.execute(
        "UPDATE memory_review_state SET claim_token = NULL, claimed_at = NULL "
        "WHERE claim_token IS NOT NULL"
    )
    return connection.changes()


def record_success(
    connection: Transaction,
    key: ConversationKey,
    *,
    status: ReviewStatus,
    cursor: int,
    more_pending: bool,
    now: dt.datetime,
    part: ReadPart | None = None,
) -> None:
    """Move the cursor, reset the failures, release the claim. With input left after the
    cursor, the conversation has a backlog: its next batch is due at once. `part`: how far
    into the message after the cursor the reviews have read (None: leave it as it is)."""
    if part is not None:
        connection.execute(
            "UPDATE memory_review_state SET review_part_message_id = ?, review_part_offset = ? "
            f"WHERE {CONVERSATION_MATCH}",
            (part.message_id, part.offset, *key.as_row()),
        )
    connection.execute(
        "UPDATE memory_review_state SET "
        "last_reviewed_message_id = "
        f"{engine_of(connection).greatest('last_reviewed_message_id', '?')}, "
        "last_reviewed_at = ?, "
        "last_review_completed_at = ?, last_review_status = ?, "
        "failure_count = 0, last_error = NULL, pending_input = ?, backlog = ?, "
        "turns_since_review = 0, passive_since_review = 0, "
        f"claim_token = NULL, claimed_at = NULL WHERE {CONVERSATION_MATCH}",
        (
            cursor,
            to_text(now),
            to_text(now),
            stored_status(status),
            int(more_pending),
            int(more_pending),
            *key.as_row(),
        ),
    )


def record_failure(
    connection: Transaction, key: ConversationKey, *, error: str, now: dt.datetime
) -> None:
    """A failed review: the cursor stays, the failure counts, the claim is released."""
    connection.execute(
        "UPDATE memory_review_state SET last_review_status = 'failed', "
        "last_review_failed_at = ?, last_review_completed_at = ?, "
        "failure_count = failure_count + 1, last_error = ?, claim_token = NULL, claimed_at = NULL "
        f"WHERE {CONVERSATION_MATCH}",
        (to_text(now), to_text(now), error[:1000], *key.as_row()),
    )


def due(
    connection: Transaction,
    *,
    interval_before: dt.datetime | None,
    backoff_before: dt.datetime,
    stale_before: dt.datetime,
    turn_interval: int | None,
    passive_interval: int | None,
    idle_before: dt.datetime | None,
    limit: int,
) -> list[ConversationKey]:
    """Conversations with new input whose review is due (a trigger fired, or a backlog),
    oldest review first."""
    triggers = ["backlog = 1"]
    params: list[Any] = []
    if interval_before is not None:
        triggers.append("(last_reviewed_at IS NULL OR last_reviewed_at <= ?)")
        params.append(to_text(interval_before))
    if turn_interval is not None:
        triggers.append("turns_since_review >= ?")
        params.append(turn_interval)
    if passive_interval is not None:
        triggers.append("passive_since_review >= ?")
        params.append(passive_interval)
    if idle_before is not None:
        triggers.append("last_input_at <= ?")
        params.append(to_text(idle_before))
    found = rows(
        connection,
        "SELECT agent_id, owner_id, channel, chat_id, thread_scope FROM memory_review_state "
        "WHERE pending_input = 1 AND (claim_token IS NULL OR claimed_at < ?) "
        "AND (failure_count = 0 OR last_review_failed_at IS NULL OR last_review_failed_at <= ?) "
        f"AND ({' OR '.join(triggers)}) "
        "ORDER BY last_reviewed_at NULLS FIRST LIMIT ?",
        [to_text(stale_before), to_text(backoff_before), *params, limit],
    )
    return [ConversationKey(*row) for row in found]


def candidates(
    connection: Transaction,
    *,
    agent_id: str | None,
    owner_id: str | None,
) -> list[ConversationKey]:
    """Conversations (of one agent / owner, when given) with reviewable messages after the
    cursor."""
    sql = [
        (
            "SELECT c.agent_id, c.owner_id, c.channel, c.chat_id, c.thread_scope "
            "FROM conversations AS c LEFT JOIN memory_review_state AS s "
            "USING (agent_id, owner_id, channel, chat_id, thread_scope) "
            "WHERE EXISTS (SELECT 1 FROM messages AS m WHERE m.agent_id = c.agent_id "
            "AND m.owner_id = c.owner_id AND m.channel = c.channel AND m.chat_id = c.chat_id "
            "AND m.thread_scope = c.thread_scope "
            f"AND m.id > coalesce(s.last_reviewed_message_id, 0) AND {reviewable(connection)})"
        )
    ]
    params: list[Any] = []
    if agent_id is not None:
        sql.append("AND c.agent_id = ?")
        params.append(agent_id)
    if owner_id is not None:
        sql.append("AND c.owner_id = ?")
        params.append(owner_id)
    sql.append("ORDER BY c.id")
    return [ConversationKey(*row) for row in rows(connection, " ".join(sql), params)]


def _ensure(connection: Transaction, key: ConversationKey) -> None:
    connection.execute(
        "INSERT INTO memory_review_state (agent_id, owner_id, channel, chat_id, thread_scope) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        key.as_row(),
    )
