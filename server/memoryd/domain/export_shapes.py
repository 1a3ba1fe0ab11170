"""The export format's records: each kind, and the shape of its line (memoryd.domain.transfer
writes and reads the lines)."""

from __future__ import annotations

import dataclasses
import enum

CONVERSATION_KEY = ("agent_id", "owner_id", "channel", "chat_id", "thread_scope")


class Kind(enum.Enum):
    """The record kinds, in the order they are written and must be read."""

    CONVERSATION = "conversation"
    REVIEW_STATE = "review_state"
    MESSAGE = "message"
    MEMORY_SOURCE = "memory_source"
    SCHEDULED_JOB = "scheduled_job"
    JOB_RUN = "job_run"
    MEMORY = "memory"
    REVIEW_RUN = "review_run"
    RESOURCE = "resource"
    RESOURCE_REVISION = "resource_revision"
    TRANSCRIPT_SESSION = "transcript_session"
    ENDED_SESSION = "ended_session"


@dataclasses.dataclass(frozen=True, slots=True)
class Shape:
    """A kind's columns (in line order), the ones that identify a row, the identifiers that must
    be usable ones (checked as the API checks them), the columns memoryd derives again, and the
    table's columns deliberately left out (internal row numbers, a running review's working
    state). tests/data/test_export_shapes.py checks that these name every column of the table."""

    columns: tuple[str, ...]
    identity: tuple[str, ...]
    identifiers: tuple[str, ...]
    derived: tuple[str, ...] = ()
    kept_out: tuple[str, ...] = ()


SHAPES: dict[Kind, Shape] = {
    Kind.CONVERSATION: Shape(
        (
            *CONVERSATION_KEY,
            "window_start_id",
            "window_started_at",
            "session_start_id",
            "checkpoint_id",
            "history_version",
            "working_memory",
            "description",
            "peak_prompt_tokens",
            "context_window",
            "completed_turns",
            "compaction_failed_at",
            "compaction_error",
            "created_at",
        ),
        CONVERSATION_KEY,
        CONVERSATION_KEY,
        ("search_scope",),
        ("id",),  # a row number; conversations are named by their key
    ),
    Kind.REVIEW_STATE: Shape(
        (
            *CONVERSATION_KEY,
            "last_reviewed_message_id",
            "last_reviewed_at",
            "last_review_started_at",
            "last_review_completed_at",
            "last_review_status",
            "last_review_failed_at",
            "failure_count",
            "last_error",
            "pending_input",
            "backlog",
            "last_input_at",
            "turns_since_review",
        ),
        CONVERSATION_KEY,
        CONVERSATION_KEY,
        # A running review's claim; the passive trigger's count (migration 0013) restarts at 0;
        # a long message's part cursor (migration 0018): an import reads that message whole again.
        kept_out=(
            "claim_token",
            "claimed_at",
            "passive_since_review",
            "review_part_message_id",
            "review_part_offset",
        ),
    ),
    Kind.MESSAGE: Shape(
        (
            "id",
            *CONVERSATION_KEY,
            "sender",
            "role",
            "kind",
            "content",
            "metadata_json",
            "trust",
            "client_message_id",
            "created_at",
        ),
        ("id",),
        CONVERSATION_KEY,
        ("token_count",),
    ),
    Kind.MEMORY_SOURCE: Shape(
        (
            "agent_id",
            "owner_id",
            "id",
            "source_type",
            "name",
            "description",
            "memory_scope",
            "status",
            "created_at",
            "updated_at",
        ),
        ("agent_id", "owner_id", "id"),
        ("agent_id", "owner_id"),
    ),
    Kind.SCHEDULED_JOB: Shape(
        (
            "agent_id",
            "owner_id",
            "job_id",
            "name",
            "status",
            "memory_source_id",
            "created_at",
            "updated_at",
        ),
        ("agent_id", "owner_id", "job_id"),
        ("agent_id", "owner_id", "job_id"),
    ),
    Kind.JOB_RUN: Shape(
        (
            "id",
            "agent_id",
            "owner_id",
            "job_id",
            "run_id",
            "status",
            "summary",
            "started_at",
            "finished_at",
        ),
        ("id",),
        ("agent_id", "owner_id", "job_id"),
    ),
    Kind.MEMORY: Shape(
        (
            "id",
            "agent_id",
            "owner_id",
            "scope_type",
            "scope_id",
            "category",
            "key",
            "value",
            "confidence",
            "promote_target",
            "metadata_json",
            "trust",
            "source_id",
            "source_type",
            "source_name",
            "source_description",
            "session_id",
            "run_id",
            "source_message_id",
            "provenance_json",
            "archived_at",
            "archived_by",
            "archive_reason",
            "created_at",
            "updated_at",
        ),
        ("id",),
        ("agent_id", "owner_id"),
        ("search_scope",),
    ),
    Kind.REVIEW_RUN: Shape(
        (
            "id",
            *CONVERSATION_KEY,
            "status",
            "answer_kind",
            "max_message_id",
            "ops_added",
            "ops_replaced",
            "ops_archived",
            "ops_skipped",
            "ops_deferred",
            "skipped_json",
            "tokens_in",
            "provider",
            "model",
            "error",
            "started_at",
            "completed_at",
        ),
        ("id",),
        CONVERSATION_KEY,
    ),
    Kind.RESOURCE: Shape(
        (
            "agent_id",
            "resource_type",
            "scope_id",
            "resource_path",
            "current_revision",
            "created_at",
            "updated_at",
        ),
        ("agent_id", "resource_type", "scope_id"),
        ("agent_id", "scope_id"),
        kept_out=("id",),  # a row number; resources are named by their key
    ),
    Kind.RESOURCE_REVISION: Shape(
        (
            "agent_id",
            "resource_type",
            "scope_id",
            "revision",
            "parent_revision",
            "content_hash",
            "content",
            "byte_size",
            "mutation_source",
            "provenance_json",
            "created_at",
        ),
        ("agent_id", "resource_type", "scope_id", "revision"),
        ("agent_id", "scope_id"),
        kept_out=("resource_id",),  # the resource is named by its key (read from it)
    ),
    Kind.TRANSCRIPT_SESSION: Shape(
        (
            "agent_id",
            "owner_id",
            "device_id",
            "session_id",
            "committed_seq",
            "created_at",
            "updated_at",
        ),
        ("agent_id", "owner_id", "device_id", "session_id"),
        ("agent_id", "owner_id", "device_id", "session_id"),
    ),
    Kind.ENDED_SESSION: Shape(
        (
            "id",
            *CONVERSATION_KEY,
            "started_after_id",
            "last_message_id",
            "working_memory",
            "description",
            "ended_at",
        ),
        ("id",),
        CONVERSATION_KEY,
    ),
}
ORDER = {kind: position for position, kind in enumerate(Kind)}
