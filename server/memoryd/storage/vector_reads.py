"""What is read of the vectors: a search's candidates (a scope's vectors, the index's nearest),
what a scope has not embedded yet, and the counts and progress GetEmbeddingStatus reports. The
embedder's queues and writes are memoryd.storage.vector_store."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Sequence
from typing import Any

from memoryd.domain.conversation import AgentKey, ConversationKey, HistoryScope, OwnerKey
from memoryd.domain.memory_queries import Visible
from memoryd.storage.engine import engine_of
from memoryd.storage.memory_reads import visible_conditions
from memoryd.storage.sql import KEY_COLUMNS, KEY_MATCH, Row, one, rows
from memoryd.storage.transaction import Transaction
from memoryd.storage.vector_store import (
    LOAD_CHUNK,
    MODEL_COLUMNS,
    WAITING,
    EmbeddingModel,
    StoredVectors,
    embedding_expression,
    live_count,
    waiting_after,
)

# The most messages without a vector a search counts (a bulk load's backlog can be large).
UNEMBEDDED_COUNT_LIMIT = 100_000
# Up to this many messages waiting in all, a search counts its scope's among them; beyond, it
# counts its scope's own. Walking a backlog of 100,000 by id cost every history search about
# 40 ms while a million bulk-loaded messages waited (bench/recall_latency.py).
UNEMBEDDED_WALK_LIMIT = 1_000
# An HNSW search's candidate list (pgvector's default: 40), and how many index entries a search
# with a scope reads at most before it answers with what it found.
HNSW_EF_SEARCH = 100
HNSW_SCAN_LIMIT = 20_000


@dataclasses.dataclass(frozen=True, slots=True)
class VectorCounts:
    """What GetEmbeddingStatus reports of the database."""

    embedded_messages: int
    embedded_memories: int
    pending_messages: int
    pending_memories: int
    other_model_vectors: int
    # Of the pending messages, those of the live queue (module docstring).
    live_messages: int = 0


def pending_messages(connection: Transaction, model: EmbeddingModel | None) -> int:
    """Messages waiting for their vector (module docstring; reader)."""
    return int(
        one(
            connection,
            f"SELECT count(*) FROM messages AS m WHERE {WAITING}",
            waiting_after(model),
        )[0]
    )


def pending_memories(connection: Transaction, model_id: int) -> int:
    """Memory rows without a vector of the model (reader)."""
    return int(
        one(
            connection,
            "SELECT count(*) FROM memories AS r WHERE NOT EXISTS (SELECT 1 FROM "
            "memory_vectors AS v WHERE v.memory_id = r.id AND v.model_id = ?)",
            (model_id,),
        )[0]
    )


def counts(connection: Transaction, found: EmbeddingModel | None) -> VectorCounts:
    """Embedded and waiting messages and rows of the model (reader; None: no vector yet)."""
    model = -1 if found is None else found.id
    return VectorCounts(
        embedded_messages=int(
            one(connection, "SELECT count(*) FROM message_vectors WHERE model_id = ?", (model,))[0]
        ),
        embedded_memories=int(
            one(connection, "SELECT count(*) FROM memory_vectors WHERE model_id = ?", (model,))[0]
        ),
        pending_messages=pending_messages(connection, found),
        live_messages=live_count(connection, found),
        pending_memories=pending_memories(connection, model),
        other_model_vectors=int(
            one(
                connection,
                "SELECT (SELECT count(*) FROM message_vectors WHERE model_id != ?) + "
                "(SELECT count(*) FROM memory_vectors WHERE model_id != ?)",
                (model, model),
            )[0]
        ),
    )


def model_progress(
    connection: Transaction,
) -> list[tuple[str, str, int, VectorCounts]]:
    """(provider, model, dimension, counts) of every model row, newest first (memoryd check)."""
    found = [
        EmbeddingModel(*row)
        for row in rows(
            connection, f"SELECT {MODEL_COLUMNS} FROM embedding_models ORDER BY id DESC"
        )
    ]
    return [
        (model.provider, model.model, model.dimension, counts(connection, model)) for model in found
    ]


def orphaned_vectors(connection: Transaction) -> int:
    """Vectors whose message or memory row is gone (foreign keys make this 0)."""
    (count,) = one(
        connection,
        "SELECT (SELECT count(*) FROM message_vectors AS v WHERE NOT EXISTS "
        "(SELECT 1 FROM messages AS m WHERE m.id = v.message_id)) + "
        "(SELECT count(*) FROM memory_vectors AS v WHERE NOT EXISTS "
        "(SELECT 1 FROM memories AS r WHERE r.id = v.memory_id))",
    )
    return int(count)


def scope_vectors(
    connection: Transaction, scope: HistoryScope, model_id: int, after_seq: int
) -> Iterator[list[Row]]:
    """(seq, message id, scale, vector) of the scope's messages written after `after_seq`, in
    chunks of LOAD_CHUNK rows (a large scope is never all in Python objects at once). The first
    load walks the scope's messages; a later one walks only the vectors written since (CROSS
    JOIN keeps that order), which are few."""
    condition, params = _scope_condition(scope)
    if after_seq == 0:
        sql = (
            "SELECT v.seq, v.message_id, v.scale, v.vector FROM messages AS m "
            "JOIN message_vectors AS v ON v.message_id = m.id AND v.model_id = ? "
            f"WHERE {condition} ORDER BY v.seq"
        )
        cursor = connection.execute(sql, (model_id, *params))
    else:
        sql = (
            "SELECT v.seq, v.message_id, v.scale, v.vector FROM message_vectors AS v "
            f"{engine_of(connection).join_in_order} messages AS m ON m.id = v.message_id "
            f"WHERE v.model_id = ? AND v.seq > ? AND {condition} ORDER BY v.seq"
        )
        cursor = connection.execute(sql, (model_id, after_seq, *params))
    while chunk := list(itertools.islice(cursor, LOAD_CHUNK)):
        yield chunk


def scope_vector_count(
    connection: Transaction, scope: HistoryScope, model_id: int, stop_at: int
) -> int:
    """How many of the scope's messages have a vector of the model, counting up to `stop_at`."""
    condition, params = _scope_condition(scope)
    (count,) = one(
        connection,
        "SELECT count(*) FROM (SELECT 1 FROM messages AS m JOIN message_vectors AS v "
        f"ON v.message_id = m.id AND v.model_id = ? WHERE {condition} LIMIT ?)",
        (model_id, *params, stop_at),
    )
    return int(count)


def unembedded_messages(connection: Transaction, scope: HistoryScope, model_id: int | None) -> int:
    """How many of the scope's messages have no vector of the model yet (module docstring), or
    every one before its first vector (model_id None); UNEMBEDDED_COUNT_LIMIT at most. When at
    most UNEMBEDDED_WALK_LIMIT wait in all (in steady state none), they are walked by id, not
    the scope, which may hold a million; during a larger backlog the scope's own are counted."""
    condition, params = _scope_condition(scope)
    model = find_model_by_id(connection, model_id) if model_id is not None else None
    after = waiting_after(model)
    waiting = (
        f"SELECT {', '.join(KEY_COLUMNS)} FROM messages AS m WHERE {WAITING} ORDER BY m.id LIMIT ?"
    )
    walked, found = one(
        connection,
        f"SELECT count(*), coalesce(sum(CASE WHEN {condition} THEN 1 ELSE 0 END), 0) "
        f"FROM ({waiting}) AS m",
        (*params, *after, UNEMBEDDED_WALK_LIMIT + 1),
    )
    if walked <= UNEMBEDDED_WALK_LIMIT:
        return int(found)
    (count,) = one(
        connection,
        f"SELECT count(*) FROM (SELECT 1 FROM messages AS m WHERE {condition} "
        f"AND {WAITING} LIMIT ?) AS scoped",
        (*params, *after, UNEMBEDDED_COUNT_LIMIT),
    )
    return int(count)


def find_model_by_id(connection: Transaction, model_id: int) -> EmbeddingModel | None:
    """A model's row by id."""
    found = rows(
        connection, f"SELECT {MODEL_COLUMNS} FROM embedding_models WHERE id = ?", (model_id,)
    )
    return EmbeddingModel(*found[0]) if found else None


def unembedded_memories(connection: Transaction, visible: Visible, model_id: int | None) -> int:
    """How many rows the caller may see have no vector of the model yet."""
    conditions, params = visible_conditions(visible)
    (count,) = one(
        connection,
        "SELECT count(*) FROM memories AS r WHERE r.agent_id = ? AND r.owner_id = ? "
        f"{conditions} AND NOT EXISTS (SELECT 1 FROM memory_vectors AS v "
        "WHERE v.memory_id = r.id AND v.model_id = ?)",
        (
            visible.owner.agent_id,
            visible.owner.owner_id,
            *params,
            -1 if model_id is None else model_id,
        ),
    )
    return int(count)


def message_vectors(
    connection: Transaction, model_id: int, message_ids: Sequence[int]
) -> list[Row]:
    """(seq, message id, scale, vector) of these messages' vectors of the model (those that
    have one)."""
    if not message_ids:
        return []
    marks = ", ".join("?" * len(message_ids))
    return rows(
        connection,
        "SELECT v.seq, v.message_id, v.scale, v.vector FROM message_vectors AS v "
        f"WHERE v.model_id = ? AND v.message_id IN ({marks})",
        (model_id, *message_ids),
    )


def newest_seq(connection: Transaction) -> int:
    """The seq of the newest message vector (0 when none)."""
    return int(one(connection, "SELECT coalesce(max(seq), 0) FROM message_vectors")[0])


def visible_memory_vectors(
    connection: Transaction, visible: Visible, model_id: int
) -> StoredVectors:
    """(row id, row id, scale, vector) of every row the caller may see."""
    conditions, params = visible_conditions(visible)
    found = rows(
        connection,
        "SELECT r.id, r.id, v.scale, v.vector FROM memories AS r "
        "JOIN memory_vectors AS v ON v.memory_id = r.id AND v.model_id = ? "
        f"WHERE r.agent_id = ? AND r.owner_id = ? {conditions}",
        (model_id, visible.owner.agent_id, visible.owner.owner_id, *params),
    )
    return StoredVectors(found)


def indexed_nearest(
    connection: Transaction,
    model: EmbeddingModel,
    scope: HistoryScope,
    query: Sequence[float],
    depth: int,
) -> list[tuple[int, float]]:
    """(message id, cosine similarity) of about the `depth` nearest of the scope's messages,
    best first, through the model's HNSW index (PostgreSQL only): approximate, for a scope too
    large to compare in memory. The index is walked on until `depth` rows of the scope are
    found or HNSW_SCAN_LIMIT index entries were read (pgvector's iterative scan)."""
    condition, params = _scope_condition(scope)
    connection.execute(
        "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
        "set_config('hnsw.ef_search', ?, true), set_config('hnsw.max_scan_tuples', ?, true)",
        (str(min(max(depth, HNSW_EF_SEARCH), 1000)), str(HNSW_SCAN_LIMIT)),
    )
    distance = f"{embedding_expression(model, 'v')} <=> CAST(? AS halfvec({model.dimension}))"
    text = "[" + ",".join(f"{value:.7g}" for value in query) + "]"
    found = rows(
        connection,
        f"SELECT v.message_id, 1 - ({distance}) FROM message_vectors AS v "
        "JOIN messages AS m ON m.id = v.message_id "
        f"WHERE v.model_id = {model.id} AND {condition} ORDER BY {distance} LIMIT ?",
        (text, *params, text, depth),
    )
    # Relaxed order: the index's walk may return a few out of order.
    ranked = [(int(row[0]), float(row[1])) for row in found]
    return sorted(ranked, key=lambda hit: (-hit[1], -hit[0]))


def _scope_condition(scope: HistoryScope) -> tuple[str, tuple[Any, ...]]:
    if isinstance(scope, ConversationKey):
        return KEY_MATCH, scope.as_row()
    if isinstance(scope, OwnerKey):
        return "m.agent_id = ? AND m.owner_id = ?", (scope.agent_id, scope.owner_id)
    if isinstance(scope, AgentKey):
        return "m.agent_id = ?", (scope.agent_id,)
    raise TypeError(f"not a history scope: {scope!r}")
