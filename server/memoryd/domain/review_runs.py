"""What a review records: its status, why it was skipped, the operations it refused, the
conversation's review state, and the committed run; and which conversations ReviewNow reviews."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum

from memoryd.domain.conversation import ConversationKey


class ReviewStatus(enum.StrEnum):
    """How a review ended (the value is what review_runs.status stores, PROSE aside)."""

    OK = "ok"
    NOTHING_TO_SAVE = "nothing_to_save"
    # Stored as nothing_to_save with answer_kind "prose": the model wrote text, saved nothing.
    NOTHING_TO_SAVE_PROSE = "nothing_to_save_prose"
    SKIPPED = "skipped"
    FAILED = "failed"


@dataclasses.dataclass(frozen=True, slots=True)
class ReviewSelection:
    """Which conversations ReviewNow reviews: one, or those of an agent and/or an owner (None:
    any). With neither a conversation nor an agent it reaches every agent."""

    conversation: ConversationKey | None
    agent_id: str | None
    owner_id: str | None

    @property
    def every_agent(self) -> bool:
        """Whether the selection reaches every agent's conversations."""
        return self.conversation is None and self.agent_id is None


class SkipReason(enum.StrEnum):
    """Why a review did not run: a slug; ReviewNow reports its text (SKIP_TEXT)."""

    NO_RECORD = "no_record"
    UNDER_INTERVAL = "under_interval"
    BACKOFF = "backoff"
    NO_NEW_INPUT = "no_new_input"
    CONCURRENT_RUN = "concurrent_run"
    CLAIM_TAKEN_OVER = "claim_taken_over"


# What ReviewNow says for each skip (its `reason`), the one place the prose lives.
SKIP_TEXT: dict[SkipReason, str] = {
    SkipReason.NO_RECORD: "the conversation has no record",
    SkipReason.UNDER_INTERVAL: "under_interval",
    SkipReason.BACKOFF: "backoff: the last review failed",
    SkipReason.NO_NEW_INPUT: "no new user messages since the last review",
    SkipReason.CONCURRENT_RUN: "concurrent_run: another review is running",
    SkipReason.CLAIM_TAKEN_OVER: "concurrent_run: the claim was taken over",
}


class AnswerKind(enum.StrEnum):
    """How a model's answer was written (review_runs.answer_kind)."""

    OPERATIONS = "operations"  # JSON or tool calls
    NOTHING = "nothing"  # `Nothing to save.` or empty
    PROSE = "prose"  # text without operations: nothing is saved, and it is not a failure


@dataclasses.dataclass(frozen=True, slots=True)
class SkippedOperation:
    """An operation of an answer that was not applied, and why; for a refused add or replace,
    the value it would have written (the first MAX_REFUSED_VALUE_CHARS characters) and the
    message it came from (0: not known)."""

    index: int
    action: str
    reason: str
    value: str = ""
    message_id: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class AppliedOperation:
    """A row a review changed: its place in the answer, the action ("add", "replace" or
    "archive"), the row, and its value before (None for an add) and after."""

    index: int
    action: str
    memory_id: int
    value_before: str | None
    value_after: str | None


@dataclasses.dataclass(frozen=True, slots=True)
class ReadPart:
    """How far into a message longer than a review's token budget the reviews have read: the
    message (0: none) and its characters read so far."""

    message_id: int = 0
    offset: int = 0


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ReviewState:
    """A conversation's review state."""

    last_reviewed_message_id: int = 0
    last_reviewed_at: dt.datetime | None = None
    last_review_started_at: dt.datetime | None = None
    last_review_completed_at: dt.datetime | None = None
    last_review_status: ReviewStatus | None = None
    last_review_failed_at: dt.datetime | None = None
    failure_count: int = 0
    last_error: str | None = None
    pending_input: bool = False
    last_input_at: dt.datetime | None = None
    turns_since_review: int = 0
    # User messages stored without an agent turn since the last review.
    passive_since_review: int = 0
    claim_token: str | None = None
    claimed_at: dt.datetime | None = None
    # The last review left reviewable input behind: the next batch is due at once.
    backlog: bool = False
    # A message longer than the budget, partly read (the cursor stays before it until its end).
    part: ReadPart = ReadPart()

    @property
    def cursor(self) -> int:
        """The id of the last reviewed message (0 before the first review)."""
        return self.last_reviewed_message_id


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RunRecord:
    """A finished review, as committed.

    `skipped` counts the operations refused; `skipped_ops` holds the first MAX_SKIPPED_RECORDED
    of them with their reasons; `deferred` counts those left for the next review of the same
    messages.
    """

    status: ReviewStatus
    max_message_id: int
    added: int = 0
    replaced: int = 0
    archived: int = 0
    skipped: int = 0
    tokens_in: int = 0
    provider: str | None = None
    model: str | None = None
    error: str | None = None
    deferred: int = 0
    skipped_ops: tuple[SkippedOperation, ...] = ()


MAX_SKIPPED_RECORDED = 100
# A refused value is kept up to this many characters (a fact is at most 200).
MAX_REFUSED_VALUE_CHARS = 2000


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class StoredRun:
    """A committed review run, with the number of model calls it made (and whether its
    exchange with the model was kept)."""

    id: int
    record: RunRecord
    model_calls: int
    started_at: dt.datetime
    completed_at: dt.datetime
    exchange_kept: bool = False
    # The rows it changed that still exist, in the answer's order.
    applied: tuple[AppliedOperation, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class Exchange:
    """What a review sent the model (chat messages: role and content) and what came back (the
    answer's text, and its tool calls as JSON); kept with keep_review_exchanges."""

    prompt: tuple[tuple[str, str], ...]
    answer: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ReviewResult:
    """What one review did (`reason`: why it was skipped, or why it failed, as text; `skip`:
    why it was skipped)."""

    key: ConversationKey
    status: ReviewStatus
    reason: str = ""
    skip: SkipReason | None = None
    added: int = 0
    replaced: int = 0
    archived: int = 0
    skipped_ops: int = 0
    tokens_in: int = 0
    run_id: int = 0
    provider: str = ""
    model: str = ""
    own_ms: float = 0.0
    deferred_ops: int = 0
    # Reviewable messages left after the cursor (the backlog the next batch reads); counted for
    # ReviewNow's answer only.
    unread: int = 0
