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

-- The triggers keep both indexes exact. FTS5 buffers new entries in memory and writes them as a
-- new segment whenever a savepoint or statement journal opens, so a writer that inserts
-- messages one statement per row writes one segment per message; memoryd inserts all the
-- messages of a write group with one INSERT ... SELECT (memoryd.storage.history_writes), which
-- writes one segment per group.
CREATE TRIGGER messages_after_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (rowid, content, scope)
        SELECT new.id, new.content, c.search_scope FROM conversations AS c
        WHERE (c.agent_id, c.owner_id, c.channel, c.chat_id, c.thread_scope)
            = (new.agent_id, new.owner_id, new.channel, new.chat_id, new.thread_scope);
    INSERT INTO messages_trigram (rowid, content) VALUES (new.id, new.content);
END;

CREATE TRIGGER messages_after_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content, scope)
        SELECT 'delete', old.id, old.content, c.search_scope FROM conversations AS c
        WHERE (c.agent_id, c.owner_id, c.channel, c.chat_id, c.thread_scope)
            = (old.agent_id, old.owner_id, old.channel, old.chat_id, old.thread_scope);
    INSERT INTO messages_trigram (messages_trigram, rowid, content)
        VALUES ('delete', old.id, old.content);
END;

CREATE TRIGGER messages_after_update_content AFTER UPDATE OF content ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content, scope)
        SELECT 'delete', old.id, old.content, c.search_scope FROM conversations AS c
        WHERE (c.agent_id, c.owner_id, c.channel, c.chat_id, c.thread_scope)
            = (old.agent_id, old.owner_id, old.channel, old.chat_id, old.thread_scope);
    INSERT INTO messages_trigram (messages_trigram, rowid, content)
        VALUES ('delete', old.id, old.content);
    INSERT INTO messages_fts (rowid, content, scope)
        SELECT new.id, new.content, c.search_scope FROM conversations AS c
        WHERE (c.agent_id, c.owner_id, c.channel, c.chat_id, c.thread_scope)
            = (new.agent_id, new.owner_id, new.channel, new.chat_id, new.thread_scope);
    INSERT INTO messages_trigram (rowid, content) VALUES (new.id, new.content);
END;
