-- 0001: conversation history.
--
-- Messages follow the reference schema (agent_id, owner_id, channel, chat_id, thread_scope,
-- sender, role, kind, content, metadata_json, created_at), plus trust and the client's
-- idempotency key. Windows (/new, compaction) live on the conversation row: messages are never
-- renumbered or deleted except by an explicit purge.

-- Global counters. history_version grows on every change of any conversation's window, so a
-- version is never reused, even after a conversation is purged and written again.
CREATE TABLE counters (
    name  TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

INSERT INTO counters (name, value) VALUES ('history_version', 0);

CREATE TABLE conversations (
    id                INTEGER PRIMARY KEY,
    agent_id          TEXT NOT NULL,
    owner_id          TEXT NOT NULL,
    channel           TEXT NOT NULL,
    chat_id           TEXT NOT NULL,
    thread_scope      TEXT NOT NULL,
    -- Messages with a higher id are in the current window; 0 = the window was never moved.
    window_start_id   INTEGER NOT NULL DEFAULT 0,
    window_started_at TEXT,
    history_version   INTEGER NOT NULL,
    -- The words tagging this conversation's messages in messages_fts (conversation, owner and
    -- agent tokens), so that scoped searches are narrowed by the index itself.
    search_scope      TEXT NOT NULL,
    created_at        TEXT NOT NULL,
    UNIQUE (agent_id, owner_id, channel, chat_id, thread_scope)
) STRICT;

CREATE TABLE messages (
    -- AUTOINCREMENT: an id is never reused, even after the newest rows are purged.
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_id          TEXT NOT NULL,
    owner_id          TEXT NOT NULL,
    channel           TEXT NOT NULL,
    chat_id           TEXT NOT NULL,
    thread_scope      TEXT NOT NULL,
    sender            TEXT NOT NULL,
    role              TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'tool')),
    kind              TEXT NOT NULL,
    content           TEXT NOT NULL,
    metadata_json     TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata_json)),
    trust             TEXT NOT NULL CHECK (trust IN ('operator', 'guest')),
    client_message_id TEXT,
    created_at        TEXT NOT NULL,
    FOREIGN KEY (agent_id, owner_id, channel, chat_id, thread_scope)
        REFERENCES conversations (agent_id, owner_id, channel, chat_id, thread_scope)
) STRICT;

-- The reference index is (agent_id, channel, chat_id, thread_scope, created_at, id). memoryd
-- keys conversations by owner too, and orders windows by id (commit order): a client may give an
-- older created_at than the previous message (imports, late voice segments).
CREATE INDEX messages_by_conversation
    ON messages (agent_id, owner_id, channel, chat_id, thread_scope, id);

CREATE UNIQUE INDEX messages_by_client_id
    ON messages (agent_id, owner_id, channel, chat_id, thread_scope, client_message_id)
    WHERE client_message_id IS NOT NULL;

-- Word index: porter-stemmed words of the content, and the conversation's scope tokens in a
-- second column (searches weight it 0 in bm25). External content comes from this view.
CREATE VIEW messages_fts_source AS
    SELECT m.id AS id, m.content AS content, c.search_scope AS scope
    FROM messages AS m
    JOIN conversations AS c USING (agent_id, owner_id, channel, chat_id, thread_scope);

CREATE VIRTUAL TABLE messages_fts USING fts5(
    content, scope,
    content = 'messages_fts_source', content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);

-- Substring index: trigrams of the content, answering LIKE '%piece%' for partial words and text
-- without word breaks. detail=none: LIKE needs no positions, and it keeps the index small.
CREATE VIRTUAL TABLE messages_trigram USING fts5(
    content,
    content = 'messages', content_rowid = 'id',
    tokenize = 'trigram case_sensitive 0', detail = 'none'
);

-- New messages are indexed in bulk. The insert trigger only queues the id; the writer indexes the
-- whole queue with one statement per index just before each commit (see
-- memoryd.storage.history_store.index_queued_messages). FTS5 flushes its pending terms to a new
-- segment at every savepoint and statement journal, so indexing row by row in the trigger
-- wrote one segment per message; this writes one per group commit. Queue and indexes change in
-- the same transaction, so no committed message is ever missing from the indexes. Rows still
-- queued are not in the indexes, so the delete and update triggers only unindex rows that are
-- not queued.
CREATE TABLE messages_index_queue (
    message_id INTEGER PRIMARY KEY
) STRICT;

CREATE TRIGGER messages_after_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_index_queue (message_id) VALUES (new.id);
END;

CREATE TRIGGER messages_after_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content, scope)
        SELECT 'delete', old.id, old.content, c.search_scope FROM conversations AS c
        WHERE (c.agent_id, c.owner_id, c.channel, c.chat_id, c.thread_scope)
            = (old.agent_id, old.owner_id, old.channel, old.chat_id, old.thread_scope)
        AND NOT EXISTS (SELECT 1 FROM messages_index_queue WHERE message_id = old.id);
    INSERT INTO messages_trigram (messages_trigram, rowid, content)
        SELECT 'delete', old.id, old.content
        WHERE NOT EXISTS (SELECT 1 FROM messages_index_queue WHERE message_id = old.id);
    DELETE FROM messages_index_queue WHERE message_id = old.id;
END;

CREATE TRIGGER messages_after_update_content AFTER UPDATE OF content ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content, scope)
        SELECT 'delete', old.id, old.content, c.search_scope FROM conversations AS c
        WHERE (c.agent_id, c.owner_id, c.channel, c.chat_id, c.thread_scope)
            = (old.agent_id, old.owner_id, old.channel, old.chat_id, old.thread_scope)
        AND NOT EXISTS (SELECT 1 FROM messages_index_queue WHERE message_id = old.id);
    INSERT INTO messages_trigram (messages_trigram, rowid, content)
        SELECT 'delete', old.id, old.content
        WHERE NOT EXISTS (SELECT 1 FROM messages_index_queue WHERE message_id = old.id);
    INSERT OR IGNORE INTO messages_index_queue (message_id) VALUES (new.id);
END;
