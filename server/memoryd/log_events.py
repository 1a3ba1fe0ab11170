"""The names of the events memoryd logs: the `event` key of each structured log record.

Operators alert and dashboards filter on them, so they are part of the interface: a name is
changed only deliberately. Tests look records up by these constants.
"""

from __future__ import annotations

import enum


class Event(enum.StrEnum):
    """An `event` value of a log record."""

    AFTER_COMMIT = "after_commit"
    CONSOLE_SIGN_IN = "console_sign_in"
    HOME_READABLE = "home_readable"
    HTTP_ACCEPT_FAILED = "http_accept_failed"
    HTTP_CONNECTIONS_CAPPED = "http_connections_capped"
    HTTP_LIMITS = "http_limits"
    HTTP_TIMED_OUT = "http_timed_out"
    MIGRATED = "migrated"
    MODEL_CALL = "model_call"
    MODEL_PARAMETER_REFUSED = "model_parameter_refused"
    COMPACTION = "compaction"
    COMPACTION_FAILED = "compaction_failed"
    TOKENS_COUNTED = "tokens_counted"
    NO_PROVIDER = "no_provider"
    READ_ONLY = "read_only"
    BACKGROUND_REVIEW_OFF = "background_review_off"
    REVIEW_CATCH_UP = "review_catch_up"
    PROMPT_FILE_CLEANUP_FAILED = "prompt_file_cleanup_failed"
    PROMPT_FILE_WRITE_FAILED = "prompt_file_write_failed"
    PROMPT_FILES_RESYNCED = "prompt_files_resynced"
    PROMPT_FILES_UNWRITTEN = "prompt_files_unwritten"
    PROVIDER_KEY_MISSING = "provider_key_missing"
    REVIEW = "review"
    REVIEW_CLAIMS_CLEARED = "review_claims_cleared"
    REVIEW_CRASHED = "review_crashed"
    REVIEW_FAILED = "review_failed"
    REVIEW_OP_SKIPPED = "review_op_skipped"
    RPC = "rpc"
    RPC_ERROR = "rpc_error"
    SCHEDULER = "scheduler"
    SERVING = "serving"
    WORKER_SERVING = "worker_serving"
    WORKER_STARTED = "worker_started"
    WORKER_EXITED = "worker_exited"
    WORKER_FAILED = "worker_failed"
    WORKER_KILLED = "worker_killed"
    EMBEDDER_LEADING = "embedder_leading"
    STOP_REPEATED = "stop_repeated"
    STOPPED = "stopped"
    STOPPING = "stopping"
    WRITE_FAILED = "write_failed"
    WRITE_RETRY = "write_retry"
    WRITE_ROLLBACK_FAILED = "write_rollback_failed"
    WAL_TRUNCATED = "wal_truncated"
    STATISTICS_NOT_SCRUBBED = "statistics_not_scrubbed"
    CHECKPOINTS_SPLIT = "checkpoints_split"
    CHECKPOINTS_NOT_SPLIT = "checkpoints_not_split"
    WAL_TRUNCATE_FAILED = "wal_truncate_failed"
    EMBEDDED = "embedded"
    EMBEDDING_FAILED = "embedding_failed"
