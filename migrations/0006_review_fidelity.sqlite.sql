-- 0006: what a review leaves behind, what it refused, and the scheduled-job run lifecycle.
--
-- memory_review_state.backlog: the last review left reviewable input after the cursor (it read
-- a full batch, or deferred operations over review_max_operations): the next batch is due at
-- once, whatever the interval. It is cleared when a review finds nothing left to read.
ALTER TABLE memory_review_state ADD COLUMN backlog INTEGER NOT NULL DEFAULT 0
    CHECK (backlog IN (0, 1));

-- The scheduler's other question: which conversations are catching up?
CREATE INDEX memory_review_backlog ON memory_review_state (last_reviewed_at)
    WHERE backlog = 1;

-- review_runs.answer_kind: how the model answered. 'operations' (JSON or tool calls),
-- 'nothing' (the literal "Nothing to save." or an empty answer), 'prose' (text without
-- operations: nothing saved, not a failure), '' for a failed run.
ALTER TABLE review_runs ADD COLUMN answer_kind TEXT NOT NULL DEFAULT ''
    CHECK (answer_kind IN ('', 'operations', 'nothing', 'prose'));
-- Operations left for the next review of the same messages (over review_max_operations).
ALTER TABLE review_runs ADD COLUMN ops_deferred INTEGER NOT NULL DEFAULT 0;
-- The skipped operations, as a JSON list of {"index", "action", "reason"} (the first 100).
ALTER TABLE review_runs ADD COLUMN skipped_json TEXT NOT NULL DEFAULT '[]'
    CHECK (json_valid(skipped_json));

-- A run's end: FinishJobRun sets status, finished_at and the summary.
ALTER TABLE job_runs ADD COLUMN summary TEXT NOT NULL DEFAULT '';
