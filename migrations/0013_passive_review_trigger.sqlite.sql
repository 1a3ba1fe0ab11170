-- 0013: OpenHermit's passive trigger. User messages stored without an agent turn (AppendMessages
-- in a group chat the agent only reads, an import) are counted since the last review, and a
-- review is due after [memoryd.memory] passive_turn_interval of them. Like the claim, the count
-- is working state: an export does not carry it.

ALTER TABLE memory_review_state ADD COLUMN passive_since_review INTEGER NOT NULL DEFAULT 0;
