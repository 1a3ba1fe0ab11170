-- One compaction of a conversation at a time, across every process that shares the database
-- (a supervisor's workers): a compaction claims its conversation here first, and gives the
-- claim back when it ends. A claim older than the compaction's longest run is a dead process's,
-- and is taken over. Erasing the conversation erases its claim.
CREATE TABLE compaction_claims (
    agent_id     TEXT NOT NULL,
    owner_id     TEXT NOT NULL,
    channel      TEXT NOT NULL,
    chat_id      TEXT NOT NULL,
    thread_scope TEXT NOT NULL,
    token        TEXT NOT NULL,
    claimed_at   TEXT NOT NULL,
    PRIMARY KEY (agent_id, owner_id, channel, chat_id, thread_scope),
    FOREIGN KEY (agent_id, owner_id, channel, chat_id, thread_scope)
        REFERENCES conversations (agent_id, owner_id, channel, chat_id, thread_scope)
        ON DELETE CASCADE
) STRICT;
