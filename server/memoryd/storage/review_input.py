"""What a review reads and writes of its conversation: the messages it reviews (user messages
not spoken; a guest's in batches of their own), how many wait, and the working memory,
description and ended session's texts it sets. The review's state, claims and cursor are
memoryd.storage.review_store's."""

from __future__ import annotations

import datetime as dt
import json

from memoryd.domain.conversation import ConversationKey
from memoryd.domain.review_prompt import InputMessage
from memoryd.domain.timestamps import to_text
from memoryd.storage.engine import engine_of
from memoryd.storage.sql import CONVERSATION_MATCH, KEY_MATCH, rows
from memoryd.storage.transaction import Transaction


def reviewable(connection: Transaction) -> str:
    """The messages a review reads: user messages that were not spoken. A guest's (by its trust
    or its metadata) are read too, in batches of their own with a guest's admission."""
    engine = engine_of(connection)
    return f"m.role = 'user' AND NOT {engine.json_true('m.metadata_json', 'spoken')}"


def guest_condition(connection: Transaction) -> str:
    """Whether a message (alias m) is a guest's: by its trust, or by its metadata."""
    engine = engine_of(connection)
    return (
        f"(m.trust = 'guest' OR {engine.json_true('m.metadata_json', 'guest')} "
        f"OR coalesce({engine.json_text('m.metadata_json', 'trust')}, '') = 'guest')"
    )


def reviewable_after(
    connection: Transaction, key: ConversationKey, after_id: int, limit: int
) -> list[InputMessage]:
    """Reviewable messages after the cursor, oldest first."""
    found = rows(
        connection,
        f"SELECT m.id, m.content, {guest_condition(connection)} FROM messages AS m "
        f"WHERE {KEY_MATCH} AND m.id > ? AND {reviewable(connection)} ORDER BY m.id LIMIT ?",
        (*key.as_row(), after_id, limit),
    )
    return [InputMessage(row[0], row[1], bool(row[2])) for row in found]


def has_input_after(connection: Transaction, key: ConversationKey, after_id: int) -> bool:
    """Whether any reviewable message follows `after_id` (one row read)."""
    return bool(reviewable_after(connection, key, after_id, 1))


def unread_count(connection: Transaction, key: ConversationKey, after_id: int) -> int:
    """The backlog: reviewable messages after the cursor `after_id`."""
    found = rows(
        connection,
        f"SELECT count(*) FROM messages AS m WHERE {KEY_MATCH} AND m.id > ? "
        f"AND {reviewable(connection)}",
        (*key.as_row(), after_id),
    )
    return int(found[0][0])


def mark_input(
    connection: Transaction, inputs: list[tuple[ConversationKey, dt.datetime, int]]
) -> None:
    """Appended reviewable messages, stored without an agent turn: new input for the scheduler,
    for each (conversation, time, how many), counted for the passive trigger; one statement
    for all of them."""
    if not inputs:
        return
    payload = json.dumps([[*key.as_row(), to_text(now), count] for key, now, count in inputs])
    connection.execute(
        "INSERT INTO memory_review_state (agent_id, owner_id, channel, chat_id, thread_scope, "
        "pending_input, last_input_at, passive_since_review) SELECT j.value ->> 0, "
        "j.value ->> 1, j.value ->> 2, j.value ->> 3, j.value ->> 4, 1, j.value ->> 5, "
        f"CAST(j.value ->> 6 AS BIGINT) FROM {engine_of(connection).json_rows('?', 'j')} "
        "WHERE true ORDER BY j.key "
        "ON CONFLICT (agent_id, owner_id, channel, chat_id, thread_scope) DO UPDATE SET "
        "pending_input = 1, last_input_at = excluded.last_input_at, "
        "passive_since_review = memory_review_state.passive_since_review "
        "+ excluded.passive_since_review",
        (payload,),
    )


def conversation_texts(connection: Transaction, key: ConversationKey) -> tuple[str, str]:
    """(working memory, description) of a conversation; empty when it has no record."""
    found = rows(
        connection,
        f"SELECT working_memory, description FROM conversations WHERE {CONVERSATION_MATCH}",
        key.as_row(),
    )
    return (found[0][0], found[0][1]) if found else ("", "")


def session_start(connection: Transaction, key: ConversationKey) -> int:
    """The id after which the conversation's current session starts (0 when it has no record)."""
    found = rows(
        connection,
        f"SELECT session_start_id FROM conversations WHERE {CONVERSATION_MATCH}",
        key.as_row(),
    )
    return int(found[0][0]) if found else 0


def set_working_memory(connection: Transaction, key: ConversationKey, text: str) -> None:
    """Set the session's working memory."""
    connection.execute(
        f"UPDATE conversations SET working_memory = ? WHERE {CONVERSATION_MATCH}",
        (text, *key.as_row()),
    )


def set_description(connection: Transaction, key: ConversationKey, text: str) -> None:
    """Set the session's description."""
    connection.execute(
        f"UPDATE conversations SET description = ? WHERE {CONVERSATION_MATCH}",
        (text, *key.as_row()),
    )


def set_ended_session_text(
    connection: Transaction,
    key: ConversationKey,
    started_after_id: int,
    *,
    working_memory: str | None = None,
    description: str | None = None,
) -> bool:
    """Set the working memory or description of the ended session that started after
    `started_after_id` (a review that read it and finished after `/new`); False when no ended
    session is recorded there."""
    column, text = (
        ("working_memory", working_memory)
        if working_memory is not None
        else ("description", description or "")
    )
    connection.execute(
        f"UPDATE ended_sessions SET {column} = ? WHERE {CONVERSATION_MATCH} "
        "AND started_after_id = ?",
        (text, *key.as_row(), started_after_id),
    )
    return connection.changes() > 0
