"""Writes of conversation history, run by the writer inside its transaction.

Appends are set-based: one call stores the messages of every append in a write group with a
fixed handful of statements (a duplicate check, one counter bump, one conversation upsert, one
insert), whatever the number of messages. Rows travel as a single JSON array read as a table
(Engine.json_rows), so each statement has one text and stays in the prepared-statement cache.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
from collections.abc import Sequence

from memoryd.domain.conversation import ConversationKey, search_scope_tokens
from memoryd.domain.history import AppendedMessage, AppendOutcome, AppendResult, WindowState
from memoryd.domain.messages import NewMessage, StoredMessage
from memoryd.domain.timestamps import from_text, to_text
from memoryd.storage.engine import Engine, engine_of
from memoryd.storage.history_reads import described
from memoryd.storage.message_rows import (
    MESSAGE_COLUMNS,
    message_from_row,
    window_state_from_row,
)
from memoryd.storage.sql import CONVERSATION_MATCH, KEY_MATCH, Row, one, placeholders, rows
from memoryd.storage.transaction import Transaction

# The statements of an append, per engine (built once each). The rows of the JSON array are
# arrays; `->>` reads element N as an SQL value (text on PostgreSQL, hence the CAST of the
# integers).


@functools.cache
def _insert_messages_sql(engine: Engine) -> str:
    return (
        "INSERT INTO messages (agent_id, owner_id, channel, chat_id, thread_scope, sender, role, "
        "kind, content, metadata_json, trust, client_message_id, created_at, token_count) "
        "SELECT j.value ->> 0, j.value ->> 1, j.value ->> 2, j.value ->> 3, j.value ->> 4, "
        "j.value ->> 5, j.value ->> 6, j.value ->> 7, j.value ->> 8, j.value ->> 9, "
        "j.value ->> 10, j.value ->> 11, j.value ->> 12, CAST(j.value ->> 13 AS BIGINT) "
        f"FROM {engine.json_rows('?', 'j')} ORDER BY j.key"
    )


@functools.cache
def _new_conversations_sql(engine: Engine, *, upsert: bool) -> str:
    """`upsert`: an existing conversation takes the new history version; otherwise it stays.
    `WHERE true` keeps SQLite from reading ON CONFLICT as a join constraint."""
    conflict = (
        "ON CONFLICT (agent_id, owner_id, channel, chat_id, thread_scope) "
        "DO UPDATE SET history_version = excluded.history_version"
        if upsert
        else "ON CONFLICT DO NOTHING"
    )
    return (
        "INSERT INTO conversations (agent_id, owner_id, channel, chat_id, thread_scope, "
        "search_scope, history_version, created_at) "
        "SELECT j.value ->> 0, j.value ->> 1, j.value ->> 2, j.value ->> 3, j.value ->> 4, "
        f"j.value ->> 5, CAST(? AS BIGINT), ? FROM {engine.json_rows('?', 'j')} WHERE true "
        + conflict
    )


@functools.cache
def _existing_by_client_id_sql(engine: Engine) -> str:
    return (
        f"SELECT {MESSAGE_COLUMNS} FROM {engine.json_rows('?', 'j')} JOIN messages AS m "
        "ON m.agent_id = j.value ->> 0 AND m.owner_id = j.value ->> 1 "
        "AND m.channel = j.value ->> 2 AND m.chat_id = j.value ->> 3 "
        "AND m.thread_scope = j.value ->> 4 "
        "AND m.client_message_id = j.value ->> 5 AND m.client_message_id IS NOT NULL"
    )


@functools.cache
def _versions_sql(engine: Engine) -> str:
    return (
        "SELECT c.agent_id, c.owner_id, c.channel, c.chat_id, c.thread_scope, c.history_version "
        f"FROM {engine.json_rows('?', 'j')} JOIN conversations AS c "
        "ON (c.agent_id, c.owner_id, c.channel, c.chat_id, c.thread_scope) = "
        "(j.value ->> 0, j.value ->> 1, j.value ->> 2, j.value ->> 3, j.value ->> 4)"
    )


@dataclasses.dataclass(frozen=True, slots=True)
class AppendRequest:
    """One AppendMessages call: None marks a blank message, which is skipped."""

    key: ConversationKey
    messages: tuple[NewMessage | None, ...]
    now: dt.datetime
    # Store the messages as already reviewed (a backfill), where the review cursor allows.
    as_reviewed: bool = False


@dataclasses.dataclass(slots=True)
class _Slot:
    """One message of one request, while the batch is planned."""

    outcome: AppendOutcome
    message: StoredMessage | None = None
    # For a message stored by this batch: its position in the insert; for a duplicate of one.
    insert_position: int | None = None


def append_batch(connection: Transaction, requests: list[AppendRequest]) -> list[AppendResult]:
    """Store the messages of several appends at once; one result per request, in order."""
    keys = {request.key.as_row(): request.key for request in requests}
    existing = _existing_by_client_id(connection, requests, keys)
    inserts: list[tuple[ConversationKey, NewMessage, str]] = []
    claimed: dict[tuple[Row, str], int] = {}
    plans: list[list[_Slot]] = []
    for request in requests:
        now_text = to_text(request.now)
        slots = []
        for message in request.messages:
            if message is None:
                slots.append(_Slot(AppendOutcome.SKIPPED_BLANK))
                continue
            client_key = (request.key.as_row(), message.client_message_id or "")
            if message.client_message_id and client_key in existing:
                slots.append(_Slot(AppendOutcome.DUPLICATE, existing[client_key]))
            elif message.client_message_id and client_key in claimed:
                slots.append(_Slot(AppendOutcome.DUPLICATE, insert_position=claimed[client_key]))
            else:
                if message.client_message_id:
                    claimed[client_key] = len(inserts)
                slots.append(_Slot(AppendOutcome.STORED, insert_position=len(inserts)))
                created_at = to_text(message.created_at) if message.created_at else now_text
                inserts.append((request.key, message, created_at))
        plans.append(slots)

    versions: dict[Row, int] = {}
    stored: list[StoredMessage] = []
    if inserts:
        version = next_history_version(connection)
        written = list(dict.fromkeys(key.as_row() for key, _, _ in inserts))
        _upsert_conversations(connection, [keys[row] for row in written], version, requests[0].now)
        versions = dict.fromkeys(written, version)
        stored = _insert_messages(connection, inserts)
    untouched = [row for row in keys if row not in versions]
    if untouched:
        versions.update(_current_versions(connection, untouched))

    results = []
    for request, slots in zip(requests, plans, strict=True):
        appended = []
        for index, slot in enumerate(slots):
            row_message = slot.message
            if slot.insert_position is not None:
                row_message = stored[slot.insert_position]
            appended.append(AppendedMessage(index, slot.outcome, row_message))
        row = request.key.as_row()
        results.append(AppendResult(request.key, tuple(appended), versions.get(row, 0)))
    return results


def clear_window(connection: Transaction, key: ConversationKey, now: dt.datetime) -> WindowState:
    """Start a fresh window and session after the conversation's newest message: the ending
    session's working memory and description are kept (ended_sessions), the new one has none."""
    ensure_conversation(connection, key, now)
    newest = one(connection, f"SELECT max(m.id) FROM messages AS m WHERE {KEY_MATCH}", key.as_row())
    greatest = engine_of(connection).greatest
    _end_session(connection, key, newest[0] or 0, now)
    row = one(
        connection,
        f"UPDATE conversations SET window_start_id = {greatest('window_start_id', '?')}, "
        f"session_start_id = {greatest('session_start_id', '?')}, window_started_at = ?, "
        "working_memory = '', description = '', "
        f"history_version = ? WHERE {CONVERSATION_MATCH} "
        "RETURNING window_start_id, window_started_at, history_version",
        (
            newest[0] or 0,
            newest[0] or 0,
            to_text(now),
            next_history_version(connection),
            *key.as_row(),
        ),
    )
    return window_state_from_row(row)


def _end_session(
    connection: Transaction, key: ConversationKey, newest: int, now: dt.datetime
) -> None:
    """Keep the ending session's texts, unless it had neither messages nor texts."""
    started, working_memory, written = one(
        connection,
        "SELECT session_start_id, working_memory, description FROM conversations "
        f"WHERE {CONVERSATION_MATCH}",
        key.as_row(),
    )
    if newest <= started and not working_memory and not written:
        return
    connection.execute(
        "INSERT INTO ended_sessions (agent_id, owner_id, channel, chat_id, thread_scope, "
        "started_after_id, last_message_id, working_memory, description, ended_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            *key.as_row(),
            started,
            max(newest, started),
            working_memory,
            described(connection, key, written, started),
            to_text(now),
        ),
    )


def ensure_conversation(connection: Transaction, key: ConversationKey, now: dt.datetime) -> None:
    """Create the conversation's record if it has none (a turn whose messages were all blank)."""
    _upsert_conversations(connection, [key], None, now)


def purge_conversation(connection: Transaction, key: ConversationKey) -> tuple[int, bool]:
    """Delete every message (the triggers remove their index entries), then the conversation."""
    connection.execute(f"DELETE FROM messages AS m WHERE {KEY_MATCH}", key.as_row())
    deleted = connection.changes()
    connection.execute(f"DELETE FROM conversations WHERE {CONVERSATION_MATCH}", key.as_row())
    return deleted, connection.changes() > 0


@dataclasses.dataclass(frozen=True, slots=True)
class NamedMessages:
    """The messages of a conversation among the ids asked for, where its window starts and its
    history version (0 and 0 when it has no record)."""

    window_start_id: int
    history_version: int
    # (id, kind) of each id the conversation holds, ascending.
    found: tuple[tuple[int, str], ...]


@dataclasses.dataclass(frozen=True, slots=True)
class ErasedMessages:
    """What purge_messages removed."""

    ids: tuple[int, ...]
    history_version: int
    # Memory rows that cited an erased message (their link is gone: ON DELETE SET NULL).
    memory_ids: tuple[int, ...]


def named_messages(
    connection: Transaction, key: ConversationKey, message_ids: Sequence[int]
) -> NamedMessages:
    """Which of these ids are messages of the conversation, and its window's start."""
    window = rows(
        connection,
        f"SELECT window_start_id, history_version FROM conversations WHERE {CONVERSATION_MATCH}",
        key.as_row(),
    )
    found = rows(
        connection,
        f"SELECT m.id, m.kind FROM messages AS m WHERE {KEY_MATCH} "
        f"AND m.id IN ({placeholders(len(message_ids))}) ORDER BY m.id",
        (*key.as_row(), *message_ids),
    )
    start, version = (int(window[0][0]), int(window[0][1])) if window else (0, 0)
    return NamedMessages(start, version, tuple((int(r[0]), str(r[1])) for r in found))


def purge_messages(
    connection: Transaction, key: ConversationKey, message_ids: Sequence[int]
) -> ErasedMessages:
    """Delete these messages of the conversation (the triggers and foreign keys take their
    index entries and vectors, and unlink memory rows citing them), the kept review exchanges
    of the conversation from the first of them on, and move the history version."""
    ids = tuple(sorted(set(message_ids)))
    listed = placeholders(len(ids))
    citing = rows(connection, f"SELECT id FROM memories WHERE source_message_id IN ({listed})", ids)
    connection.execute(
        f"DELETE FROM messages AS m WHERE {KEY_MATCH} AND m.id IN ({listed})",
        (*key.as_row(), *ids),
    )
    connection.execute(
        "DELETE FROM review_exchanges WHERE run_id IN (SELECT id FROM review_runs "
        f"WHERE {CONVERSATION_MATCH} AND max_message_id >= ?)",
        (*key.as_row(), ids[0]),
    )
    version = one(
        connection,
        f"UPDATE conversations SET history_version = ? WHERE {CONVERSATION_MATCH} "
        "RETURNING history_version",
        (next_history_version(connection), *key.as_row()),
    )
    return ErasedMessages(ids, int(version[0]), tuple(int(row[0]) for row in citing))


def next_history_version(connection: Transaction) -> int:
    """A history version never handed out before (a global counter, never reused)."""
    row = one(
        connection,
        "UPDATE counters SET value = value + 1 WHERE name = 'history_version' RETURNING value",
    )
    return int(row[0])


def _existing_by_client_id(
    connection: Transaction, requests: list[AppendRequest], keys: dict[Row, ConversationKey]
) -> dict[tuple[Row, str], StoredMessage]:
    wanted = {
        (request.key.as_row(), message.client_message_id)
        for request in requests
        for message in request.messages
        if message is not None and message.client_message_id
    }
    if not wanted:
        return {}
    found = rows(
        connection,
        _existing_by_client_id_sql(engine_of(connection)),
        (json.dumps([[*k, c] for k, c in wanted]),),
    )
    shared = dict(keys)
    stored = (message_from_row(row, shared) for row in found)
    return {(message.key.as_row(), message.client_message_id or ""): message for message in stored}


def _upsert_conversations(
    connection: Transaction,
    keys: Sequence[ConversationKey],
    version: int | None,
    now: dt.datetime,
) -> None:
    """Create conversations that do not exist; set the version of all when one is given."""
    payload = json.dumps([[*key.as_row(), search_scope_tokens(key)] for key in keys])
    if version is None:
        connection.execute(
            _new_conversations_sql(engine_of(connection), upsert=False), (0, to_text(now), payload)
        )
    else:
        connection.execute(
            _new_conversations_sql(engine_of(connection), upsert=True),
            (version, to_text(now), payload),
        )


def _insert_messages(
    connection: Transaction, inserts: list[tuple[ConversationKey, NewMessage, str]]
) -> list[StoredMessage]:
    payload = json.dumps(
        [
            [
                *key.as_row(),
                message.sender,
                message.role.value,
                message.kind,
                message.content,
                message.metadata_json,
                message.trust.value,
                message.client_message_id,
                created_at,
                message.tokens,
            ]
            for key, message, created_at in inserts
        ],
        ensure_ascii=False,
    )
    connection.execute(_insert_messages_sql(engine_of(connection)), (payload,))
    # One INSERT ... SELECT ... ORDER BY inserts its rows in that order, and AUTOINCREMENT gives
    # each the next id: the ids are the consecutive run ending at last_insert_rowid().
    count = connection.changes()
    if count != len(inserts):  # pragma: no cover - would mean the statement skipped rows
        raise RuntimeError(f"inserted {count} of {len(inserts)} messages")
    first_id = connection.last_insert_rowid() - count + 1
    return [
        StoredMessage(
            id=first_id + position,
            key=key,
            sender=message.sender,
            role=message.role,
            kind=message.kind,
            content=message.content,
            metadata_json=message.metadata_json,
            client_message_id=message.client_message_id,
            created_at=from_text(created_at),
            trust=message.trust,
        )
        for position, (key, message, created_at) in enumerate(inserts)
    ]


def _current_versions(connection: Transaction, keys: list[Row]) -> dict[Row, int]:
    found = rows(
        connection, _versions_sql(engine_of(connection)), (json.dumps([list(row) for row in keys]),)
    )
    return {tuple(row[:5]): int(row[5]) for row in found}
