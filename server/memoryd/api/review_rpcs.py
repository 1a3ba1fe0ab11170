"""The turn and review RPCs of memoryd.v1.MemoryService: CommitTurn, ReviewNow, GetReviewState,
UpdateReviewSettings."""

from __future__ import annotations

from memoryd.api import convert
from memoryd.api.context import Context
from memoryd.api.history_convert import fill_append_results, sent_messages_in
from memoryd.api.review_convert import (
    fill_review,
    review_selection,
    review_state_out,
    triggers_in,
    triggers_out,
    turn_usage_in,
)
from memoryd.errors import InvalidArgument, Reason
from memoryd.services.review import Reviewer
from memoryd.services.review_scheduler import ReviewScheduler
from memoryd.services.review_tuning import ReviewTuning
from memoryd.services.turns import TurnService
from memoryd_client.v1 import memory_service_pb2 as service_pb


class ReviewRpcs:
    """CommitTurn, ReviewNow, GetReviewState, UpdateReviewSettings."""

    def __init__(
        self,
        turns: TurnService,
        scheduler: ReviewScheduler,
        reviewer: Reviewer,
        tuning: ReviewTuning,
    ) -> None:
        self._turns = turns
        self._scheduler = scheduler
        self._reviewer = reviewer
        self._tuning = tuning

    async def CommitTurn(
        self, request: service_pb.CommitTurnRequest, context: Context
    ) -> service_pb.CommitTurnResponse:
        key = convert.required_conversation(request)
        speaker = convert.trust_in(request.trust)
        messages = sent_messages_in(request.messages)
        result = await self._turns.commit(
            key, messages, turn_usage_in(request.usage), speaker=speaker
        )
        response = service_pb.CommitTurnResponse(
            history_version=result.append.history_version,
            review_pending=result.review_pending,
        )
        response.echo_truncated = fill_append_results(
            response.results, result.append, echo=request.echo_messages
        )
        return response

    async def ReviewNow(
        self, request: service_pb.ReviewNowRequest, context: Context
    ) -> service_pb.ReviewNowResponse:
        results = await self._scheduler.review_now(review_selection(request))
        response = service_pb.ReviewNowResponse()
        for result in results:
            fill_review(response.reviews.add(), result)
        return response

    async def GetReviewState(
        self, request: service_pb.GetReviewStateRequest, context: Context
    ) -> service_pb.GetReviewStateResponse:
        key = convert.required_conversation(request)
        return review_state_out(key, await self._reviewer.state(key))

    async def UpdateReviewSettings(
        self, request: service_pb.UpdateReviewSettingsRequest, context: Context
    ) -> service_pb.UpdateReviewSettingsResponse:
        if not request.HasField("triggers"):
            raise InvalidArgument("triggers is required", reason=Reason.REQUIRED, field="triggers")
        tuned = await self._tuning.update(triggers_in(request.triggers))
        return service_pb.UpdateReviewSettingsResponse(
            triggers=triggers_out(tuned.triggers),
            config_path=str(tuned.path),
            applied=tuned.applied,
            notice=tuned.notice,
        )
