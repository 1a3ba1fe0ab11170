"""The turn and review RPCs of memoryd.v1.MemoryService: CommitTurn, ReviewNow, GetReviewState."""

from __future__ import annotations

from typing import Any

import grpc

from memoryd.api import convert
from memoryd.domain.conversation import check_identifier
from memoryd.errors import InvalidArgument
from memoryd.services.review import Reviewer, ReviewResult
from memoryd.services.review_scheduler import ReviewScheduler
from memoryd.services.turns import TurnService
from memoryd.storage.review_store import Usage
from memoryd_client.v1 import memory_service_pb2 as service_pb
from memoryd_client.v1 import resources_pb2 as pb

Context = grpc.aio.ServicerContext[Any, Any]
STATUSES = {
    "ok": service_pb.REVIEW_STATUS_OK,
    "nothing_to_save": service_pb.REVIEW_STATUS_NOTHING_TO_SAVE,
    "skipped": service_pb.REVIEW_STATUS_SKIPPED,
    "failed": service_pb.REVIEW_STATUS_FAILED,
    "nothing_to_save_prose": service_pb.REVIEW_STATUS_NOTHING_TO_SAVE_PROSE,
}


class ReviewRpcs:
    """CommitTurn, ReviewNow, GetReviewState."""

    def __init__(self, turns: TurnService, scheduler: ReviewScheduler, reviewer: Reviewer) -> None:
        self._turns = turns
        self._scheduler = scheduler
        self._reviewer = reviewer

    async def CommitTurn(
        self, request: service_pb.CommitTurnRequest, context: Context
    ) -> service_pb.CommitTurnResponse:
        key = convert.required_conversation(request)
        if request.trust not in convert.TRUSTS:
            raise InvalidArgument(f"trust has unknown value {request.trust}")
        messages = []
        for index, message in enumerate(request.messages):
            if message.trust == pb.TRUST_UNSPECIFIED:
                message.trust = request.trust or pb.TRUST_OPERATOR
            messages.append(convert.new_message_in(message, f"messages[{index}]"))
        usage = request.usage
        for field in ("peak_prompt_tokens", "context_window"):
            if getattr(usage, field) < 0:
                raise InvalidArgument(f"usage.{field} must not be negative")
        result = await self._turns.commit(
            key,
            messages,
            Usage(usage.peak_prompt_tokens or None, usage.context_window or None),
            speaker=convert.TRUSTS[request.trust],
        )
        response = service_pb.CommitTurnResponse(
            history_version=result.append.history_version,
            review_pending=result.review_pending,
        )
        response.echo_truncated = convert.fill_append_results(
            response.results, result.append, echo=request.echo_messages
        )
        return response

    async def ReviewNow(
        self, request: service_pb.ReviewNowRequest, context: Context
    ) -> service_pb.ReviewNowResponse:
        conversation = None
        if request.HasField("conversation"):
            conversation = convert.conversation_in(request.conversation)
            self._reviewer.require_provider()
            await self._reviewer.describe(conversation)  # NOT_FOUND when it has no record
        results = await self._scheduler.review_now(
            conversation=conversation,
            agent_id=check_identifier(request.agent_id, "agent_id") or None,
            owner_id=check_identifier(request.owner_id, "owner_id") or None,
        )
        response = service_pb.ReviewNowResponse()
        for result in results:
            fill_review(response.reviews.add(), result)
        return response

    async def GetReviewState(
        self, request: service_pb.GetReviewStateRequest, context: Context
    ) -> service_pb.GetReviewStateResponse:
        key = convert.required_conversation(request)
        described = await self._reviewer.describe(key)
        state, run = described.state, described.last_run
        response = service_pb.GetReviewStateResponse(
            conversation=convert.conversation_out(key),
            last_reviewed_message_id=state.last_reviewed_message_id,
            last_reviewed_at=convert.optional_timestamp_out(state.last_reviewed_at),
            last_review_started_at=convert.optional_timestamp_out(state.last_review_started_at),
            last_review_completed_at=convert.optional_timestamp_out(state.last_review_completed_at),
            last_review_status=STATUSES.get(
                state.last_review_status or "", service_pb.REVIEW_STATUS_UNSPECIFIED
            ),
            last_review_failed_at=convert.optional_timestamp_out(state.last_review_failed_at),
            failure_count=state.failure_count,
            last_error=state.last_error or "",
            pending_input=state.pending_input,
            turns_since_review=state.turns_since_review,
            review_running=state.claim_token is not None,
            unread_messages=described.unread,
            backlog=state.backlog,
        )
        if run is not None:
            record = run.record
            response.last_run.CopyFrom(
                service_pb.ReviewRun(
                    id=run.id,
                    status=STATUSES[record.status],
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
                    started_at=convert.timestamp_out(run.started_at),
                    completed_at=convert.timestamp_out(run.completed_at),
                    ops_deferred=record.deferred,
                    skipped_operations=[
                        service_pb.SkippedOperation(
                            index=op.index, action=op.action, reason=op.reason
                        )
                        for op in record.skipped_ops
                    ],
                )
            )
        return response


def fill_review(target: service_pb.ConversationReview, result: ReviewResult) -> None:
    """Write one review's result into `target`."""
    target.conversation.CopyFrom(convert.conversation_out(result.key))
    target.status = STATUSES[result.status]
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
