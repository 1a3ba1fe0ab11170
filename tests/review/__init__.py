"""The background review, its scheduling and triggers, the model chain, and compaction."""
