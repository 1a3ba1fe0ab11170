-- 0007: compaction.
--
-- A conversation's window now moves for two reasons: /new starts a session (session_start_id and
-- window_start_id both move past the newest message), and compaction summarises older messages
-- into a checkpoint (window_start_id moves to just before the first kept message; the session
-- start stays, so the session's leading system messages stay protected). Nothing is renumbered
-- or deleted: the checkpoint is a new message (kind checkpoint_summary), and checkpoint_id names
-- the latest one.
ALTER TABLE conversations ADD COLUMN session_start_id INTEGER NOT NULL DEFAULT 0;
UPDATE conversations SET session_start_id = window_start_id;
ALTER TABLE conversations ADD COLUMN checkpoint_id INTEGER NOT NULL DEFAULT 0;
-- The last failed compaction: the next automatic one waits for the backoff after it.
ALTER TABLE conversations ADD COLUMN compaction_failed_at TEXT;
ALTER TABLE conversations ADD COLUMN compaction_error TEXT;

-- Tokens of a message's content (tiktoken cl100k_base), counted once when it is stored; the
-- context of the next model call is summed from these, never re-tokenized. Rows stored before
-- this migration are counted at start-up.
ALTER TABLE messages ADD COLUMN token_count INTEGER;
