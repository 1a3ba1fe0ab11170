-- 0010: erasures whose erased text may still be in the WAL.
--
-- A purge deletes its rows and rewrites the word indexes in one transaction, then checkpoints
-- and truncates the WAL, so that the erased text is in neither database file. Readers on an
-- older snapshot (an open export) keep the old pages alive until they let go. A purge records
-- itself here in its own transaction; the row is deleted once the WAL has been truncated after
-- it (retried in the background, and at the next start). `memoryd check` reports what is left.
CREATE TABLE pending_scrubs (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    erased_at TEXT NOT NULL,
    -- What was erased: "an owner" or "a conversation"; never its identifiers, which the
    -- erasure removed everywhere else.
    what      TEXT NOT NULL
) STRICT;

-- log_names keys the hashes that stand for agent, owner and conversation ids in the log when
-- [memoryd.server] log_identifiers = "hashed" (memoryd.log_names): the same id always gives the
-- same name, so lines still correlate, and without the key the name cannot be traced back to
-- an id by trying likely ones.
INSERT INTO server_keys (name, value) VALUES ('log_names', randomblob(32));
