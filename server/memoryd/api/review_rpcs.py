"""The turn and review RPCs of memoryd.v1.MemoryService: CommitTurn, ReviewNow, GetReviewState."""

from __future__ import annotations

from memoryd.api import convert
from memoryd.api.context import Context
from memoryd.api.history_convert import fill_append_results, sent_messages_in
from memoryd.api.review_convert import (
    fill_review,
    review_selection,
    review_state_out,
    turn_usage_in,
)
from memoryd.services.review import Reviewer
from memoryd.services.review_scheduler import ReviewScheduler
from memoryd.services.turns import TurnService
from memoryd_client.v1 import memory_service_pb2 as service_pb


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
