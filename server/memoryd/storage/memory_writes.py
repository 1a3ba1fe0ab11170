"""Writes of memory rows, run by the writer inside its transaction.

Reads find a row of the caller's agent and owner only (another owner's row is NOT_FOUND, exactly
like a missing one). Writes store what they are given: whether the caller may change a row is
decided above storage, on the row as read in the same transaction
(memoryd.services.memory_changes). Each returns the row as committed.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from memoryd.domain.conversation import ConversationKey, OwnerKey, owner_scope_token
from memoryd.domain.memories import (
    Category,
    MemoryRecord,
    NewFact,
    Provenance,
    ScopeType,
    merge_metadata,
)
from memoryd.domain.memory_queries import Locator
from memoryd.domain.memory_sources import (
    ERASED_CONVERSATION,
    SourceInfo,
    conversation_source_id,
)
from memoryd.domain.messages import Trust
from memoryd.domain.timestamps import to_text
from memoryd.errors import InvalidArgument, NotFound
from memoryd.storage.memory_rows import (
    MEMORY_COLUMNS,
    OWNER_MATCH,
    RETURNED_COLUMNS,
    memory_from_row,
)
from memoryd.storage.sql import rows
from memoryd.storage.transaction import Transaction

_UPSERT = (
    "INSERT INTO memories AS r (agent_id, owner_id, scope_type, scope_id, category, key, value, "
    "confidence, promote_target, metadata_json, trust, source_id, source_type, source_name, "
    "source_description, session_id, run_id, source_message_id, provenance_json, search_scope, "
    "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, coalesce(?, '{}'), ?, ?, ?, ?, "
    "?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (agent_id, owner_id, scope_type, scope_id, key) "
    "DO UPDATE SET category = excluded.category, value = excluded.value, "
    "confidence = excluded.confidence, promote_target = excluded.promote_target, "
    "metadata_json = coalesce(?, r.metadata_json), trust = excluded.trust, "
    "source_id = excluded.source_id, source_type = excluded.source_type, "
    "source_name = excluded.source_name, source_description = excluded.source_description, "
    "session_id = excluded.session_id, run_id = excluded.run_id, "
    "source_message_id = excluded.source_message_id, provenance_json = excluded.provenance_json, "
    "updated_at = excluded.updated_at, archived_at = NULL, archived_by = NULL, "
    "archive_reason = NULL "
    f"RETURNING {RETURNED_COLUMNS}"
)


@dataclasses.dataclass(frozen=True, slots=True)
class Stored:
    """A row as committed, what it was before (None when created)."""

    record: MemoryRecord
    before: MemoryRecord | None


def find(connection: Transaction, owner: OwnerKey, locator: Locator) -> MemoryRecord | None:
    """The caller's row named by `locator`, or None."""
    if locator.id:
        sql = f"SELECT {MEMORY_COLUMNS} FROM memories AS r WHERE r.id = ? AND {OWNER_MATCH}"
        params: tuple[object, ...] = (locator.id, owner.agent_id, owner.owner_id)
    elif locator.scope_type is not None:
        sql = (
            f"SELECT {MEMORY_COLUMNS} FROM memories AS r WHERE {OWNER_MATCH} "
            "AND r.scope_type = ? AND r.scope_id = ? AND r.key = ?"
        )
        params = (
            owner.agent_id,
            owner.owner_id,
            locator.scope_type.value,
            locator.scope_id,
            locator.key,
        )
    else:
        raise InvalidArgument("either id, or scope_type and key, are required")
    found = rows(connection, sql, params)
    return memory_from_row(found[0]) if found else None


def require(connection: Transaction, owner: OwnerKey, locator: Locator) -> MemoryRecord:
    """The caller's row, or NOT_FOUND (the same answer whether it is missing or not theirs)."""
    record = find(connection, owner, locator)
    if record is None:
        raise NotFound(f"{locator.describe()} not found")
    return record


def upsert(
    connection: Transaction,
    fact: NewFact,
    source: SourceInfo,
    now: dt.datetime,
    *,
    before: MemoryRecord | None,
    job_id: str | None = None,
) -> Stored:
    """Store `fact` by key: a new row, or the existing one (`before`, as read in this
    transaction) updated in place, un-archived."""
    register_source(connection, fact.owner, source, now, job_id=job_id)
    provenance = fact.provenance
    stamp = to_text(now)
    found = rows(
        connection,
        _UPSERT,
        (
            fact.owner.agent_id,
            fact.owner.owner_id,
            fact.scope_type.value,
            fact.scope_id,
            fact.category.value,
            fact.key,
            fact.value,
            fact.confidence,
            fact.prompt_target.value,
            fact.metadata_json,
            fact.trust.value,
            provenance.source_id,
            provenance.source_type,
            provenance.source_name,
            provenance.source_description,
            provenance.session_id,
            provenance.run_id,
            provenance.source_message_id,
            provenance.details_json,
            owner_scope_token(fact.owner),
            stamp,
            stamp,
            fact.metadata_json,
        ),
    )
    return Stored(memory_from_row(found[0]), before)


def set_value(
    connection: Transaction,
    before: MemoryRecord,
    *,
    value: str | None,
    metadata_json: str | None,
    trust: Trust,
    now: dt.datetime,
) -> Stored:
    """Replace the value (None keeps it) and merge metadata into a row, as read in this
    transaction (`before`)."""
    found = rows(
        connection,
        "UPDATE memories SET value = ?, metadata_json = ?, trust = ?, updated_at = ? "
        f"WHERE id = ? RETURNING {RETURNED_COLUMNS}",
        (
            value if value is not None else before.value,
            merge_metadata(before.metadata_json, metadata_json),
            trust.value,
            to_text(now),
            before.id,
        ),
    )
    return Stored(memory_from_row(found[0]), before)


def archive(
    connection: Transaction,
    before: MemoryRecord,
    *,
    reason: str | None,
    archived_by: str,
    now: dt.datetime,
) -> Stored:
    """Archive an active row (kept, no longer shown or recalled)."""
    found = rows(
        connection,
        "UPDATE memories SET archived_at = ?, archived_by = ?, archive_reason = ? "
        f"WHERE id = ? RETURNING {RETURNED_COLUMNS}",
        (to_text(now), archived_by, reason, before.id),
    )
    return Stored(memory_from_row(found[0]), before)


def restore(connection: Transaction, before: MemoryRecord, *, now: dt.datetime) -> Stored:
    """Un-archive a row. It counts as an update: updated_at moves to `now`, so in a full
    prompt-file section (which keeps the most recently updated rows) the fact reappears at
    once."""
    found = rows(
        connection,
        "UPDATE memories SET archived_at = NULL, archived_by = NULL, archive_reason = NULL, "
        f"updated_at = ? WHERE id = ? RETURNING {RETURNED_COLUMNS}",
        (to_text(now), before.id),
    )
    return Stored(memory_from_row(found[0]), before)


def set_recency(connection: Transaction, memory_ids: tuple[int, ...], now: dt.datetime) -> None:
    """Mark these rows updated now, one millisecond apart in this order (the first the newest):
    a prompt file then lists them in this order within each of its sections."""
    connection.executemany(
        "UPDATE memories SET updated_at = ? WHERE id = ?",
        [
            (to_text(now - dt.timedelta(milliseconds=position)), memory_id)
            for position, memory_id in enumerate(memory_ids)
        ],
    )


def has_active_value(  # noqa: PLR0917 - a row's identity is these five values
    connection: Transaction,
    owner: OwnerKey,
    scope_type: ScopeType,
    scope_id: str,
    category: Category,
    value: str,
) -> bool:
    """Whether an active row of the scope already holds this fact (the reviewer adds no
    duplicate, whatever key it would give it)."""
    found = rows(
        connection,
        f"SELECT 1 FROM memories AS r WHERE {OWNER_MATCH} AND r.scope_type = ? "
        "AND r.scope_id = ? AND r.category = ? AND r.value = ? AND r.archived_at IS NULL LIMIT 1",
        (owner.agent_id, owner.owner_id, scope_type.value, scope_id, category.value, value),
    )
    return bool(found)


def delete(connection: Transaction, before: MemoryRecord) -> None:
    """Erase a row and its index entries."""
    connection.execute("DELETE FROM memories WHERE id = ?", (before.id,))


def delete_conversation_scope(connection: Transaction, key: ConversationKey) -> list[MemoryRecord]:
    """Erase every row scoped to one conversation (its notes and context); returns them."""
    found = rows(
        connection,
        f"DELETE FROM memories WHERE agent_id = ? AND owner_id = ? AND scope_type = ? "
        f"AND scope_id = ? RETURNING {RETURNED_COLUMNS}",
        (key.agent_id, key.owner_id, ScopeType.CONVERSATION.value, key.scope_id),
    )
    return [memory_from_row(row) for row in found]


def forget_conversation_source(connection: Transaction, key: ConversationKey) -> list[int]:
    """An erased conversation's memory source goes, and the rows written through it (facts at
    owner or agent scope, which stay) name no chat any more; returns those rows' ids."""
    owner_pair = (key.agent_id, key.owner_id)
    source = conversation_source_id(key)
    connection.execute(
        "DELETE FROM memory_sources WHERE agent_id = ? AND owner_id = ? AND id = ?",
        (*owner_pair, source),
    )
    erased = ERASED_CONVERSATION
    changed = rows(
        connection,
        "UPDATE memories SET source_id = ?, source_name = ?, source_description = ? "
        "WHERE agent_id = ? AND owner_id = ? AND source_id = ? RETURNING id",
        (erased.id, erased.name, erased.description, *owner_pair, source),
    )
    return [int(row[0]) for row in changed]


def register_source(
    connection: Transaction,
    owner: OwnerKey,
    info: SourceInfo,
    now: dt.datetime,
    *,
    job_id: str | None = None,
) -> None:
    """Record the memory source (and for a job, the job) rows are written through."""
    stamp = to_text(now)
    connection.execute(
        "INSERT INTO memory_sources (agent_id, owner_id, id, source_type, name, description, "
        "memory_scope, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (agent_id, owner_id, id) DO UPDATE SET updated_at = excluded.updated_at",
        (
            owner.agent_id,
            owner.owner_id,
            info.id,
            info.source_type,
            info.name,
            info.description,
            info.memory_scope,
            stamp,
            stamp,
        ),
    )
    if job_id is None:
        return
    connection.execute(
        "INSERT INTO scheduled_jobs (agent_id, owner_id, job_id, name, memory_source_id, "
        "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (agent_id, owner_id, job_id) DO UPDATE SET updated_at = excluded.updated_at",
        (owner.agent_id, owner.owner_id, job_id, job_id, info.id, stamp, stamp),
    )


def set_provenance(connection: Transaction, memory_id: int, provenance: Provenance) -> None:
    """Record who last changed a row (the reviewer, when it replaces a value)."""
    connection.execute(
        "UPDATE memories SET source_id = ?, source_type = ?, source_name = ?, "
        "source_description = ?, run_id = ?, provenance_json = ? WHERE id = ?",
        (
            provenance.source_id,
            provenance.source_type,
            provenance.source_name,
            provenance.source_description,
            provenance.run_id,
            provenance.details_json,
            memory_id,
        ),
    )


def message_belongs(connection: Transaction, owner: OwnerKey, message_id: int) -> bool:
    """Whether `message_id` is a stored message of this agent and owner."""
    found = rows(
        connection,
        "SELECT 1 FROM messages WHERE id = ? AND agent_id = ? AND owner_id = ?",
        (message_id, owner.agent_id, owner.owner_id),
    )
    return bool(found)
