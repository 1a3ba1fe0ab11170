"""Vectors of messages and memory rows (migration 0012): the embedder's queues, writes and reads.

The messages waiting are those after a cursor per model without a vector of it made since its
last reindex (stale_through_seq): every message up to the cursor has one. Two queues are read
from them (memoryd.domain.embedding_queue). The live queue: the messages the embedder found, on
their arrival, to come from a chat (embedding_live), taken first, out of order, the cursor
staying. The backlog: the rest, oldest first (a bulk load, an import, a reindex), the cursor
moving past what it embeds. The queue of memory rows is the rows without a vector of the
model (a change of a row drops its vectors). A write stores only vectors whose source is still
there and unchanged, so a row edited, or a message erased, while its vector was being computed
never gets a stale one.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Sequence
from typing import Any

from memoryd.domain.conversation import AgentKey, ConversationKey, HistoryScope, OwnerKey
from memoryd.domain.embedding_queue import ARRIVALS, live_arrivals
from memoryd.domain.memory_queries import Visible
from memoryd.domain.timestamps import to_text, utc_now
from memoryd.storage.memory_reads import visible_conditions
from memoryd.storage.sql import KEY_COLUMNS, KEY_MATCH, Row, one, postgres, rows
from memoryd.storage.transaction import Transaction

# The end of the previous message a message's vector is made with, in characters.
CONTEXT_CHARS = 300

# Rows of a scope's vectors read at a time.
LOAD_CHUNK = 8192
# The most messages without a vector a search counts (a bulk load's backlog can be large).
UNEMBEDDED_COUNT_LIMIT = 100_000
# An HNSW search's candidate list (pgvector's default: 40), and how many index entries a search
# with a scope reads at most before it answers with what it found.
HNSW_EF_SEARCH = 100
HNSW_SCAN_LIMIT = 20_000

# The vector of a message that still exists (parameters: model, scale, vector, message).
_VECTOR_OF_MESSAGE = (
    "INSERT INTO message_vectors (message_id, model_id, scale, vector) "
    "SELECT m.id, ?, ?, ? FROM messages AS m WHERE m.id = ? "
)
# SQLite's REPLACE deletes the old row and inserts a new one: a new seq (AUTOINCREMENT).
_STORE_MESSAGE_VECTOR = _VECTOR_OF_MESSAGE.replace("INSERT", "INSERT OR REPLACE", 1)
_STORE_MESSAGE_VECTOR_POSTGRES = (
    _VECTOR_OF_MESSAGE + "ON CONFLICT (message_id, model_id) DO UPDATE SET "
    "seq = nextval(pg_get_serial_sequence('message_vectors', 'seq')), "
    "scale = excluded.scale, vector = excluded.vector"
)
# The vector of a memory row whose key and value are still the ones embedded (parameters:
# model, scale, vector, row, key, value).
_VECTOR_OF_MEMORY = (
    "INSERT INTO memory_vectors (memory_id, model_id, scale, vector) "
    "SELECT r.id, ?, ?, ? FROM memories AS r WHERE r.id = ? AND r.key = ? AND r.value = ? "
)
_STORE_MEMORY_VECTOR = _VECTOR_OF_MEMORY.replace("INSERT", "INSERT OR REPLACE", 1)
_STORE_MEMORY_VECTOR_POSTGRES = (
    _VECTOR_OF_MEMORY + "ON CONFLICT (memory_id, model_id) DO UPDATE SET "
    "scale = excluded.scale, vector = excluded.vector"
)


@dataclasses.dataclass(frozen=True, slots=True)
class EmbeddingModel:
    """One model's row: its id, its message cursor, and the last vector made before its last
    reindex (those up to it wait to be made again)."""

    id: int
    provider: str
    model: str
    dimension: int
    message_cursor: int
    stale_through_seq: int = 0
    # The last message sorted into the live queue or the backlog.
    arrived_through: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class MessageText:
    """A message waiting for its vector, and the one before it in its conversation."""

    id: int
    sender: str
    content: str
    previous_sender: str | None
    previous_content: str | None


@dataclasses.dataclass(frozen=True, slots=True)
class MemoryText:
    """A memory row waiting for its vector, with the text the vector is made of."""

    id: int
    key: str
    value: str


@dataclasses.dataclass(frozen=True, slots=True)
class StoredVectors:
    """Vectors read back: (seq or id, message or row id, scale, int8 bytes) per vector."""

    rows: list[Row]


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


# --- the embedder's side (writer connection unless said otherwise) ----------------------------


def model_row(connection: Transaction, provider: str, model: str, dimension: int) -> EmbeddingModel:
    """The model's row, created on its first use (on PostgreSQL with the HNSW index of its
    message vectors, in the same transaction)."""
    connection.execute(
        "INSERT INTO embedding_models (provider, model, dimension, created_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (provider, model, dimension) DO NOTHING",
        (provider, model, dimension, to_text(utc_now())),
    )
    found = EmbeddingModel(
        *one(
            connection,
            f"SELECT {_MODEL_COLUMNS} FROM embedding_models "
            "WHERE provider = ? AND model = ? AND dimension = ?",
            (provider, model, dimension),
        )
    )
    if postgres(connection):
        # The model's id and dimension are integers of our own row: safe to spell out, and
        # spelled out they let the planner match a search to this partial index.
        connection.execute(
            f"CREATE INDEX IF NOT EXISTS {_index_name(found.id)} ON message_vectors "
            f"USING hnsw ({_embedding(found, 'message_vectors')} halfvec_cosine_ops) "
            f"WHERE model_id = {found.id}"
        )
    return found


def find_model(connection: Transaction, provider: str, model: str) -> EmbeddingModel | None:
    """The newest row of this provider's model (any dimension), or None before its first vector."""
    found = rows(
        connection,
        f"SELECT {_MODEL_COLUMNS} FROM embedding_models "
        "WHERE provider = ? AND model = ? ORDER BY id DESC LIMIT 1",
        (provider, model),
    )
    return EmbeddingModel(*found[0]) if found else None


_MODEL_COLUMNS = (
    "id, provider, model, dimension, message_cursor, stale_through_seq, arrived_through"
)
# A message waiting: after the cursor, without a vector of the model made since its last
# reindex (parameters: the cursor, the model, its stale_through_seq).
_WAITING = (
    "m.id > ? AND NOT EXISTS (SELECT 1 FROM message_vectors AS v "
    "WHERE v.message_id = m.id AND v.model_id = ? AND v.seq > ?)"
)


def waiting_messages(
    connection: Transaction, model: EmbeddingModel | None, limit: int
) -> list[MessageText]:
    """The backlog: messages waiting (module docstring) oldest first, each with the one before
    it (reader). `model` None: before its first vector, every message waits."""
    return _texts(
        connection,
        f"SELECT m.id FROM messages AS m WHERE {_WAITING} ORDER BY m.id LIMIT ?",
        (*_waiting_after(model), limit),
    )


def arrivals(
    connection: Transaction, model: EmbeddingModel | None, limit: int
) -> list[tuple[int, tuple[Any, ...]]]:
    """(id, conversation) of the messages not sorted into the queues yet, oldest first: after
    the model's arrived_through and its cursor (every message before its first vector)
    (reader)."""
    after = 0 if model is None else max(model.arrived_through, model.message_cursor)
    return [
        (int(row[0]), tuple(row[1:]))
        for row in rows(
            connection,
            f"SELECT m.id, {', '.join(f'm.{column}' for column in KEY_COLUMNS)} "
            "FROM messages AS m WHERE m.id > ? ORDER BY m.id LIMIT ?",
            (after, limit),
        )
    ]


def sort_arrivals(
    connection: Transaction, model_id: int, live: Sequence[int], through: int
) -> None:
    """Put the `live` of the arrivals up to `through` in the live queue; the rest stay in the
    backlog."""
    connection.executemany(
        "INSERT INTO embedding_live (model_id, message_id) SELECT ?, m.id FROM messages AS m "
        "WHERE m.id = ? ON CONFLICT (model_id, message_id) DO NOTHING",
        [(model_id, item) for item in live],
    )
    connection.execute(
        "UPDATE embedding_models SET arrived_through = max(arrived_through, ?) WHERE id = ?",
        (through, model_id),
    )


_LIVE = (
    "SELECT l.message_id FROM embedding_live AS l JOIN messages AS m ON m.id = l.message_id "
    f"WHERE l.model_id = ? AND {_WAITING}"
)


def messages_by_id(connection: Transaction, message_ids: Sequence[int]) -> list[MessageText]:
    """These messages, each with the one before it (reader)."""
    if not message_ids:
        return []
    return _texts(connection, ", ".join("?" * len(message_ids)), list(message_ids))


def live_messages(
    connection: Transaction, model: EmbeddingModel | None, limit: int
) -> list[MessageText]:
    """The live queue, oldest first, each with the one before it (reader)."""
    if model is None:
        return []
    return _texts(
        connection,
        f"{_LIVE} ORDER BY l.message_id LIMIT ?",
        (model.id, *_waiting_after(model), limit),
    )


def live_count(connection: Transaction, model: EmbeddingModel | None) -> int:
    """How many messages the live queue holds (reader). Before the model's first vector, the
    arrivals are sorted as the embedder sorts them, but not stored."""
    if model is None:
        return len(live_arrivals(arrivals(connection, None, ARRIVALS)))
    return int(
        one(
            connection,
            f"SELECT count(*) FROM ({_LIVE}) AS live",
            (model.id, *_waiting_after(model)),
        )[0]
    )


def _waiting_after(model: EmbeddingModel | None) -> tuple[int, int, int]:
    """_WAITING's parameters for `model` (None: no vector yet, every message waits)."""
    if model is None:
        return 0, -1, 0
    return model.message_cursor, model.id, model.stale_through_seq


def _texts(connection: Transaction, chosen: str, params: Sequence[Any]) -> list[MessageText]:
    """The messages whose ids `chosen` selects, each with the one before it, by id."""
    same = " AND ".join(f"p.{column} = m.{column}" for column in KEY_COLUMNS)
    previous = f"FROM messages AS p WHERE {same} AND p.id < m.id ORDER BY p.id DESC LIMIT 1"
    found = rows(
        connection,
        f"SELECT m.id, m.sender, m.content, (SELECT p.sender {previous}), "
        f"(SELECT substr(p.content, -{CONTEXT_CHARS}) {previous}) "
        f"FROM messages AS m WHERE m.id IN ({chosen}) ORDER BY m.id",
        params,
    )
    return [MessageText(int(row[0]), str(row[1]), str(row[2]), row[3], row[4]) for row in found]


def waiting_memories(connection: Transaction, model_id: int, limit: int) -> list[MemoryText]:
    """Memory rows without a vector of the model (reader)."""
    found = rows(
        connection,
        "SELECT r.id, r.key, r.value FROM memories AS r WHERE NOT EXISTS "
        "(SELECT 1 FROM memory_vectors AS v WHERE v.memory_id = r.id AND v.model_id = ?) "
        "ORDER BY r.id LIMIT ?",
        (model_id, limit),
    )
    return [MemoryText(int(row[0]), str(row[1]), str(row[2])) for row in found]


def store_message_vectors(
    connection: Transaction,
    model_id: int,
    vectors: Sequence[tuple[int, float, bytes]],
    cursor: int | None,
) -> int:
    """Store (message id, scale, int8 bytes) of messages that still exist; move the cursor to
    `cursor` (the backlog's: every message up to it has a vector now), or leave it (None: the
    live queue's, embedded out of order). A replaced vector gets a new seq, so that caches
    loading what is newer than theirs see it."""
    connection.executemany(
        _STORE_MESSAGE_VECTOR_POSTGRES if postgres(connection) else _STORE_MESSAGE_VECTOR,
        [(model_id, scale, blob, message_id) for message_id, scale, blob in vectors],
    )
    connection.executemany(
        "DELETE FROM embedding_live WHERE model_id = ? AND message_id = ?",
        [(model_id, message_id) for message_id, _, _ in vectors],
    )
    if cursor is not None:
        connection.execute(
            "UPDATE embedding_models SET message_cursor = max(message_cursor, ?) WHERE id = ?",
            (cursor, model_id),
        )
    return len(vectors)


def store_memory_vectors(
    connection: Transaction,
    model_id: int,
    vectors: Sequence[tuple[MemoryText, float, bytes]],
) -> int:
    """Store the vectors of rows whose key and value are still the ones embedded."""
    connection.executemany(
        _STORE_MEMORY_VECTOR_POSTGRES if postgres(connection) else _STORE_MEMORY_VECTOR,
        [(model_id, scale, blob, text.id, text.key, text.value) for text, scale, blob in vectors],
    )
    return len(vectors)


def restart(connection: Transaction, model_id: int) -> tuple[int, int]:
    """Queue everything again for the model: the message cursor back to 0 and every vector made
    so far stale (the old vectors serve searches until replaced), the rows' vectors dropped.
    Returns what is queued."""
    connection.execute(
        "UPDATE embedding_models SET message_cursor = 0, stale_through_seq = "
        "(SELECT coalesce(max(seq), 0) FROM message_vectors) WHERE id = ?",
        (model_id,),
    )
    connection.execute("DELETE FROM embedding_live WHERE model_id = ?", (model_id,))
    connection.execute("DELETE FROM memory_vectors WHERE model_id = ?", (model_id,))
    messages = one(connection, "SELECT count(*) FROM messages")[0]
    memories = one(connection, "SELECT count(*) FROM memories")[0]
    return int(messages), int(memories)


def pending_messages(connection: Transaction, model: EmbeddingModel | None) -> int:
    """Messages waiting for their vector (module docstring; reader)."""
    return int(
        one(
            connection,
            f"SELECT count(*) FROM messages AS m WHERE {_WAITING}",
            _waiting_after(model),
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
            connection, f"SELECT {_MODEL_COLUMNS} FROM embedding_models ORDER BY id DESC"
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


# --- searches (reader connections) ------------------------------------------------------------


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
            "CROSS JOIN messages AS m ON m.id = v.message_id "
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
    every one before its first vector (model_id None); UNEMBEDDED_COUNT_LIMIT at most. When few
    wait in all (in steady state none), they are walked by id, not the scope, which may hold a
    million; during a larger backlog the scope's own are counted."""
    condition, params = _scope_condition(scope)
    model = find_model_by_id(connection, model_id) if model_id is not None else None
    after = _waiting_after(model)
    waiting = (
        f"SELECT {', '.join(KEY_COLUMNS)} FROM messages AS m WHERE {_WAITING} ORDER BY m.id LIMIT ?"
    )
    walked, found = one(
        connection,
        f"SELECT count(*), coalesce(sum(CASE WHEN {condition} THEN 1 ELSE 0 END), 0) "
        f"FROM ({waiting}) AS m",
        (*params, *after, UNEMBEDDED_COUNT_LIMIT + 1),
    )
    if walked <= UNEMBEDDED_COUNT_LIMIT:
        return int(found)
    (count,) = one(
        connection,
        f"SELECT count(*) FROM (SELECT 1 FROM messages AS m WHERE {condition} "
        f"AND {_WAITING} LIMIT ?) AS scoped",
        (*params, *after, UNEMBEDDED_COUNT_LIMIT),
    )
    return int(count)


def find_model_by_id(connection: Transaction, model_id: int) -> EmbeddingModel | None:
    """A model's row by id."""
    found = rows(
        connection, f"SELECT {_MODEL_COLUMNS} FROM embedding_models WHERE id = ?", (model_id,)
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
    distance = f"{_embedding(model, 'v')} <=> CAST(? AS halfvec({model.dimension}))"
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


def _embedding(model: EmbeddingModel, table: str) -> str:
    """A model's message vectors as its HNSW index holds them (the dimension spelled out)."""
    return f"({table}.embedding::halfvec({model.dimension}))"


def _index_name(model_id: int) -> str:
    return f"message_vectors_nearest_{model_id}"


def _scope_condition(scope: HistoryScope) -> tuple[str, tuple[Any, ...]]:
    if isinstance(scope, ConversationKey):
        return KEY_MATCH, scope.as_row()
    if isinstance(scope, OwnerKey):
        return "m.agent_id = ? AND m.owner_id = ?", (scope.agent_id, scope.owner_id)
    if isinstance(scope, AgentKey):
        return "m.agent_id = ?", (scope.agent_id,)
    raise TypeError(f"not a history scope: {scope!r}")
