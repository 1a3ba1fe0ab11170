"""Reads of conversation history, run on reader connections inside one read transaction: a
window's state, its pages and tail, a conversation's figures and its ended sessions (searches
are storage.search_reads')."""

from __future__ import annotations

from typing import Any

from memoryd.domain.conversation import (
    ConversationKey,
)
from memoryd.domain.history import (
    ConversationStats,
    EndedSession,
    WindowState,
    WindowTail,
)
from memoryd.domain.messages import StoredMessage
from memoryd.domain.review_admission import session_description
from memoryd.domain.timestamps import from_text
from memoryd.storage.message_rows import (
    MESSAGE_COLUMNS,
    message_from_row,
    window_state_from_row,
)
from memoryd.storage.sql import CONVERSATION_MATCH, KEY_MATCH, add_kinds, one, rows
from memoryd.storage.transaction import Transaction


def window_state(connection: Transaction, key: ConversationKey) -> WindowState | None:
    """The conversation's window, or None when it has no record."""
    found = rows(
        connection,
        "SELECT window_start_id, window_started_at, history_version FROM conversations "
        f"WHERE {CONVERSATION_MATCH}",
        key.as_row(),
    )
    return window_state_from_row(found[0]) if found else None


def window_floor(
    connection: Transaction, key: ConversationKey, window_start_id: int, cap: int | None
) -> int:
    """Messages above this id form the window: after its start, and the newest `cap` of those."""
    if cap is None:
        return window_start_id
    found = rows(
        connection,
        f"SELECT m.id FROM messages AS m WHERE {KEY_MATCH} AND m.id > ? "
        "ORDER BY m.id DESC LIMIT 1 OFFSET ?",
        (*key.as_row(), window_start_id, cap),
    )
    return int(found[0][0]) if found else window_start_id


def window_tail(
    connection: Transaction, key: ConversationKey, limit: int, cap: int | None
) -> WindowTail:
    """The newest `limit` messages of the window (for the hot cache), in one snapshot."""
    window = window_state(connection, key)
    if window is None:
        return WindowTail(None, (), complete=True)
    floor = window_floor(connection, key, window.window_start_id, cap)
    newest = page(connection, key, before_id=None, floor_id=floor, kinds=(), limit=limit + 1)
    complete = len(newest) <= limit
    return WindowTail(window, tuple(reversed(newest[:limit])), complete)


def page(
    connection: Transaction,
    key: ConversationKey,
    *,
    before_id: int | None,
    floor_id: int,
    kinds: tuple[str, ...],
    limit: int,
) -> list[StoredMessage]:
    """Up to `limit` messages with floor_id < id < before_id, newest first."""
    sql = [f"SELECT {MESSAGE_COLUMNS} FROM messages AS m WHERE {KEY_MATCH} AND m.id > ?"]
    params: list[Any] = [*key.as_row(), floor_id]
    if before_id is not None:
        sql.append("AND m.id < ?")
        params.append(before_id)
    add_kinds(sql, params, kinds)
    sql.append("ORDER BY m.id DESC LIMIT ?")
    params.append(limit)
    names = {key.as_row(): key}
    return [message_from_row(row, names) for row in rows(connection, " ".join(sql), params)]


def conversation_stats(
    connection: Transaction, key: ConversationKey, cap: int | None
) -> ConversationStats | None:
    """Counts, times and window of a conversation, or None when it has no record."""
    window = window_state(connection, key)
    if window is None:
        return None
    params = key.as_row()
    total = one(connection, f"SELECT count(*) FROM messages AS m WHERE {KEY_MATCH}", params)[0]
    in_window = one(
        connection,
        f"SELECT count(*) FROM messages AS m WHERE {KEY_MATCH} AND m.id > ?",
        (*params, window.window_start_id),
    )[0]
    first = rows(
        connection,
        f"SELECT m.created_at FROM messages AS m WHERE {KEY_MATCH} ORDER BY m.id LIMIT 1",
        params,
    )
    last = rows(
        connection,
        f"SELECT m.id, m.created_at FROM messages AS m WHERE {KEY_MATCH} "
        "ORDER BY m.id DESC LIMIT 1",
        params,
    )
    texts = one(
        connection,
        "SELECT working_memory, description, completed_turns, coalesce(peak_prompt_tokens, 0), "
        "coalesce(context_window, 0), session_start_id FROM conversations "
        f"WHERE {CONVERSATION_MATCH}",
        params,
    )
    return ConversationStats(
        working_memory=texts[0],
        description=described(connection, key, texts[1], texts[5]),
        previous_session=last_ended_session(connection, key),
        completed_turns=texts[2],
        peak_prompt_tokens=texts[3],
        context_window=texts[4],
        window=window,
        message_count=int(total),
        window_message_count=int(in_window if cap is None else min(in_window, cap)),
        first_message_at=from_text(first[0][0]) if first else None,
        last_message_at=from_text(last[0][1]) if last else None,
        last_message_id=int(last[0][0]) if last else 0,
    )


def described(
    connection: Transaction, key: ConversationKey, written: str, session_start_id: int
) -> str:
    """The session's description: the reviewer's, else from its first user message."""
    if written:
        return written
    first = rows(
        connection,
        f"SELECT m.content FROM messages AS m WHERE {KEY_MATCH} AND m.id > ? "
        "AND m.role = 'user' ORDER BY m.id LIMIT 1",
        (*key.as_row(), session_start_id),
    )
    return session_description("", first[0][0] if first else None)


def last_ended_session(connection: Transaction, key: ConversationKey) -> EndedSession | None:
    """The session `/new` ended last, or None."""
    found = rows(
        connection,
        "SELECT started_after_id, last_message_id, working_memory, description, ended_at "
        f"FROM ended_sessions WHERE {CONVERSATION_MATCH} ORDER BY id DESC LIMIT 1",
        key.as_row(),
    )
    if not found:
        return None
    started, last, working_memory, description, ended_at = found[0]
    return EndedSession(
        started_after_id=started,
        last_message_id=last,
        working_memory=working_memory,
        description=description,
        ended_at=from_text(ended_at),
    )
