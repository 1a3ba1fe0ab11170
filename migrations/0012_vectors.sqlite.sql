-- 0012: vectors for semantic search, made in the background.
--
-- Each vector belongs to one embedding model (provider, model name, dimension): searches compare
-- only vectors of the configured model, and a change of model re-embeds everything into a new
-- model row. Vectors are int8 (each component rounded to a multiple of `scale`, 1/127 of the
-- largest), 384 bytes for 384 dimensions; cosine similarity survives that to about 0.002.
--
-- Messages are embedded in id order from the model's cursor, as the reviewer reads (a message's
-- content never changes; if it ever did, the trigger below moves the cursor back). Memory rows
-- change, so a change drops the row's vectors and the embedder finds rows without one.
-- Deleting a message or a row deletes its vectors (ON DELETE CASCADE), so erasure erases them.

CREATE TABLE embedding_models (
    id             INTEGER PRIMARY KEY,
    provider       TEXT NOT NULL,
    model          TEXT NOT NULL,
    dimension      INTEGER NOT NULL CHECK (dimension > 0),
    -- Messages up to this id have been embedded (or skipped: empty content).
    message_cursor INTEGER NOT NULL DEFAULT 0,
    created_at     TEXT NOT NULL,
    UNIQUE (provider, model, dimension)
) STRICT;

CREATE TABLE message_vectors (
    -- AUTOINCREMENT: a search's cache of a scope loads only the vectors written after it.
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id INTEGER NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    model_id   INTEGER NOT NULL REFERENCES embedding_models (id) ON DELETE CASCADE,
    scale      REAL NOT NULL,
    vector     BLOB NOT NULL,
    UNIQUE (message_id, model_id)
) STRICT;

CREATE INDEX message_vectors_by_model ON message_vectors (model_id, seq);

CREATE TABLE memory_vectors (
    memory_id INTEGER NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    model_id  INTEGER NOT NULL REFERENCES embedding_models (id) ON DELETE CASCADE,
    scale     REAL NOT NULL,
    vector    BLOB NOT NULL,
    PRIMARY KEY (memory_id, model_id)
) STRICT, WITHOUT ROWID;

CREATE INDEX memory_vectors_by_model ON memory_vectors (model_id);

CREATE TRIGGER memories_vector_stale AFTER UPDATE OF category, key, value ON memories BEGIN
    DELETE FROM memory_vectors WHERE memory_id = new.id;
END;

CREATE TRIGGER messages_vector_stale AFTER UPDATE OF content, sender ON messages BEGIN
    DELETE FROM message_vectors WHERE message_id = new.id;
    UPDATE embedding_models SET message_cursor = min(message_cursor, new.id - 1);
END;
