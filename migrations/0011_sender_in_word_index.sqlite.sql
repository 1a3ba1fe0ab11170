-- 0011: the sender joins the word index, so that a speaker's name finds their messages.
--
-- messages_fts gets a sender column between content and scope; searches weight it below the
-- content in bm25 (memoryd.storage.history_reads). The index is rebuilt from its source view,
-- and the triggers are made anew with the extra column.

DROP TRIGGER messages_after_insert;
DROP TRIGGER messages_after_delete;
DROP TRIGGER messages_after_update_content;
DROP TABLE messages_fts;
DROP VIEW messages_fts_source;

CREATE VIEW messages_fts_source AS
    SELECT m.id AS id, m.content AS content, m.sender AS sender, c.search_scope AS scope
    FROM messages AS m
    JOIN conversations AS c USING (agent_id, owner_id, channel, chat_id, thread_scope);

CREATE VIRTUAL TABLE messages_fts USING fts5(
    content, sender, scope,
    content = 'messages_fts_source', content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);

INSERT INTO messages_fts (messages_fts) VALUES ('rebuild');

CREATE TRIGGER messages_after_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (rowid, content, sender, scope)
        SELECT new.id, new.content, new.sender, c.search_scope FROM conversations AS c
        WHERE (c.agent_id, c.owner_id, c.channel, c.chat_id, c.thread_scope)
            = (new.agent_id, new.owner_id, new.channel, new.chat_id, new.thread_scope);
    INSERT INTO messages_trigram (rowid, content) VALUES (new.id, new.content);
END;

CREATE TRIGGER messages_after_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content, sender, scope)
        SELECT 'delete', old.id, old.content, old.sender, c.search_scope FROM conversations AS c
        WHERE (c.agent_id, c.owner_id, c.channel, c.chat_id, c.thread_scope)
            = (old.agent_id, old.owner_id, old.channel, old.chat_id, old.thread_scope);
    INSERT INTO messages_trigram (messages_trigram, rowid, content)
        VALUES ('delete', old.id, old.content);
END;

CREATE TRIGGER messages_after_update_content AFTER UPDATE OF content, sender ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content, sender, scope)
        SELECT 'delete', old.id, old.content, old.sender, c.search_scope FROM conversations AS c
        WHERE (c.agent_id, c.owner_id, c.channel, c.chat_id, c.thread_scope)
            = (old.agent_id, old.owner_id, old.channel, old.chat_id, old.thread_scope);
    INSERT INTO messages_trigram (messages_trigram, rowid, content)
        VALUES ('delete', old.id, old.content);
    INSERT INTO messages_fts (rowid, content, sender, scope)
        SELECT new.id, new.content, new.sender, c.search_scope FROM conversations AS c
        WHERE (c.agent_id, c.owner_id, c.channel, c.chat_id, c.thread_scope)
            = (new.agent_id, new.owner_id, new.channel, new.chat_id, new.thread_scope);
    INSERT INTO messages_trigram (rowid, content) VALUES (new.id, new.content);
END;
