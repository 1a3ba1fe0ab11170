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
from collections.abc import Sequence
from typing import Any

from memoryd.domain.embedding_queue import ARRIVALS, LIVE_BACKLOG
from memoryd.domain.timestamps import to_text, utc_now
from memoryd.storage.engine import engine_of
from memoryd.storage.sql import KEY_COLUMNS, Row, one, rows
from memoryd.storage.transaction import Transaction

# The end of the previous message a message's vector is made with, in characters.
CONTEXT_CHARS = 300

# Rows of a scope's vectors read at a time.
LOAD_CHUNK = 8192

# The vector of a message that still exists (parameters: model, scale, vector, message).
_VECTOR_OF_MESSAGE = "SELECT m.id, ?, ?, ? FROM messages AS m WHERE m.id = ?"
# The vector of a memory row whose key and value are still the ones embedded (parameters:
# model, scale, vector, row, key, value).
_VECTOR_OF_MEMORY = (
    "SELECT r.id, ?, ?, ? FROM memories AS r WHERE r.id = ? AND r.key = ? AND r.value = ?"
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
            f"SELECT {MODEL_COLUMNS} FROM embedding_models "
            "WHERE provider = ? AND model = ? AND dimension = ?",
            (provider, model, dimension),
        )
    )
    engine_of(connection).index_vectors(connection, found)
    return found


def find_model(connection: Transaction, provider: str, model: str) -> EmbeddingModel | None:
    """The newest row of this provider's model (any dimension), or None before its first vector."""
    found = rows(
        connection,
        f"SELECT {MODEL_COLUMNS} FROM embedding_models "
        "WHERE provider = ? AND model = ? ORDER BY id DESC LIMIT 1",
        (provider, model),
    )
    return EmbeddingModel(*found[0]) if found else None


MODEL_COLUMNS = "id, provider, model, dimension, message_cursor, stale_through_seq, arrived_through"
# A message waiting: after the cursor, without a vector of the model made since its last
# reindex (parameters: the cursor, the model, its stale_through_seq).
WAITING = (
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
        f"SELECT m.id FROM messages AS m WHERE {WAITING} ORDER BY m.id LIMIT ?",
        (*waiting_after(model), limit),
    )


def _arrived(after: int, limit: int, *, conversations: bool = False) -> tuple[str, tuple[int, int]]:
    """The next `limit` messages after `after`, oldest first: a SELECT of their ids (and with
    `conversations`, their conversations' keys), and its parameters."""
    keys = "".join(f", m.{column}" for column in KEY_COLUMNS) if conversations else ""
    return (
        f"SELECT m.id{keys} FROM messages AS m WHERE m.id > ? ORDER BY m.id LIMIT ?",
        (after, limit),
    )


def _live_of(after: int, limit: int) -> tuple[str, tuple[int, ...]]:
    """Of the next `limit` arrivals after `after`, the ids of the live ones (a conversation that
    brought at most LIVE_BACKLOG of them: memoryd.domain.embedding_queue), oldest first: a
    SELECT and its parameters. The counting is the database's: a step over a bulk load's
    10,000 arrivals holds no Python lock for it."""
    arrived, params = _arrived(after, limit, conversations=True)
    keys = ", ".join(KEY_COLUMNS)
    of_each = ", ".join(f"a.{column}" for column in KEY_COLUMNS)
    sql = (
        f"WITH arrived AS ({arrived}) SELECT a.id FROM arrived AS a WHERE ({of_each}) IN "
        f"(SELECT {keys} FROM arrived GROUP BY {keys} HAVING count(*) <= ?) ORDER BY a.id"
    )
    return sql, (*params, LIVE_BACKLOG)


def arrived_after(model: EmbeddingModel | None) -> int:
    """Where the messages not sorted into the queues yet begin: after the model's
    arrived_through and its cursor (every message, before the model's first vector)."""
    return 0 if model is None else max(model.arrived_through, model.message_cursor)


def arrivals_count(connection: Transaction, model: EmbeddingModel | None) -> int:
    """How many messages wait to be sorted into the queues, up to ARRIVALS (reader)."""
    arrived, params = _arrived(arrived_after(model), ARRIVALS)
    return int(one(connection, f"SELECT count(*) FROM ({arrived}) AS arrived", params)[0])


def live_arrivals(connection: Transaction, model: EmbeddingModel | None) -> list[int]:
    """The ids of the live ones of the next ARRIVALS arrivals, oldest first (reader): before the
    model's first vector they are not stored, and each step sorts them again."""
    sql, params = _live_of(arrived_after(model), ARRIVALS)
    return [int(row[0]) for row in rows(connection, sql, params)]


def sort_arrivals(connection: Transaction, model: EmbeddingModel) -> int | None:
    """Sort the next ARRIVALS arrivals after those `model` had sorted: the live ones into the
    live queue, the rest left in the backlog; the model's arrived_through moved past them. The
    last id sorted (None: nothing had arrived)."""
    after = arrived_after(model)
    arrived, params = _arrived(after, ARRIVALS)
    through = one(connection, f"SELECT max(id) FROM ({arrived}) AS arrived", params)[0]
    if through is None:
        return None
    live, live_params = _live_of(after, ARRIVALS)
    connection.execute(
        f"INSERT INTO embedding_live (model_id, message_id) SELECT ?, live.id FROM ({live}) "
        # WHERE: SQLite would read the ON of the upsert as the join's.
        "AS live WHERE true ON CONFLICT (model_id, message_id) DO NOTHING",
        (model.id, *live_params),
    )
    connection.execute(
        "UPDATE embedding_models SET arrived_through = "
        f"{engine_of(connection).greatest('arrived_through', '?')} WHERE id = ?",
        (int(through), model.id),
    )
    return int(through)


_LIVE = (
    "SELECT l.message_id FROM embedding_live AS l JOIN messages AS m ON m.id = l.message_id "
    f"WHERE l.model_id = ? AND {WAITING}"
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
        (model.id, *waiting_after(model), limit),
    )


def live_count(connection: Transaction, model: EmbeddingModel | None) -> int:
    """How many messages the live queue holds (reader). Before the model's first vector, the
    arrivals are sorted as the embedder sorts them, but not stored."""
    if model is None:
        return len(live_arrivals(connection, None))
    return int(
        one(
            connection,
            f"SELECT count(*) FROM ({_LIVE}) AS live",
            (model.id, *waiting_after(model)),
        )[0]
    )


def waiting_after(model: EmbeddingModel | None) -> tuple[int, int, int]:
    """WAITING's parameters for `model` (None: no vector yet, every message waits)."""
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
        engine_of(connection).replace_vector(
            "message_vectors", "message_id, model_id, scale, vector", _VECTOR_OF_MESSAGE
        ),
        [(model_id, scale, blob, message_id) for message_id, scale, blob in vectors],
    )
    connection.executemany(
        "DELETE FROM embedding_live WHERE model_id = ? AND message_id = ?",
        [(model_id, message_id) for message_id, _, _ in vectors],
    )
    if cursor is not None:
        connection.execute(
            "UPDATE embedding_models SET message_cursor = "
            f"{engine_of(connection).greatest('message_cursor', '?')} WHERE id = ?",
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
        engine_of(connection).replace_vector(
            "memory_vectors", "memory_id, model_id, scale, vector", _VECTOR_OF_MEMORY
        ),
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


# --- searches (reader connections) ------------------------------------------------------------


def embedding_expression(model: EmbeddingModel, table: str) -> str:
    """A model's message vectors as its HNSW index holds them (the dimension spelled out)."""
    return f"({table}.embedding::halfvec({model.dimension}))"


def index_name(model_id: int) -> str:
    return f"message_vectors_nearest_{model_id}"
