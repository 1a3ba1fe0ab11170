-- 0014: working memory and description are per session (OpenHermit's session-local summary).
-- `/new` (ClearConversation) starts a fresh session with neither; the ending session's working
-- memory and description are kept here, one row per ended session, and never deleted except by
-- an explicit erasure of the conversation or its owner (ON DELETE CASCADE).

CREATE TABLE ended_sessions (
    id               INTEGER PRIMARY KEY,
    agent_id         TEXT NOT NULL,
    owner_id         TEXT NOT NULL,
    channel          TEXT NOT NULL,
    chat_id          TEXT NOT NULL,
    thread_scope     TEXT NOT NULL,
    -- The session's messages have ids after started_after_id, up to last_message_id.
    started_after_id INTEGER NOT NULL,
    last_message_id  INTEGER NOT NULL,
    working_memory   TEXT NOT NULL,
    -- The reviewer's description, or the fallback from the session's first user message.
    description      TEXT NOT NULL,
    ended_at         TEXT NOT NULL,
    FOREIGN KEY (agent_id, owner_id, channel, chat_id, thread_scope)
        REFERENCES conversations (agent_id, owner_id, channel, chat_id, thread_scope)
        ON DELETE CASCADE
) STRICT;

CREATE INDEX ended_sessions_by_conversation
    ON ended_sessions (agent_id, owner_id, channel, chat_id, thread_scope, id);
