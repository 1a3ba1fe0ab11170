-- 0020: the embedder's live queue (memoryd.storage.vector_store). Messages of chats written at
-- a chat's pace are embedded before a bulk load's backlog, out of order, so "after the cursor"
-- alone no longer says a message waits: one waits when it is after the cursor and has no vector
-- of the model made since the model's last reindex (a reindex keeps the old vectors serving
-- searches until each is replaced: those up to stale_through_seq are the old ones).
--
-- The embedder sorts the messages that arrive (after arrived_through) by conversation: those of
-- a conversation that brought only a few at once are live, and wait in embedding_live until
-- their vector is made; the rest is the backlog, embedded oldest first with what is left.
ALTER TABLE embedding_models ADD COLUMN stale_through_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE embedding_models ADD COLUMN arrived_through INTEGER NOT NULL DEFAULT 0;

CREATE TABLE embedding_live (
    model_id   INTEGER NOT NULL REFERENCES embedding_models (id) ON DELETE CASCADE,
    message_id INTEGER NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    PRIMARY KEY (model_id, message_id)
) STRICT, WITHOUT ROWID;

CREATE INDEX embedding_live_by_message ON embedding_live (message_id);
