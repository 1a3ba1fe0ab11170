"""What the metrics read from the database at scrape time (memoryd.serving.levels):
backlogs and sizes, each an indexed count or a catalogue read, cheap enough for a scrape every
few seconds."""

from __future__ import annotations

import dataclasses

from memoryd.storage import vector_reads, vector_store
from memoryd.storage.engine import engine_of
from memoryd.storage.sql import one
from memoryd.storage.transaction import Transaction


@dataclasses.dataclass(frozen=True, slots=True)
class Levels:
    """How much waits, and how large the database is."""

    review_backlog: int
    pending_messages: int
    pending_memories: int
    # PostgreSQL's pg_database_size; None on SQLite, whose files are measured on disk.
    database_bytes: int | None


def levels(
    connection: Transaction, queue: tuple[bool, vector_store.EmbeddingModel | None]
) -> Levels:
    """The levels; `queue`: whether embeddings are on (nothing waits for a vector when off) and
    the current embedding model's row (None: none yet, everything waits)."""
    backlog = int(
        one(connection, "SELECT count(*) FROM memory_review_state WHERE pending_input = 1")[0]
    )
    pending_messages = pending_memories = 0
    embedding, model = queue
    if embedding:
        pending_messages = vector_reads.pending_messages(connection, model)
        pending_memories = vector_reads.pending_memories(
            connection, -1 if model is None else model.id
        )
    size = engine_of(connection).database_bytes(connection)
    return Levels(backlog, pending_messages, pending_memories, size)
