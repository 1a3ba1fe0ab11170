-- 0003: the background reviewer.
--
-- A turn commit records the provider-reported prompt size of the turn on the conversation and
-- marks its review state as having new input; the scheduler reviews due conversations and keeps
-- its cursor, backoff and claim in memory_review_state, so a restart loses nothing and re-runs
-- nothing that completed. Working memory and the description are OpenHermit's session texts.

ALTER TABLE conversations ADD COLUMN working_memory TEXT NOT NULL DEFAULT '';
ALTER TABLE conversations ADD COLUMN description TEXT NOT NULL DEFAULT '';
ALTER TABLE conversations ADD COLUMN peak_prompt_tokens INTEGER;
ALTER TABLE conversations ADD COLUMN context_window INTEGER;
ALTER TABLE conversations ADD COLUMN completed_turns INTEGER NOT NULL DEFAULT 0;

CREATE TABLE memory_review_state (
    agent_id                 TEXT NOT NULL,
    owner_id                 TEXT NOT NULL,
    channel                  TEXT NOT NULL,
    chat_id                  TEXT NOT NULL,
    thread_scope             TEXT NOT NULL,
    -- The highest message id a completed review read; only later messages are new.
    last_reviewed_message_id INTEGER NOT NULL DEFAULT 0,
    last_reviewed_at         TEXT,
    last_review_started_at   TEXT,
    last_review_completed_at TEXT,
    last_review_status       TEXT CHECK (last_review_status IN ('ok', 'nothing_to_save', 'failed')),
    last_review_failed_at    TEXT,
    failure_count            INTEGER NOT NULL DEFAULT 0,
    last_error               TEXT,
    -- 1 when a committed turn brought reviewable input after the cursor.
    pending_input            INTEGER NOT NULL DEFAULT 0 CHECK (pending_input IN (0, 1)),
    last_input_at            TEXT,
    turns_since_review       INTEGER NOT NULL DEFAULT 0,
    -- One review per conversation at a time: the running review's token and start.
    claim_token              TEXT,
    claimed_at               TEXT,
    PRIMARY KEY (agent_id, owner_id, channel, chat_id, thread_scope),
    FOREIGN KEY (agent_id, owner_id, channel, chat_id, thread_scope)
        REFERENCES conversations (agent_id, owner_id, channel, chat_id, thread_scope)
        ON DELETE CASCADE
) STRICT, WITHOUT ROWID;

-- The scheduler's question: which conversations have new input?
CREATE INDEX memory_review_pending ON memory_review_state (last_reviewed_at)
    WHERE pending_input = 1;

CREATE TABLE review_runs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_id         TEXT NOT NULL,
    owner_id         TEXT NOT NULL,
    channel          TEXT NOT NULL,
    chat_id          TEXT NOT NULL,
    thread_scope     TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('ok', 'nothing_to_save', 'failed')),
    max_message_id   INTEGER NOT NULL,
    ops_added        INTEGER NOT NULL DEFAULT 0,
    ops_replaced     INTEGER NOT NULL DEFAULT 0,
    ops_archived     INTEGER NOT NULL DEFAULT 0,
    ops_skipped      INTEGER NOT NULL DEFAULT 0,
    tokens_in        INTEGER NOT NULL DEFAULT 0,
    provider         TEXT,
    model            TEXT,
    error            TEXT,
    started_at       TEXT NOT NULL,
    completed_at     TEXT NOT NULL,
    FOREIGN KEY (agent_id, owner_id, channel, chat_id, thread_scope)
        REFERENCES conversations (agent_id, owner_id, channel, chat_id, thread_scope)
        ON DELETE CASCADE
) STRICT;

CREATE INDEX review_runs_by_conversation
    ON review_runs (agent_id, owner_id, channel, chat_id, thread_scope, id);

-- Every model call, tagged as the reference tags them (agent memory_reviewer, session id
-- memory_review:<agent>:<channel>:<chat>:<thread>:<max_id>).
CREATE TABLE model_calls (
    id                INTEGER PRIMARY KEY,
    agent             TEXT NOT NULL,
    session_id        TEXT NOT NULL,
    provider          TEXT NOT NULL,
    model             TEXT NOT NULL,
    latency_ms        REAL NOT NULL,
    prompt_tokens     INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    error             TEXT,
    review_run_id     INTEGER REFERENCES review_runs (id) ON DELETE CASCADE,
    created_at        TEXT NOT NULL
) STRICT;

CREATE INDEX model_calls_by_run ON model_calls (review_run_id) WHERE review_run_id IS NOT NULL;
