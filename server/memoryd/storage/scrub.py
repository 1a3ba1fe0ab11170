"""Erasure that leaves nothing behind in the files: an owner's rows deleted from every table, the
word indexes rewritten without them, the WAL emptied.

Deleting a row is not enough for "nothing of it can be found": FTS5 records a deletion as a
marker and keeps the old terms in its segments until they are merged, and the WAL keeps old
page images until a checkpoint. So after an erasure every index is optimized (merged into one
segment without the deleted entries) in the same transaction, and once it has committed the WAL
is checkpointed and truncated. With secure_delete on (the default, [memoryd.storage]) SQLite
overwrites freed content with zeros, so the database file holds no copy either.
"""

from __future__ import annotations

import dataclasses
import time

import apsw

from memoryd.domain.conversation import ConversationKey, OwnerKey
from memoryd.storage.sql import rows

FTS_INDEXES = ("messages_fts", "messages_trigram", "memories_fts")
_OWNER = "agent_id = ? AND owner_id = ?"
# A checkpoint revision belongs to the owner whose message is its checkpoint.
_OWNERS_CHECKPOINT_REVISIONS = (
    "resource_id IN (SELECT id FROM resources WHERE agent_id = ? AND resource_type = 'checkpoint') "
    "AND CAST(json_extract(provenance_json, '$.checkpoint_id') AS INTEGER) IN "
    "(SELECT id FROM messages WHERE agent_id = ? AND owner_id = ?)"
)


@dataclasses.dataclass(frozen=True, slots=True)
class OwnerErased:
    """What an owner's erasure removed: rows by table, the conversations and memory rows it
    touched (for the caches), and the prompt files (relative paths) to delete."""

    owner: OwnerKey
    counts: dict[str, int]
    conversations: tuple[ConversationKey, ...]
    memory_ids: tuple[int, ...]
    files: tuple[str, ...]


def purge_owner(connection: apsw.Connection, owner: OwnerKey) -> OwnerErased:
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

    # Checkpoint summaries first: they are found through the owner's messages.
    delete(
        "resource_revisions",
        f"DELETE FROM resource_revisions WHERE {_OWNERS_CHECKPOINT_REVISIONS}",
        (owner.agent_id, *pair),
    )
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
    delete("resources", _EMPTIED_CHECKPOINTS, (owner.agent_id,))
    _recount_checkpoints(connection, owner.agent_id)
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
    delete("review_runs", f"DELETE FROM review_runs WHERE {_OWNER}", pair)
    delete("memory_review_state", f"DELETE FROM memory_review_state WHERE {_OWNER}", pair)
    delete("messages", f"DELETE FROM messages WHERE {_OWNER}", pair)
    delete("conversations", f"DELETE FROM conversations WHERE {_OWNER}", pair)
    optimize_indexes(connection)
    return OwnerErased(owner, counts, conversations, memory_ids, files)


_EMPTIED_CHECKPOINTS = (
    "DELETE FROM resources WHERE agent_id = ? AND resource_type = 'checkpoint' AND NOT EXISTS "
    "(SELECT 1 FROM resource_revisions AS v WHERE v.resource_id = resources.id)"
)


def _recount_checkpoints(connection: apsw.Connection, agent_id: str) -> None:
    """A shared checkpoint resource that lost revisions points at its newest remaining one."""
    connection.execute(
        "UPDATE resources SET current_revision = (SELECT max(revision) FROM resource_revisions "
        "AS v WHERE v.resource_id = resources.id) WHERE agent_id = ? "
        "AND resource_type = 'checkpoint' AND current_revision NOT IN "
        "(SELECT revision FROM resource_revisions AS v WHERE v.resource_id = resources.id)",
        (agent_id,),
    )


def delete_checkpoint_revisions(connection: apsw.Connection, key: ConversationKey) -> int:
    """The checkpoint summaries of one conversation (before its messages are deleted)."""
    connection.execute(
        "DELETE FROM resource_revisions WHERE resource_id IN (SELECT id FROM resources "
        "WHERE agent_id = ? AND resource_type = 'checkpoint' AND scope_id = ?) "
        "AND CAST(json_extract(provenance_json, '$.checkpoint_id') AS INTEGER) IN "
        "(SELECT id FROM messages WHERE agent_id = ? AND owner_id = ? AND channel = ? "
        "AND chat_id = ? AND thread_scope = ?)",
        (key.agent_id, key.scope_id, *key.as_row()),
    )
    removed = connection.changes()
    connection.execute(_EMPTIED_CHECKPOINTS, (key.agent_id,))
    _recount_checkpoints(connection, key.agent_id)
    return removed


def delete_quoting_revisions(
    connection: apsw.Connection, owner: OwnerKey, quoted: list[str]
) -> int:
    """Revisions of the owner's prompt files whose text quotes any of `quoted` (erased rows'
    values), except each file's current revision (already re-rendered without them). Returns
    how many were removed."""
    removed = 0
    for text in quoted:
        connection.execute(
            "DELETE FROM resource_revisions AS v WHERE v.resource_id IN (SELECT s.id FROM "
            "resources AS s WHERE s.agent_id = ? AND s.scope_id = ? "
            "AND s.resource_type IN ('user_md', 'memory_md')) "
            "AND instr(v.content, ?) > 0 AND v.revision <> (SELECT s.current_revision FROM "
            "resources AS s WHERE s.id = v.resource_id)",
            (owner.agent_id, owner.owner_id, text),
        )
        removed += connection.changes()
    return removed


def optimize_indexes(connection: apsw.Connection) -> None:
    """Merge every word index into one segment, dropping deleted entries from the file."""
    for index in FTS_INDEXES:
        connection.execute(f"INSERT INTO {index} ({index}) VALUES ('optimize')")


def truncate_wal(connection: apsw.Connection, attempts: int = 20) -> bool:
    """Checkpoint the WAL into the database and truncate it to nothing (outside any
    transaction). Readers can hold it up: tried a few times; False if it never completed."""
    for _ in range(attempts):
        busy, _log, _done = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()[0]
        if busy == 0:
            return True
        time.sleep(0.05)
    return False
