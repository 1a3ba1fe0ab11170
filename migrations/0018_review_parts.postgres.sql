-- A message longer than a review's token budget is reviewed in parts, one batch each:
-- review_part_message_id is the message being read (0: none) and review_part_offset how many of
-- its characters the reviews have read so far. The cursor passes the message only once its last
-- part is read, so no part goes unreviewed.
ALTER TABLE memory_review_state ADD COLUMN review_part_message_id BIGINT NOT NULL DEFAULT 0;
ALTER TABLE memory_review_state ADD COLUMN review_part_offset BIGINT NOT NULL DEFAULT 0
    CHECK (review_part_offset >= 0);
