"""Translation of turn and review messages: a turn's usage and ReviewNow's selection in; review
results, review state and runs out. Nothing here decides policy."""

from __future__ import annotations

from memoryd.api.convert import (
    conversation_in,
    conversation_out,
    optional_timestamp_out,
    timestamp_out,
)
from memoryd.api.enum_tables import REVIEW_STATUS
from memoryd.domain.conversation import ConversationKey, check_identifier
from memoryd.domain.review_runs import ReviewResult, ReviewSelection, StoredRun
from memoryd.domain.turns import TurnUsage
from memoryd.errors import InvalidArgument, Reason
from memoryd.services.review_reads import ReviewDescription
from memoryd.services.review_tuning import Triggers
from memoryd_client.v2 import admin_service_pb2 as admin_pb
from memoryd_client.v2 import conversation_service_pb2 as conversation_pb
from memoryd_client.v2 import records_pb2 as records_pb
from memoryd_client.v2 import review_service_pb2 as review_pb


def turn_usage_in(usage: conversation_pb.TurnUsage) -> TurnUsage:
    """What the provider reported for a turn (0: not reported)."""
    for field in ("peak_prompt_tokens", "context_window"):
        if getattr(usage, field) < 0:
            raise InvalidArgument(f"usage.{field} must not be negative", reason=Reason.OUT_OF_RANGE)
    return TurnUsage(
        peak_prompt_tokens=usage.peak_prompt_tokens or None,
        context_window=usage.context_window or None,
    )


def review_selection(request: review_pb.ReviewNowRequest) -> ReviewSelection:
    """The conversations a ReviewNow request selects: its conversation, else its agent and
    owner, where an empty one means any (so no conversation and no agent is every agent). The
    guard reads the request with this function too (memoryd.api.access.EVERY_AGENT)."""
    if request.HasField("conversation"):
        return ReviewSelection(conversation_in(request.conversation), None, None)
    return ReviewSelection(
        None,
        check_identifier(request.agent_id, "agent_id") or None,
        check_identifier(request.owner_id, "owner_id") or None,
    )


def fill_review(target: review_pb.ConversationReview, result: ReviewResult) -> None:
    """Write one review's result into `target`."""
    target.conversation.CopyFrom(conversation_out(result.key))
    target.status = REVIEW_STATUS.number(result.status)
    target.reason = result.reason
    target.ops_added = result.added
    target.ops_replaced = result.replaced
    target.ops_archived = result.archived
    target.ops_skipped = result.skipped_ops
    target.tokens_in = result.tokens_in
    target.review_run_id = result.run_id
    target.provider = result.provider
    target.model = result.model
    target.ops_deferred = result.deferred_ops
    target.unread_messages = result.unread


def review_state_out(
    key: ConversationKey, described: ReviewDescription
) -> review_pb.GetReviewStateResponse:
    """GetReviewState's answer: the state, the backlog and the latest run."""
    state = described.state
    status = state.last_review_status
    response = review_pb.GetReviewStateResponse(
        conversation=conversation_out(key),
        last_reviewed_message_id=state.last_reviewed_message_id,
        last_reviewed_at=optional_timestamp_out(state.last_reviewed_at),
        last_review_started_at=optional_timestamp_out(state.last_review_started_at),
        last_review_completed_at=optional_timestamp_out(state.last_review_completed_at),
        last_review_status=(
            REVIEW_STATUS.number(status)
            if status is not None
            else records_pb.REVIEW_STATUS_UNSPECIFIED
        ),
        last_review_failed_at=optional_timestamp_out(state.last_review_failed_at),
        failure_count=state.failure_count,
        last_error=state.last_error or "",
        pending_input=state.pending_input,
        turns_since_review=state.turns_since_review,
        review_running=state.claim_token is not None,
        unread_messages=described.unread,
        backlog=state.backlog,
    )
    if described.last_run is not None:
        response.last_run.CopyFrom(run_out(described.last_run))
    return response


def run_out(run: StoredRun) -> records_pb.ReviewRun:
    """A committed review run."""
    record = run.record
    return records_pb.ReviewRun(
        id=run.id,
        status=REVIEW_STATUS.number(record.status),
        max_message_id=record.max_message_id,
        ops_added=record.added,
        ops_replaced=record.replaced,
        ops_archived=record.archived,
        ops_skipped=record.skipped,
        tokens_in=record.tokens_in,
        provider=record.provider or "",
        model=record.model or "",
        error=record.error or "",
        model_calls=run.model_calls,
        started_at=timestamp_out(run.started_at),
        completed_at=timestamp_out(run.completed_at),
        ops_deferred=record.deferred,
        skipped_operations=[
            records_pb.SkippedOperation(
                index=op.index,
                action=op.action,
                reason=op.reason,
                value=op.value,
                message_id=op.message_id,
            )
            for op in record.skipped_ops
        ],
        exchange_kept=run.exchange_kept,
        applied_operations=[
            records_pb.AppliedOperation(
                index=op.index,
                action=op.action,
                memory_id=op.memory_id,
                value_before=op.value_before or "",
                value_after=op.value_after or "",
            )
            for op in run.applied
        ],
    )


def triggers_in(message: admin_pb.ReviewTriggers) -> Triggers:
    """The review's triggers, as asked (their ranges are the use case's to check)."""
    return Triggers(
        enabled=message.enabled,
        review_interval_hours=message.review_interval_hours,
        turn_interval=message.turn_interval,
        idle_timeout_minutes=message.idle_timeout_minutes,
        passive_turn_interval=message.passive_turn_interval,
    )


def triggers_out(triggers: Triggers) -> admin_pb.ReviewTriggers:
    """The review's triggers."""
    return admin_pb.ReviewTriggers(
        enabled=triggers.enabled,
        review_interval_hours=triggers.review_interval_hours,
        turn_interval=triggers.turn_interval,
        idle_timeout_minutes=triggers.idle_timeout_minutes,
        passive_turn_interval=triggers.passive_turn_interval,
    )
