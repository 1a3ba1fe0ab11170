"""Erasure that leaves nothing behind in the files: an owner's rows deleted from every table, the
word indexes rewritten without them, the WAL emptied.

Deleting a row is not enough for "nothing of it can be found": FTS5 records a deletion as a
marker and keeps the old terms in its segments until they are merged, the WAL keeps old page
images until a checkpoint, and the planner's sampled index keys (sqlite_stat4, written by
ANALYZE) keep words, owners and chat ids. So after an erasure every index is optimized (merged
into one segment without the deleted entries) and the samples are dropped, in the same
transaction, and once it has committed the WAL is checkpointed and truncated. With
secure_delete on (the default, [memoryd.storage]) SQLite overwrites freed content with zeros,
so the database file holds no copy either.
"""

from __future__ import annotations

import dataclasses
import json

import apsw

from memoryd.domain.conversation import ConversationKey, OwnerKey
from memoryd.domain.resources import checkpoint_owner_prefix, checkpoint_resource
from memoryd.storage.engine import engine_of
from memoryd.storage.sql import rows
from memoryd.storage.transaction import Transaction

# The revisions of an owner's prompt files but their current ones (two parameters), and of those
# the ones whose provenance says they rendered any of the rows in a JSON array (one more), or
# that say nothing of what they rendered.
_RENDERING_REVISIONS = (
    "DELETE FROM resource_revisions AS v WHERE v.resource_id IN (SELECT s.id FROM "
    "resources AS s WHERE s.agent_id = ? AND s.scope_id = ? "
    "AND s.resource_type IN ('user_md', 'memory_md')) "
    "AND v.revision <> (SELECT s.current_revision FROM resources AS s "
    "WHERE s.id = v.resource_id) "
)
_OWNER = "agent_id = ? AND owner_id = ?"
# The checkpoint resources of one owner: their scope ids start with the owner.
_OWNERS_CHECKPOINTS = (
    "SELECT id FROM resources WHERE agent_id = ? AND resource_type = 'checkpoint' "
    "AND substr(scope_id, 1, length(?)) = ?"
)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Scrubbed:
    """What one scrub after an erasure's commit managed: the WAL truncated (PostgreSQL: the
    erased tables vacuumed and the word indexes rebuilt), and the planner's statistics holding
    none of the erased values (SQLite: dropped in the erasure's own transaction)."""

    wal_truncated: bool
    statistics_rebuilt: bool


@dataclasses.dataclass(frozen=True, slots=True)
class OwnerErased:
    """What an owner's erasure removed: rows by table, the conversations and memory rows it
    touched (for the caches), and the prompt files (relative paths) to delete."""

    owner: OwnerKey
    counts: dict[str, int]
    conversations: tuple[ConversationKey, ...]
    memory_ids: tuple[int, ...]
    files: tuple[str, ...]


def purge_owner(connection: Transaction, owner: OwnerKey) -> OwnerErased:
    """Delete everything of one owner of one agent (in the caller's transaction), then optimize
    the word indexes."""
    pair = (owner.agent_id, owner.owner_id)
    conversations = tuple(
        ConversationKey(*row)
        for row in rows(
            connection,
            "SELECT agent_id, owner_id, channel, chat_id, thread_scope FROM conversations "
            f"WHERE {_OWNER}",
            pair,
        )
    )
    memory_ids = tuple(
        int(row[0]) for row in rows(connection, f"SELECT id FROM memories WHERE {_OWNER}", pair)
    )
    files = tuple(
        str(row[0])
        for row in rows(
            connection,
            "SELECT resource_path FROM resources WHERE agent_id = ? AND scope_id = ? "
            "AND resource_type IN ('user_md', 'memory_md') AND resource_path <> ''",
            pair,
        )
    )
    counts: dict[str, int] = {}

    def delete(table: str, sql: str, params: tuple[object, ...]) -> None:
        connection.execute(sql, params)
        counts[table] = counts.get(table, 0) + connection.changes()

    prefix = checkpoint_owner_prefix(owner.owner_id)
    checkpoints = (owner.agent_id, prefix, prefix)
    delete(
        "resource_revisions",
        f"DELETE FROM resource_revisions WHERE resource_id IN ({_OWNERS_CHECKPOINTS})",
        checkpoints,
    )
    delete("resources", f"DELETE FROM resources WHERE id IN ({_OWNERS_CHECKPOINTS})", checkpoints)
    delete(
        "resource_revisions",
        "DELETE FROM resource_revisions WHERE resource_id IN (SELECT id FROM resources "
        "WHERE agent_id = ? AND scope_id = ? AND resource_type IN ('user_md', 'memory_md'))",
        pair,
    )
    delete(
        "resources",
        "DELETE FROM resources WHERE agent_id = ? AND scope_id = ? "
        "AND resource_type IN ('user_md', 'memory_md')",
        pair,
    )
    # Their vectors would go with them (ON DELETE CASCADE); deleted first, the receipt counts them.
    delete(
        "memory_vectors",
        f"DELETE FROM memory_vectors WHERE memory_id IN (SELECT id FROM memories WHERE {_OWNER})",
        pair,
    )
    delete(
        "message_vectors",
        f"DELETE FROM message_vectors WHERE message_id IN (SELECT id FROM messages WHERE {_OWNER})",
        pair,
    )
    # They would go with their rows and runs (ON DELETE CASCADE); deleted first, counted.
    delete(
        "review_operations",
        "DELETE FROM review_operations WHERE memory_id IN "
        f"(SELECT id FROM memories WHERE {_OWNER})",
        pair,
    )
    delete("memories", f"DELETE FROM memories WHERE {_OWNER}", pair)
    delete("memory_sources", f"DELETE FROM memory_sources WHERE {_OWNER}", pair)
    delete("job_runs", f"DELETE FROM job_runs WHERE {_OWNER}", pair)
    delete("scheduled_jobs", f"DELETE FROM scheduled_jobs WHERE {_OWNER}", pair)
    delete("transcript_sessions", f"DELETE FROM transcript_sessions WHERE {_OWNER}", pair)
    delete(
        "model_calls",
        "DELETE FROM model_calls WHERE review_run_id IN "
        f"(SELECT id FROM review_runs WHERE {_OWNER})",
        pair,
    )
    # They would go with their runs (ON DELETE CASCADE); deleted first, the receipt counts them.
    delete(
        "review_exchanges",
        f"DELETE FROM review_exchanges WHERE run_id IN (SELECT id FROM review_runs WHERE {_OWNER})",
        pair,
    )
    delete("review_runs", f"DELETE FROM review_runs WHERE {_OWNER}", pair)
    delete("memory_review_state", f"DELETE FROM memory_review_state WHERE {_OWNER}", pair)
    delete("messages", f"DELETE FROM messages WHERE {_OWNER}", pair)
    delete("activity_hours", f"DELETE FROM activity_hours WHERE {_OWNER}", pair)
    delete("conversations", f"DELETE FROM conversations WHERE {_OWNER}", pair)
    optimize_indexes(connection)
    return OwnerErased(owner, counts, conversations, memory_ids, files)


def delete_checkpoints(connection: Transaction, key: ConversationKey) -> int:
    """The conversation's checkpoint resource with every revision (its summaries, rollbacks
    included); returns how many revisions went."""
    resource = checkpoint_resource(key)
    connection.execute(
        "DELETE FROM resource_revisions WHERE resource_id IN (SELECT id FROM resources "
        "WHERE agent_id = ? AND resource_type = 'checkpoint' AND scope_id = ?)",
        (resource.agent_id, resource.scope_id),
    )
    removed = connection.changes()
    connection.execute(
        "DELETE FROM resources WHERE agent_id = ? AND resource_type = 'checkpoint' "
        "AND scope_id = ?",
        (resource.agent_id, resource.scope_id),
    )
    return removed


def delete_rendering_revisions(
    connection: Transaction, owner: OwnerKey, memory_ids: list[int]
) -> int:
    """Revisions of the owner's prompt files that rendered any of `memory_ids` (erased rows), as
    each revision's provenance records (`rendered`), except each file's current revision (which
    the caller re-rendered without them). A revision written before memoryd recorded what it
    rendered is taken to quote them. Returns how many were removed."""
    engine = engine_of(connection)
    provenance = "v.provenance_json"
    rendered = (
        f"AND ({engine.json_kind(provenance, 'rendered')} IS DISTINCT FROM 'array' OR EXISTS "
        f"(SELECT 1 FROM {engine.json_values(provenance, 'r', 'rendered')} "
        f"WHERE r.value IN (SELECT e.value FROM {engine.json_values('?', 'e')})))"
    )
    connection.execute(
        _RENDERING_REVISIONS + rendered,
        (owner.agent_id, owner.owner_id, json.dumps(memory_ids)),
    )
    return connection.changes()


def optimize_indexes(connection: Transaction) -> None:
    """In an erasure's transaction, drop what the indexes and the planner's samples keep of the
    erased rows (memoryd.storage.engine.Engine.forget_erased)."""
    engine_of(connection).forget_erased(connection)


def truncate_wal(connection: Transaction) -> bool:
    """Checkpoint the WAL into the database and truncate it to nothing (outside any
    transaction), without waiting: `connection` should have no busy timeout, so a writer or a
    reader on an older snapshot makes it return False at once instead of holding the write lock
    while it waits (which would stall every writer). The caller tries again later."""
    try:
        busy, _log, _done = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()[0]
    except apsw.BusyError:
        return False
    return bool(busy == 0)


def record_pending(connection: Transaction, what: str, now: str) -> None:
    """Note, in the erasure's own transaction, that its text may be in the WAL until a
    truncation after it succeeds."""
    connection.execute("INSERT INTO pending_scrubs (erased_at, what) VALUES (?, ?)", (now, what))


def newest_pending(connection: Transaction) -> int:
    """The id of the newest erasure still waiting for a truncation (0: none)."""
    found = rows(connection, "SELECT coalesce(max(id), 0) FROM pending_scrubs")[0][0]
    return found if isinstance(found, int) else 0


def clear_pending(connection: Transaction, through: int) -> None:
    """The erasures up to `through` are scrubbed: a truncation after them succeeded."""
    connection.execute("DELETE FROM pending_scrubs WHERE id <= ?", (through,))


def pending(connection: Transaction) -> list[tuple[str, str]]:
    """(erased_at, what) of every erasure still waiting for a truncation, oldest first."""
    return [
        (str(row[0]), str(row[1]))
        for row in rows(connection, "SELECT erased_at, what FROM pending_scrubs ORDER BY id")
    ]
