"""Compaction in SQLite: a conversation's window and checkpoint, the messages compaction and
composition read, and the transaction that stores a checkpoint and moves the window.

Every function runs inside a read or write transaction given by the caller.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json

from memoryd.domain.compaction import COMPACTOR, MESSAGE_OVERHEAD_BYTES, WindowMessage
from memoryd.domain.conversation import ConversationKey
from memoryd.domain.messages import CHECKPOINT_KIND, NewMessage, Role, Trust
from memoryd.domain.resources import MutationSource, checkpoint_resource
from memoryd.domain.timestamps import from_text, to_text
from memoryd.domain.tokens import count_tokens
from memoryd.storage import history_writes, resource_store
from memoryd.storage.engine import Engine, engine_of
from memoryd.storage.sql import CONVERSATION_MATCH, KEY_MATCH, Columns, Row, one, rows
from memoryd.storage.transaction import Transaction

_CONVERSATION = Columns(
    "c",
    (
        "session_start_id",
        "window_start_id",
        "checkpoint_id",
        "history_version",
        "peak_prompt_tokens",
        "context_window",
        "compaction_failed_at",
        "compaction_error",
        "working_memory",
        "description",
    ),
)
_MESSAGE = Columns(
    "m", ("id", "role", "kind", "sender", "content", "metadata_json", "token_count", "created_at")
)


@functools.cache
def _select(engine: Engine) -> str:
    """The _MESSAGE columns, then a message's size in an answer, counted by the database
    (compose_context sums it for every message)."""
    size = " + ".join(
        engine.octet_length(f"m.{column}")
        for column in ("content", "metadata_json", "sender", "kind")
    )
    return f"SELECT {_MESSAGE.select}, {size} + {MESSAGE_OVERHEAD_BYTES} AS answer_bytes"


_ROLES = {role.value: role for role in Role}
# Messages read per query while walking a window newest first.
_CHUNK = 256
# Messages of the window that are not checkpoints (the latest checkpoint is a block of its own).
_WINDOW = f"{KEY_MATCH} AND m.kind != '{CHECKPOINT_KIND}'"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CompactionRow:
    """What compaction and composition need of a conversation's record."""

    session_start_id: int
    window_start_id: int
    checkpoint_id: int
    history_version: int
    peak_prompt_tokens: int | None
    context_window: int | None
    failed_at: dt.datetime | None
    error: str | None
    working_memory: str
    # The reviewer's description of the session ("" until it writes one). The fallback from the
    # first user message is not composed: that message is in the context, or in its summary.
    description: str


def conversation(connection: Transaction, key: ConversationKey) -> CompactionRow | None:
    """The conversation's window and compaction record, or None when it has none."""
    found = rows(
        connection,
        f"SELECT {_CONVERSATION.select} FROM conversations AS c WHERE {CONVERSATION_MATCH}",
        key.as_row(),
    )
    if not found:
        return None
    column = _CONVERSATION.named(found[0])
    failed_at = column["compaction_failed_at"]
    return CompactionRow(
        session_start_id=column["session_start_id"],
        window_start_id=column["window_start_id"],
        checkpoint_id=column["checkpoint_id"],
        history_version=column["history_version"],
        peak_prompt_tokens=column["peak_prompt_tokens"],
        context_window=column["context_window"],
        failed_at=from_text(failed_at) if failed_at is not None else None,
        error=column["compaction_error"],
        working_memory=column["working_memory"],
        description=column["description"],
    )


def protected(
    connection: Transaction, key: ConversationKey, session_start_id: int
) -> list[WindowMessage]:
    """The session's leading system messages (before its first message of another role)."""
    params = key.as_row()
    sql = (
        f"{_select(engine_of(connection))} FROM messages AS m WHERE {_WINDOW} AND m.id > ? "
        "AND m.role = 'system' AND m.id < coalesce((SELECT min(m.id) FROM messages AS m "
        f"WHERE {KEY_MATCH} AND m.id > ? AND m.role != 'system'), 9223372036854775807) "
        "ORDER BY m.id"
    )
    return [
        _message(row)
        for row in rows(connection, sql, (*params, session_start_id, *params, session_start_id))
    ]


def window(connection: Transaction, key: ConversationKey, after_id: int) -> list[WindowMessage]:
    """Every message of the window after `after_id`, oldest first (checkpoints aside)."""
    select = _select(engine_of(connection))
    sql = f"{select} FROM messages AS m WHERE {_WINDOW} AND m.id > ? ORDER BY m.id"
    return [_message(row) for row in rows(connection, sql, (*key.as_row(), after_id))]


def newest_within(
    connection: Transaction,
    key: ConversationKey,
    after_id: int,
    tokens: int,
    max_messages: int | None = None,
) -> tuple[list[WindowMessage], tuple[int, int]]:
    """The newest messages after `after_id` whose tokens fit in `tokens` (at most
    `max_messages` of them), plus the next older one when there is one, oldest first; and
    (count, tokens) of the older messages not read. Read newest first, in chunks, so a long
    window that was never compacted is not read whole."""
    found: list[WindowMessage] = []
    used = 0
    before = 2**63 - 1
    wanted = None if max_messages is None else max_messages + 1
    while True:
        chunk = rows(
            connection,
            f"{_select(engine_of(connection))} FROM messages AS m "
            f"WHERE {_WINDOW} AND m.id > ? AND m.id < ? "
            "ORDER BY m.id DESC LIMIT ?",
            (*key.as_row(), after_id, before, _CHUNK),
        )
        for row in chunk:
            message = _message(row)
            found.append(message)
            used += message.tokens
            if used > tokens or (wanted is not None and len(found) >= wanted):
                older = one(
                    connection,
                    "SELECT count(*), coalesce(sum(m.token_count), 0) FROM messages AS m "
                    f"WHERE {_WINDOW} AND m.id > ? AND m.id < ?",
                    (*key.as_row(), after_id, message.id),
                )
                return found[::-1], (int(older[0]), int(older[1]))
        if len(chunk) < _CHUNK:
            return found[::-1], (0, 0)
        before = found[-1].id


def message(connection: Transaction, message_id: int) -> WindowMessage | None:
    """One message by id."""
    found = rows(
        connection,
        f"{_select(engine_of(connection))} FROM messages AS m WHERE m.id = ?",
        (message_id,),
    )
    return _message(found[0]) if found else None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class StoredCheckpoint:
    """A checkpoint committed by store_checkpoint."""

    id: int
    history_version: int
    revision: int


def store_checkpoint(
    connection: Transaction,
    key: ConversationKey,
    *,
    expected_version: int,
    summary: str,
    covers: tuple[int, int],
    first_kept_id: int,
    now: dt.datetime,
) -> StoredCheckpoint | None:
    """Store the summary as a message and a checkpoint revision, and move the window to just
    before `first_kept_id`; None (nothing written) when the history version moved."""
    current = one(
        connection,
        f"SELECT history_version FROM conversations WHERE {CONVERSATION_MATCH}",
        key.as_row(),
    )
    if int(current[0]) != expected_version:
        return None
    details = json.dumps(
        {"first_message_id": covers[0], "last_message_id": covers[1]}, separators=(",", ":")
    )
    checkpoint = NewMessage(
        sender=COMPACTOR,
        role=Role.SYSTEM,
        kind=CHECKPOINT_KIND,
        content=summary,
        metadata_json=details,
        client_message_id=None,
        created_at=None,
        trust=Trust.OPERATOR,
        tokens=count_tokens(summary),
    )
    (appended,) = history_writes.append_batch(
        connection, [history_writes.AppendRequest(key, (checkpoint,), now)]
    )
    stored = appended.stored[0]
    connection.execute(
        "UPDATE conversations SET window_start_id = "
        f"{engine_of(connection).greatest('window_start_id', '?')}, checkpoint_id = ?, "
        "window_started_at = ?, peak_prompt_tokens = NULL, compaction_failed_at = NULL, "
        f"compaction_error = NULL WHERE {CONVERSATION_MATCH}",
        (first_kept_id - 1, stored.id, to_text(now), *key.as_row()),
    )
    committed = resource_store.commit(
        connection,
        checkpoint_resource(key),
        path="",
        content=summary,
        mutation_source=MutationSource.COMPACTION,
        provenance_json=json.dumps(
            {"checkpoint_id": stored.id, "conversation": key.scope_id, **json.loads(details)},
            separators=(",", ":"),
        ),
        now=now,
    )
    return StoredCheckpoint(
        id=stored.id, history_version=appended.history_version, revision=committed.current
    )


def checkpoint_revision(connection: Transaction, key: ConversationKey) -> int:
    """The conversation's checkpoint resource's current revision (0: none)."""
    found = resource_store.current(connection, checkpoint_resource(key))
    return found.revision if found is not None else 0


def reset_peak(connection: Transaction, key: ConversationKey) -> None:
    """Forget the recorded peak (after a compaction that found nothing to do)."""
    connection.execute(
        f"UPDATE conversations SET peak_prompt_tokens = NULL WHERE {CONVERSATION_MATCH}",
        key.as_row(),
    )


def record_failure(
    connection: Transaction, key: ConversationKey, error: str, now: dt.datetime
) -> None:
    """A failed compaction: automatic ones back off from `now`."""
    connection.execute(
        "UPDATE conversations SET compaction_failed_at = ?, compaction_error = ? "
        f"WHERE {CONVERSATION_MATCH}",
        (to_text(now), error[:1000], *key.as_row()),
    )


def uncounted(connection: Transaction, limit: int) -> list[tuple[int, str]]:
    """Messages stored before token counts existed: (id, content), at most `limit`."""
    found = rows(
        connection,
        "SELECT id, content FROM messages WHERE token_count IS NULL LIMIT ?",
        (limit,),
    )
    return [(int(row[0]), str(row[1])) for row in found]


def set_token_counts(connection: Transaction, counts: list[tuple[int, int]]) -> None:
    """Store counted tokens: (id, tokens) pairs."""
    connection.executemany(
        "UPDATE messages SET token_count = ? WHERE id = ?",
        [(tokens, mid) for mid, tokens in counts],
    )


def _message(row: Row) -> WindowMessage:
    """A WindowMessage from `_select` (the _MESSAGE columns, then answer_bytes)."""
    message_id, role, kind, sender, content, metadata_json, tokens, created_at = row[:8]
    return WindowMessage(
        id=message_id,
        role=_ROLES[role],
        kind=kind,
        sender=sender,
        content=content,
        metadata_json=metadata_json,
        tokens=tokens if tokens is not None else count_tokens(content),
        created_at=created_at,
        answer_bytes=_MESSAGE.after(row, 0),
    )


def claim(
    connection: Transaction, key: ConversationKey, token: str, *, now: str, stale_before: str
) -> bool:
    """Take the conversation's compaction claim (migration 0016) unless a fresh one is held."""
    found = rows(
        connection,
        "INSERT INTO compaction_claims (agent_id, owner_id, channel, chat_id, thread_scope, "
        "token, claimed_at) VALUES (?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (agent_id, owner_id, channel, chat_id, thread_scope) DO UPDATE SET "
        "token = excluded.token, claimed_at = excluded.claimed_at "
        "WHERE compaction_claims.claimed_at < ? RETURNING 1",
        (*key.as_row(), token, now, stale_before),
    )
    return bool(found)


def renew(connection: Transaction, key: ConversationKey, token: str, *, now: str) -> None:
    """Keep a held claim fresh (a live compaction's)."""
    connection.execute(
        f"UPDATE compaction_claims SET claimed_at = ? WHERE {CONVERSATION_MATCH} AND token = ?",
        (now, *key.as_row(), token),
    )


def release(connection: Transaction, key: ConversationKey, token: str) -> None:
    """Give the claim back, if it is still this token's."""
    connection.execute(
        f"DELETE FROM compaction_claims WHERE {CONVERSATION_MATCH} AND token = ?",
        (*key.as_row(), token),
    )
