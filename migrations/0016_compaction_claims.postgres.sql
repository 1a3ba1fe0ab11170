-- One compaction of a conversation at a time, across every process that shares the database
-- (workers, replicas): a compaction claims its conversation here first, and gives the claim
-- back when it ends. A claim older than the compaction's longest run is a dead process's, and
-- is taken over. Erasing the conversation erases its claim.
CREATE TABLE compaction_claims (
    agent_id     TEXT COLLATE "C" NOT NULL,
    owner_id     TEXT COLLATE "C" NOT NULL,
    channel      TEXT COLLATE "C" NOT NULL,
    chat_id      TEXT COLLATE "C" NOT NULL,
    thread_scope TEXT COLLATE "C" NOT NULL,
    token        TEXT COLLATE "C" NOT NULL,
    claimed_at   TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (agent_id, owner_id, channel, chat_id, thread_scope),
    FOREIGN KEY (agent_id, owner_id, channel, chat_id, thread_scope)
        REFERENCES conversations (agent_id, owner_id, channel, chat_id, thread_scope)
        ON DELETE CASCADE
);
