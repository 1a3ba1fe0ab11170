-- With [memoryd.memory] keep_review_exchanges: each review's prompt (the chat messages sent, as
-- a JSON array of {role, content}) and the model's answer as it came, for an operator to read
-- (GetReviewExchange, the console). They quote what users said: a purge of the conversation or
-- the owner erases them with their run (ON DELETE CASCADE; the owner's purge counts them).
CREATE TABLE review_exchanges (
    run_id      BIGINT PRIMARY KEY REFERENCES review_runs (id) ON DELETE CASCADE,
    prompt_json TEXT COLLATE "C" NOT NULL CHECK (prompt_json IS JSON),
    answer      TEXT COLLATE "C" NOT NULL
);
