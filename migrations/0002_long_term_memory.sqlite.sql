-- 0002: long-term memory, memory sources, scheduled jobs, versioned resources.
--
-- memories follows the reference schema (scoped key/value facts with category, confidence,
-- promote_target, source and archive columns), plus caller metadata (OpenHermit's key/content
-- entries live in the same table), the writer's trust, JSON provenance (review run, model,
-- source message ids) and the owner's search token. Every row belongs to one agent and one
-- owner; the scope narrows who reads it within that pair.

CREATE TABLE scheduled_jobs (
    agent_id         TEXT NOT NULL,
    owner_id         TEXT NOT NULL,
    job_id           TEXT NOT NULL,
    name             TEXT NOT NULL,
    status           TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused', 'deleted')),
    -- The memory source of the job's rows: 'job:<job_id>'.
    memory_source_id TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    PRIMARY KEY (agent_id, owner_id, job_id)
) STRICT, WITHOUT ROWID;

CREATE TABLE job_runs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_id    TEXT NOT NULL,
    owner_id    TEXT NOT NULL,
    job_id      TEXT NOT NULL,
    -- The caller's id of the run.
    run_id      TEXT NOT NULL,
    status      TEXT NOT NULL DEFAULT 'running'
        CHECK (status IN ('running', 'succeeded', 'failed')),
    started_at  TEXT NOT NULL,
    finished_at TEXT,
    UNIQUE (agent_id, owner_id, job_id, run_id),
    FOREIGN KEY (agent_id, owner_id, job_id)
        REFERENCES scheduled_jobs (agent_id, owner_id, job_id) ON DELETE CASCADE
) STRICT;

CREATE TABLE memory_sources (
    agent_id     TEXT NOT NULL,
    owner_id     TEXT NOT NULL,
    id           TEXT NOT NULL,
    source_type  TEXT NOT NULL
        CHECK (source_type IN ('conversation', 'api', 'scheduled_job', 'memory_reviewer')),
    name         TEXT NOT NULL,
    description  TEXT NOT NULL DEFAULT '',
    -- The scope id rows of this source are written to.
    memory_scope TEXT NOT NULL,
    status       TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused', 'deleted')),
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL,
    PRIMARY KEY (agent_id, owner_id, id)
) STRICT, WITHOUT ROWID;

CREATE TABLE memories (
    -- AUTOINCREMENT: an erased row's id is never handed out again.
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_id           TEXT NOT NULL,
    owner_id           TEXT NOT NULL,
    scope_type         TEXT NOT NULL CHECK (scope_type IN ('owner', 'agent', 'conversation', 'job')),
    scope_id           TEXT NOT NULL,
    category           TEXT NOT NULL CHECK (category IN (
        'identity', 'preference', 'interest', 'goal', 'context', 'directive',
        'fact', 'job_run_summary')),
    key                TEXT NOT NULL,
    value              TEXT NOT NULL,
    confidence         REAL NOT NULL DEFAULT 1.0 CHECK (confidence BETWEEN 0.0 AND 1.0),
    promote_target     TEXT NOT NULL DEFAULT 'none'
        CHECK (promote_target IN ('none', 'user_md', 'memory_md')),
    metadata_json      TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata_json)),
    trust              TEXT NOT NULL CHECK (trust IN ('operator', 'guest')),
    source_id          TEXT,
    source_type        TEXT,
    source_name        TEXT,
    source_description TEXT,
    session_id         TEXT,
    run_id             TEXT,
    -- A purge of the conversation keeps the fact and forgets where it came from.
    source_message_id  INTEGER REFERENCES messages (id) ON DELETE SET NULL,
    provenance_json    TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(provenance_json)),
    -- The owner's word in memories_fts (see messages.search_scope): narrows searches by index.
    search_scope       TEXT NOT NULL,
    archived_at        TEXT,
    archived_by        TEXT,
    archive_reason     TEXT,
    created_at         TEXT NOT NULL,
    updated_at         TEXT NOT NULL,
    UNIQUE (agent_id, owner_id, scope_type, scope_id, key)
) STRICT;

-- Listings and prompt renders: an owner's rows, most recently updated first.
CREATE INDEX memories_by_owner_updated ON memories (agent_id, owner_id, updated_at, id);

-- Deleting a message looks up rows that cite it (ON DELETE SET NULL).
CREATE INDEX memories_by_source_message ON memories (source_message_id)
    WHERE source_message_id IS NOT NULL;

-- Word index over category, key and value (porter stemming), with the owner token in a fourth
-- column that searches weight 0. Memory writes are few and one row each, so unlike messages
-- (see 0001) one statement per change is fine; a bulk import should insert set-based.
CREATE VIRTUAL TABLE memories_fts USING fts5(
    category, key, value, search_scope,
    content = 'memories', content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE TRIGGER memories_after_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, category, key, value, search_scope)
        VALUES (new.id, new.category, new.key, new.value, new.search_scope);
END;

CREATE TRIGGER memories_after_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, category, key, value, search_scope)
        VALUES ('delete', old.id, old.category, old.key, old.value, old.search_scope);
END;

CREATE TRIGGER memories_after_update AFTER UPDATE OF category, key, value, search_scope
    ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, category, key, value, search_scope)
        VALUES ('delete', old.id, old.category, old.key, old.value, old.search_scope);
    INSERT INTO memories_fts (rowid, category, key, value, search_scope)
        VALUES (new.id, new.category, new.key, new.value, new.search_scope);
END;

-- Versioned resources: USER.md and MEMORY.md of each (agent, owner), later checkpoints.
CREATE TABLE resources (
    id               INTEGER PRIMARY KEY,
    agent_id         TEXT NOT NULL,
    resource_type    TEXT NOT NULL CHECK (resource_type IN ('user_md', 'memory_md', 'checkpoint')),
    scope_id         TEXT NOT NULL,
    -- Relative to the data directory.
    resource_path    TEXT NOT NULL,
    current_revision INTEGER NOT NULL DEFAULT 0,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    UNIQUE (agent_id, resource_type, scope_id)
) STRICT;

CREATE TABLE resource_revisions (
    resource_id     INTEGER NOT NULL REFERENCES resources (id) ON DELETE CASCADE,
    revision        INTEGER NOT NULL,
    parent_revision INTEGER,
    content_hash    TEXT NOT NULL,
    content         TEXT NOT NULL,
    byte_size       INTEGER NOT NULL,
    mutation_source TEXT NOT NULL,
    provenance_json TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(provenance_json)),
    created_at      TEXT NOT NULL,
    PRIMARY KEY (resource_id, revision)
) STRICT, WITHOUT ROWID;
