"""SQL for conversation history: messages, conversation windows and the two search indexes.

Write functions run on the writer's connection inside its transaction; read functions run on a
reader connection inside a read transaction. Both only ever bind values as parameters; the only
text spliced into SQL is fixed fragments and placeholder lists.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from collections.abc import Iterable, Sequence
from typing import Any

import apsw

from memoryd.domain.conversation import (
    AgentKey,
    ConversationKey,
    HistoryScope,
    OwnerKey,
    scope_token,
    search_scope_tokens,
)
from memoryd.domain.messages import NewMessage, Role, StoredMessage, Trust
from memoryd.domain.search_query import SearchPlan, like_pattern
from memoryd.domain.snippets import ELLIPSIS, MARK, WORD_SNIPPET_TOKENS
from memoryd.domain.timestamps import to_text

KEY_COLUMNS = ("agent_id", "owner_id", "channel", "chat_id", "thread_scope")
KEY_MATCH = " AND ".join(f"m.{column} = ?" for column in KEY_COLUMNS)
CONVERSATION_MATCH = "(agent_id, owner_id, channel, chat_id, thread_scope) = (?, ?, ?, ?, ?)"
MESSAGE_COLUMNS = (
    "m.id, m.agent_id, m.owner_id, m.channel, m.chat_id, m.thread_scope, m.sender, m.role, "
    "m.kind, m.content, m.metadata_json, m.client_message_id, m.created_at, m.trust"
)
MESSAGE_COLUMN_COUNT = 14
Row = tuple[Any, ...]


class AppendOutcome(enum.Enum):
    """What happened to one message of an append."""

    STORED = "stored"
    DUPLICATE = "duplicate"
    SKIPPED_BLANK = "skipped_blank"


@dataclasses.dataclass(frozen=True, slots=True)
class AppendedMessage:
    """The result for one message of an append, in request order."""

    index: int
    outcome: AppendOutcome
    message: StoredMessage | None


@dataclasses.dataclass(frozen=True, slots=True)
class AppendResult:
    """The result of one append call."""

    key: ConversationKey
    messages: tuple[AppendedMessage, ...]
    history_version: int

    @property
    def stored(self) -> list[StoredMessage]:
        """The rows this call stored (not the duplicates)."""
        return [
            item.message
            for item in self.messages
            if item.outcome is AppendOutcome.STORED and item.message is not None
        ]


@dataclasses.dataclass(frozen=True, slots=True)
class WindowState:
    """A conversation's window, as stored on its row."""

    window_start_id: int
    window_started_at: dt.datetime | None
    history_version: int


@dataclasses.dataclass(frozen=True, slots=True)
class ConversationStats:
    """What GetConversation reports."""

    window: WindowState
    message_count: int
    window_message_count: int
    first_message_at: dt.datetime | None
    last_message_at: dt.datetime | None
    last_message_id: int


@dataclasses.dataclass(frozen=True, slots=True)
class WindowTail:
    """The newest messages of a conversation's window, oldest first."""

    window: WindowState | None
    messages: tuple[StoredMessage, ...]
    # True when `messages` holds every message of the window.
    complete: bool


@dataclasses.dataclass(frozen=True, slots=True)
class SearchHit:
    """One message found by a search."""

    message: StoredMessage
    snippet: str | None  # None: the caller builds a substring snippet
    rank: float
    word_match: bool


# --- writes -----------------------------------------------------------------------------------


def append_messages(
    connection: apsw.Connection,
    key: ConversationKey,
    messages: Sequence[NewMessage | None],
    now: dt.datetime,
) -> AppendResult:
    """Store `messages` (None marks a blank one to skip) at the end of the conversation."""
    now_text = to_text(now)
    results: list[AppendedMessage] = []
    stored_any = False
    if any(message is not None for message in messages):
        _ensure_conversation(connection, key, now_text)
    for index, message in enumerate(messages):
        if message is None:
            results.append(AppendedMessage(index, AppendOutcome.SKIPPED_BLANK, None))
            continue
        row = _insert_message(connection, key, message, now_text)
        if row is not None:
            stored_any = True
            results.append(AppendedMessage(index, AppendOutcome.STORED, row))
            continue
        existing = _message_by_client_id(connection, key, message.client_message_id)
        results.append(AppendedMessage(index, AppendOutcome.DUPLICATE, existing))
    if stored_any:
        version = _bump_history_version(connection, key)
    else:
        version = _current_version(connection, key)
    return AppendResult(key, tuple(results), version)


def clear_window(
    connection: apsw.Connection, key: ConversationKey, now: dt.datetime
) -> WindowState:
    """Start a fresh window after the conversation's newest message."""
    _ensure_conversation(connection, key, to_text(now))
    newest = _one(
        connection, f"SELECT max(m.id) FROM messages AS m WHERE {KEY_MATCH}", key.as_row()
    )
    row = _one(
        connection,
        "UPDATE conversations SET window_start_id = max(window_start_id, ?), "
        "window_started_at = ?, history_version = ? "
        f"WHERE {CONVERSATION_MATCH} "
        "RETURNING window_start_id, window_started_at, history_version",
        (newest[0] or 0, to_text(now), _next_version(connection), *key.as_row()),
    )
    return _window_state(row)


def purge_conversation(connection: apsw.Connection, key: ConversationKey) -> tuple[int, bool]:
    """Delete every message (the triggers remove their index entries), then the conversation."""
    connection.execute(f"DELETE FROM messages AS m WHERE {KEY_MATCH}", key.as_row())
    deleted = connection.changes()
    connection.execute(f"DELETE FROM conversations WHERE {CONVERSATION_MATCH}", key.as_row())
    return deleted, connection.changes() > 0


def _ensure_conversation(connection: apsw.Connection, key: ConversationKey, now_text: str) -> None:
    connection.execute(
        "INSERT INTO conversations (agent_id, owner_id, channel, chat_id, thread_scope, "
        "history_version, search_scope, created_at) VALUES (?, ?, ?, ?, ?, 0, ?, ?) "
        "ON CONFLICT DO NOTHING",
        (*key.as_row(), search_scope_tokens(key), now_text),
    )


def _insert_message(
    connection: apsw.Connection, key: ConversationKey, message: NewMessage, now_text: str
) -> StoredMessage | None:
    created_at = to_text(message.created_at) if message.created_at is not None else now_text
    rows = _rows(
        connection,
        "INSERT INTO messages (agent_id, owner_id, channel, chat_id, thread_scope, sender, role, "
        "kind, content, metadata_json, trust, client_message_id, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (agent_id, owner_id, channel, chat_id, thread_scope, client_message_id) "
        "WHERE client_message_id IS NOT NULL DO NOTHING RETURNING id",
        (
            *key.as_row(),
            message.sender,
            message.role.value,
            message.kind,
            message.content,
            message.metadata_json,
            message.trust.value,
            message.client_message_id,
            created_at,
        ),
    )
    if not rows:
        return None
    return StoredMessage(
        id=rows[0][0],
        key=key,
        sender=message.sender,
        role=message.role,
        kind=message.kind,
        content=message.content,
        metadata_json=message.metadata_json,
        client_message_id=message.client_message_id,
        created_at=dt.datetime.fromisoformat(created_at),
        trust=message.trust,
    )


def _message_by_client_id(
    connection: apsw.Connection, key: ConversationKey, client_message_id: str | None
) -> StoredMessage:
    row = _one(
        connection,
        f"SELECT {MESSAGE_COLUMNS} FROM messages AS m "
        f"WHERE {KEY_MATCH} AND m.client_message_id = ?",
        (*key.as_row(), client_message_id),
    )
    return _message(row, {key.as_row(): key})


def _next_version(connection: apsw.Connection) -> int:
    row = _one(
        connection,
        "UPDATE counters SET value = value + 1 WHERE name = 'history_version' RETURNING value",
    )
    return int(row[0])


def _bump_history_version(connection: apsw.Connection, key: ConversationKey) -> int:
    version = _next_version(connection)
    connection.execute(
        f"UPDATE conversations SET history_version = ? WHERE {CONVERSATION_MATCH}",
        (version, *key.as_row()),
    )
    return version


def _current_version(connection: apsw.Connection, key: ConversationKey) -> int:
    window = window_state(connection, key)
    return window.history_version if window is not None else 0


# --- reads ------------------------------------------------------------------------------------


def window_state(connection: apsw.Connection, key: ConversationKey) -> WindowState | None:
    """The conversation's window, or None when it has no record."""
    rows = _rows(
        connection,
        "SELECT window_start_id, window_started_at, history_version FROM conversations "
        f"WHERE {CONVERSATION_MATCH}",
        key.as_row(),
    )
    return _window_state(rows[0]) if rows else None


def window_floor(
    connection: apsw.Connection, key: ConversationKey, window_start_id: int, cap: int | None
) -> int:
    """Messages above this id form the window: after its start, and the newest `cap` of those."""
    if cap is None:
        return window_start_id
    rows = _rows(
        connection,
        f"SELECT m.id FROM messages AS m WHERE {KEY_MATCH} AND m.id > ? "
        "ORDER BY m.id DESC LIMIT 1 OFFSET ?",
        (*key.as_row(), window_start_id, cap),
    )
    return int(rows[0][0]) if rows else window_start_id


def window_tail(
    connection: apsw.Connection, key: ConversationKey, limit: int, cap: int | None
) -> WindowTail:
    """The newest `limit` messages of the window (for the hot cache), in one snapshot."""
    window = window_state(connection, key)
    if window is None:
        return WindowTail(None, (), complete=True)
    floor = window_floor(connection, key, window.window_start_id, cap)
    rows = page(connection, key, before_id=None, floor_id=floor, kinds=(), limit=limit + 1)
    complete = len(rows) <= limit
    return WindowTail(window, tuple(reversed(rows[:limit])), complete)


def page(
    connection: apsw.Connection,
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
    _add_kinds(sql, params, kinds)
    sql.append("ORDER BY m.id DESC LIMIT ?")
    params.append(limit)
    names = {key.as_row(): key}
    return [_message(row, names) for row in _rows(connection, " ".join(sql), params)]


def conversation_stats(
    connection: apsw.Connection, key: ConversationKey, cap: int | None
) -> ConversationStats | None:
    """Counts, times and window of a conversation, or None when it has no record."""
    window = window_state(connection, key)
    if window is None:
        return None
    params = key.as_row()
    total = _one(connection, f"SELECT count(*) FROM messages AS m WHERE {KEY_MATCH}", params)[0]
    in_window = _one(
        connection,
        f"SELECT count(*) FROM messages AS m WHERE {KEY_MATCH} AND m.id > ?",
        (*params, window.window_start_id),
    )[0]
    first = _rows(
        connection,
        f"SELECT m.created_at FROM messages AS m WHERE {KEY_MATCH} ORDER BY m.id LIMIT 1",
        params,
    )
    last = _rows(
        connection,
        f"SELECT m.id, m.created_at FROM messages AS m WHERE {KEY_MATCH} "
        "ORDER BY m.id DESC LIMIT 1",
        params,
    )
    return ConversationStats(
        window=window,
        message_count=int(total),
        window_message_count=int(in_window if cap is None else min(in_window, cap)),
        first_message_at=dt.datetime.fromisoformat(first[0][0]) if first else None,
        last_message_at=dt.datetime.fromisoformat(last[0][1]) if last else None,
        last_message_id=int(last[0][0]) if last else 0,
    )


def search_words(
    connection: apsw.Connection,
    scope: HistoryScope,
    expression: str,
    kinds: tuple[str, ...],
    limit: int,
) -> list[SearchHit]:
    """Whole-word matches of `expression` (already quoted), best bm25 first, then newest."""
    match = f'content : ({expression}) AND scope : "{scope_token(scope)}"'
    sql = [
        (
            f"SELECT {MESSAGE_COLUMNS}, "
            f"snippet(messages_fts, 0, '{MARK}', '{MARK}', '{ELLIPSIS}', {WORD_SNIPPET_TOKENS}), "
            "bm25(messages_fts, 1.0, 0.0) AS score "
            "FROM messages_fts JOIN messages AS m ON m.id = messages_fts.rowid "
            "WHERE messages_fts MATCH ?"
        )
    ]
    params: list[Any] = [match]
    _add_scope(sql, params, scope)
    _add_kinds(sql, params, kinds)
    sql.append("ORDER BY score, m.id DESC LIMIT ?")
    params.append(limit)
    names: dict[Row, ConversationKey] = {}
    return [
        SearchHit(
            _message(row, names),
            snippet=row[MESSAGE_COLUMN_COUNT],
            rank=float(row[MESSAGE_COLUMN_COUNT + 1]),
            word_match=True,
        )
        for row in _rows(connection, " ".join(sql), params)
    ]


def search_substrings(
    connection: apsw.Connection,
    scope: HistoryScope,
    plan: SearchPlan,
    kinds: tuple[str, ...],
    *,
    exclude_ids: Iterable[int],
    limit: int,
) -> list[SearchHit]:
    """Messages containing every word of the query as a substring, newest first."""
    params: list[Any] = []
    if plan.trigram_pieces:
        # The trigram index answers LIKE '%piece%' (no ESCAPE: that would disable the index).
        sql = [
            f"SELECT {MESSAGE_COLUMNS} FROM messages_trigram AS t "
            "JOIN messages AS m ON m.id = t.rowid WHERE "
            + " AND ".join("t.content LIKE ?" for _ in plan.trigram_pieces)
        ]
        params.extend(like_pattern(piece) for piece in plan.trigram_pieces)
    else:
        sql = [f"SELECT {MESSAGE_COLUMNS} FROM messages AS m WHERE 1"]
    for word in plan.exact_words:
        sql.append("AND instr(lower(m.content), lower(?)) > 0")
        params.append(word)
    _add_scope(sql, params, scope)
    _add_kinds(sql, params, kinds)
    excluded = list(exclude_ids)
    if excluded:
        sql.append(f"AND m.id NOT IN ({_placeholders(len(excluded))})")
        params.extend(excluded)
    sql.append("ORDER BY m.id DESC LIMIT ?")
    params.append(limit)
    names: dict[Row, ConversationKey] = {}
    return [
        SearchHit(_message(row, names), snippet=None, rank=0.0, word_match=False)
        for row in _rows(connection, " ".join(sql), params)
    ]


# --- helpers ----------------------------------------------------------------------------------


def _rows(connection: apsw.Connection, sql: str, params: Sequence[Any] = ()) -> list[Row]:
    rows: list[Row] = connection.execute(sql, params).fetchall()
    return rows


def _one(connection: apsw.Connection, sql: str, params: Sequence[Any] = ()) -> Row:
    """The single row a statement always returns (an aggregate, a RETURNING of a known row)."""
    return _rows(connection, sql, params)[0]


def _add_scope(sql: list[str], params: list[Any], scope: HistoryScope) -> None:
    # Always filter by the key columns too: scope tokens narrow the index, columns decide.
    if isinstance(scope, ConversationKey):
        sql.append(f"AND {KEY_MATCH}")
        params.extend(scope.as_row())
    elif isinstance(scope, OwnerKey):
        sql.append("AND m.agent_id = ? AND m.owner_id = ?")
        params.extend((scope.agent_id, scope.owner_id))
    elif isinstance(scope, AgentKey):
        sql.append("AND m.agent_id = ?")
        params.append(scope.agent_id)


def _add_kinds(sql: list[str], params: list[Any], kinds: tuple[str, ...]) -> None:
    if kinds:
        sql.append(f"AND m.kind IN ({_placeholders(len(kinds))})")
        params.extend(kinds)


def _placeholders(count: int) -> str:
    return ", ".join("?" * count)


def _window_state(row: Row) -> WindowState:
    return WindowState(
        window_start_id=int(row[0]),
        window_started_at=dt.datetime.fromisoformat(row[1]) if row[1] else None,
        history_version=int(row[2]),
    )


def _message(row: Row, names: dict[Row, ConversationKey]) -> StoredMessage:
    key_row = tuple(row[1:6])
    key = names.get(key_row)
    if key is None:
        key = names[key_row] = ConversationKey(*key_row)
    return StoredMessage(
        id=row[0],
        key=key,
        sender=row[6],
        role=Role(row[7]),
        kind=row[8],
        content=row[9],
        metadata_json=row[10],
        client_message_id=row[11],
        created_at=dt.datetime.fromisoformat(row[12]),
        trust=Trust(row[13]),
    )
