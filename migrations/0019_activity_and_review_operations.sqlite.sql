-- Activity by hour (GetActivity, the console's charts): what was stored and what the background
-- did, by UTC hour ('YYYY-MM-DDTHH' of the stored times). The triggers below keep it in the same
-- transaction as the rows they count, whatever writes them (appends, transcripts, imports,
-- compactions, reviews), so a chart over a million messages reads a few hundred rows, not the
-- messages. Two tables: by conversation (a conversation's and an owner's charts; it goes with
-- its conversation, ON DELETE CASCADE), and by agent (an agent's and the server's, whose rows
-- do not grow with the conversations). An erased owner's activity stays in its agent's counts,
-- as numbers that name no one.
CREATE TABLE activity_hours (
    agent_id        TEXT NOT NULL,
    owner_id        TEXT NOT NULL,
    channel         TEXT NOT NULL,
    chat_id         TEXT NOT NULL,
    thread_scope    TEXT NOT NULL,
    hour            TEXT NOT NULL,
    messages        INTEGER NOT NULL DEFAULT 0,
    compactions     INTEGER NOT NULL DEFAULT 0,
    review_runs     INTEGER NOT NULL DEFAULT 0,
    review_failures INTEGER NOT NULL DEFAULT 0,
    facts_added     INTEGER NOT NULL DEFAULT 0,
    facts_replaced  INTEGER NOT NULL DEFAULT 0,
    facts_archived  INTEGER NOT NULL DEFAULT 0,
    facts_refused   INTEGER NOT NULL DEFAULT 0,
    model_tokens    INTEGER NOT NULL DEFAULT 0,
    model_errors    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (agent_id, owner_id, channel, chat_id, thread_scope, hour),
    FOREIGN KEY (agent_id, owner_id, channel, chat_id, thread_scope)
        REFERENCES conversations (agent_id, owner_id, channel, chat_id, thread_scope)
        ON DELETE CASCADE
) STRICT, WITHOUT ROWID;
CREATE TABLE agent_activity_hours (
    agent_id        TEXT NOT NULL,
    hour            TEXT NOT NULL,
    messages        INTEGER NOT NULL DEFAULT 0,
    compactions     INTEGER NOT NULL DEFAULT 0,
    review_runs     INTEGER NOT NULL DEFAULT 0,
    review_failures INTEGER NOT NULL DEFAULT 0,
    facts_added     INTEGER NOT NULL DEFAULT 0,
    facts_replaced  INTEGER NOT NULL DEFAULT 0,
    facts_archived  INTEGER NOT NULL DEFAULT 0,
    facts_refused   INTEGER NOT NULL DEFAULT 0,
    model_tokens    INTEGER NOT NULL DEFAULT 0,
    model_errors    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (agent_id, hour)
) STRICT, WITHOUT ROWID;
CREATE INDEX agent_activity_hours_by_hour ON agent_activity_hours (hour);

-- A message, or a compaction's checkpoint summary (kind 'checkpoint_summary').
CREATE TRIGGER activity_after_message AFTER INSERT ON messages BEGIN
    INSERT INTO activity_hours (agent_id, owner_id, channel, chat_id, thread_scope,
                                hour, messages, compactions)
    VALUES (NEW.agent_id, NEW.owner_id, NEW.channel, NEW.chat_id, NEW.thread_scope,
            substr(NEW.created_at, 1, 13),
            NEW.kind <> 'checkpoint_summary', NEW.kind = 'checkpoint_summary')
    ON CONFLICT DO UPDATE SET messages = messages + excluded.messages,
                              compactions = compactions + excluded.compactions;
    INSERT INTO agent_activity_hours (agent_id, hour, messages, compactions)
    VALUES (NEW.agent_id, substr(NEW.created_at, 1, 13),
            NEW.kind <> 'checkpoint_summary', NEW.kind = 'checkpoint_summary')
    ON CONFLICT DO UPDATE SET messages = messages + excluded.messages,
                              compactions = compactions + excluded.compactions;
END;

-- A review run is inserted when it starts and its counts are set when it ends: both count,
-- the second by what it changed.
CREATE TRIGGER activity_after_review_run AFTER INSERT ON review_runs BEGIN
    INSERT INTO activity_hours (agent_id, owner_id, channel, chat_id, thread_scope,
                                hour, review_runs, review_failures, facts_added,
                                facts_replaced, facts_archived, facts_refused)
    VALUES (NEW.agent_id, NEW.owner_id, NEW.channel, NEW.chat_id, NEW.thread_scope,
            substr(NEW.started_at, 1, 13), 1, NEW.status = 'failed',
            NEW.ops_added, NEW.ops_replaced, NEW.ops_archived, NEW.ops_skipped)
    ON CONFLICT DO UPDATE SET review_runs = review_runs + 1,
                              review_failures = review_failures + excluded.review_failures,
                              facts_added = facts_added + excluded.facts_added,
                              facts_replaced = facts_replaced + excluded.facts_replaced,
                              facts_archived = facts_archived + excluded.facts_archived,
                              facts_refused = facts_refused + excluded.facts_refused;
    INSERT INTO agent_activity_hours (agent_id, hour, review_runs, review_failures, facts_added,
                                      facts_replaced, facts_archived, facts_refused)
    VALUES (NEW.agent_id, substr(NEW.started_at, 1, 13), 1, NEW.status = 'failed',
            NEW.ops_added, NEW.ops_replaced, NEW.ops_archived, NEW.ops_skipped)
    ON CONFLICT DO UPDATE SET review_runs = review_runs + 1,
                              review_failures = review_failures + excluded.review_failures,
                              facts_added = facts_added + excluded.facts_added,
                              facts_replaced = facts_replaced + excluded.facts_replaced,
                              facts_archived = facts_archived + excluded.facts_archived,
                              facts_refused = facts_refused + excluded.facts_refused;
END;
CREATE TRIGGER activity_after_review_run_update
AFTER UPDATE OF status, ops_added, ops_replaced, ops_archived, ops_skipped ON review_runs BEGIN
    UPDATE activity_hours SET
        review_failures = review_failures + (NEW.status = 'failed') - (OLD.status = 'failed'),
        facts_added = facts_added + NEW.ops_added - OLD.ops_added,
        facts_replaced = facts_replaced + NEW.ops_replaced - OLD.ops_replaced,
        facts_archived = facts_archived + NEW.ops_archived - OLD.ops_archived,
        facts_refused = facts_refused + NEW.ops_skipped - OLD.ops_skipped
    WHERE agent_id = NEW.agent_id AND owner_id = NEW.owner_id AND channel = NEW.channel
      AND chat_id = NEW.chat_id AND thread_scope = NEW.thread_scope
      AND hour = substr(NEW.started_at, 1, 13);
    UPDATE agent_activity_hours SET
        review_failures = review_failures + (NEW.status = 'failed') - (OLD.status = 'failed'),
        facts_added = facts_added + NEW.ops_added - OLD.ops_added,
        facts_replaced = facts_replaced + NEW.ops_replaced - OLD.ops_replaced,
        facts_archived = facts_archived + NEW.ops_archived - OLD.ops_archived,
        facts_refused = facts_refused + NEW.ops_skipped - OLD.ops_skipped
    WHERE agent_id = NEW.agent_id AND hour = substr(NEW.started_at, 1, 13);
END;

-- A review's model call, counted with its run's conversation.
CREATE TRIGGER activity_after_model_call AFTER INSERT ON model_calls
WHEN NEW.review_run_id IS NOT NULL BEGIN
    INSERT INTO activity_hours (agent_id, owner_id, channel, chat_id, thread_scope,
                                hour, model_tokens, model_errors)
    SELECT r.agent_id, r.owner_id, r.channel, r.chat_id, r.thread_scope,
           substr(NEW.created_at, 1, 13),
           NEW.prompt_tokens + NEW.completion_tokens, NEW.error IS NOT NULL
    FROM review_runs AS r WHERE r.id = NEW.review_run_id
    ON CONFLICT DO UPDATE SET model_tokens = model_tokens + excluded.model_tokens,
                              model_errors = model_errors + excluded.model_errors;
    INSERT INTO agent_activity_hours (agent_id, hour, model_tokens, model_errors)
    SELECT r.agent_id, substr(NEW.created_at, 1, 13),
           NEW.prompt_tokens + NEW.completion_tokens, NEW.error IS NOT NULL
    FROM review_runs AS r WHERE r.id = NEW.review_run_id
    ON CONFLICT DO UPDATE SET model_tokens = model_tokens + excluded.model_tokens,
                              model_errors = model_errors + excluded.model_errors;
END;

-- What was stored before this migration: by conversation, then by agent from those.
INSERT INTO activity_hours (agent_id, owner_id, channel, chat_id, thread_scope, hour,
                            messages, compactions)
SELECT agent_id, owner_id, channel, chat_id, thread_scope, substr(created_at, 1, 13),
       sum(kind <> 'checkpoint_summary'), sum(kind = 'checkpoint_summary')
FROM messages WHERE true GROUP BY 1, 2, 3, 4, 5, 6;
INSERT INTO activity_hours (agent_id, owner_id, channel, chat_id, thread_scope, hour,
                            review_runs, review_failures, facts_added, facts_replaced,
                            facts_archived, facts_refused)
SELECT agent_id, owner_id, channel, chat_id, thread_scope, substr(started_at, 1, 13), count(*),
       sum(status = 'failed'), sum(ops_added), sum(ops_replaced), sum(ops_archived),
       sum(ops_skipped)
FROM review_runs WHERE true GROUP BY 1, 2, 3, 4, 5, 6
ON CONFLICT DO UPDATE SET review_runs = excluded.review_runs,
                          review_failures = excluded.review_failures,
                          facts_added = excluded.facts_added,
                          facts_replaced = excluded.facts_replaced,
                          facts_archived = excluded.facts_archived,
                          facts_refused = excluded.facts_refused;
INSERT INTO activity_hours (agent_id, owner_id, channel, chat_id, thread_scope, hour,
                            model_tokens, model_errors)
SELECT r.agent_id, r.owner_id, r.channel, r.chat_id, r.thread_scope,
       substr(c.created_at, 1, 13), sum(c.prompt_tokens + c.completion_tokens),
       sum(c.error IS NOT NULL)
FROM model_calls AS c JOIN review_runs AS r ON r.id = c.review_run_id WHERE true
GROUP BY 1, 2, 3, 4, 5, 6
ON CONFLICT DO UPDATE SET model_tokens = excluded.model_tokens,
                          model_errors = excluded.model_errors;
INSERT INTO agent_activity_hours
SELECT agent_id, hour, sum(messages), sum(compactions), sum(review_runs), sum(review_failures),
       sum(facts_added), sum(facts_replaced), sum(facts_archived), sum(facts_refused),
       sum(model_tokens), sum(model_errors)
FROM activity_hours GROUP BY agent_id, hour;

-- The rows each review changed, with the value before and after (ListReviewRuns,
-- ReviewRun.applied_operations): `position` is the operation's place in the model's answer. A
-- row's operations go with the row (DeleteMemory, the purges: ON DELETE CASCADE), so an erased
-- fact leaves no value here; and with their run.
CREATE TABLE review_operations (
    run_id    INTEGER NOT NULL REFERENCES review_runs (id) ON DELETE CASCADE,
    position  INTEGER NOT NULL CHECK (position >= 0),
    memory_id INTEGER NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    action    TEXT NOT NULL CHECK (action IN ('add', 'replace', 'archive')),
    value_before TEXT,
    value_after  TEXT,
    PRIMARY KEY (run_id, position)
) STRICT;
CREATE INDEX review_operations_by_memory ON review_operations (memory_id);
