-- 0008: realtime transcript sessions.
--
-- A session's committed seq: every utterance up to it has its final stored. It commits in the
-- same transaction as the finals, so a client that reconnects with the same session_id is told
-- exactly where to replay from. Written only when [memoryd.realtime] persist_transcripts is on.
CREATE TABLE transcript_sessions (
    agent_id      TEXT NOT NULL,
    owner_id      TEXT NOT NULL,
    device_id     TEXT NOT NULL,
    session_id    TEXT NOT NULL,
    committed_seq INTEGER NOT NULL DEFAULT 0,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    PRIMARY KEY (agent_id, owner_id, device_id, session_id)
) STRICT, WITHOUT ROWID;
