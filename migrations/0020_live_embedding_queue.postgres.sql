-- 0007 (SQLite's 0020): the embedder's live queue. A message waits when it is after the model's
-- cursor and has no vector of it made since its last reindex (the vectors up to
-- stale_through_seq were made before it, and serve searches until each is replaced). The
-- embedder sorts the messages that arrive (after arrived_through) by conversation: those of a
-- conversation that brought only a few at once are live, in embedding_live until embedded.
ALTER TABLE embedding_models ADD COLUMN stale_through_seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE embedding_models ADD COLUMN arrived_through BIGINT NOT NULL DEFAULT 0;

CREATE TABLE embedding_live (
    model_id   BIGINT NOT NULL REFERENCES embedding_models (id) ON DELETE CASCADE,
    message_id BIGINT NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    PRIMARY KEY (model_id, message_id)
);

CREATE INDEX embedding_live_by_message ON embedding_live (message_id);
