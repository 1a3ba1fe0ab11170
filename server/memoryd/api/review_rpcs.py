"""The RPCs of memoryd.v2.ReviewService: ReviewNow, GetReviewState, ListReviewRuns,
GetReviewExchange."""

from __future__ import annotations

from memoryd.api import convert
from memoryd.api.context import Context
from memoryd.api.review_convert import (
    fill_review,
    review_selection,
    review_state_out,
    run_out,
)
from memoryd.services.use_cases import Services
from memoryd_client.v2 import review_service_pb2 as review_pb
from memoryd_client.v2 import review_service_pb2_grpc as review_grpc


class ReviewServicer(review_grpc.ReviewServiceServicer):
    """memoryd.v2.ReviewService."""

    def __init__(self, services: Services) -> None:
        self._overview = services.overview
        self._reviewer = services.reviewer
        self._scheduler = services.scheduler

    async def ReviewNow(
        self, request: review_pb.ReviewNowRequest, context: Context
    ) -> review_pb.ReviewNowResponse:
        results = await self._scheduler.review_now(review_selection(request))
        response = review_pb.ReviewNowResponse()
        for result in results:
            fill_review(response.reviews.add(), result)
        return response

    async def GetReviewState(
        self, request: review_pb.GetReviewStateRequest, context: Context
    ) -> review_pb.GetReviewStateResponse:
        key = convert.required_conversation(request)
        return review_state_out(key, await self._reviewer.state(key))

    async def ListReviewRuns(
        self, request: review_pb.ListReviewRunsRequest, context: Context
    ) -> review_pb.ListReviewRunsResponse:
        key = convert.required_conversation(request)
        page = await self._overview.review_runs(key, request.page_size, request.page_token)
        return review_pb.ListReviewRunsResponse(
            runs=[run_out(run) for run in page.runs], next_page_token=page.next_page_token
        )

    async def GetReviewExchange(
        self, request: review_pb.GetReviewExchangeRequest, context: Context
    ) -> review_pb.GetReviewExchangeResponse:
        key = convert.required_conversation(request)
        run_id = convert.positive_id(request.run_id, "run_id", "a review run's id")
        found = await self._overview.exchange(key, run_id)
        return review_pb.GetReviewExchangeResponse(
            prompt=[
                review_pb.ReviewPromptMessage(role=role, content=content)
                for role, content in found.prompt
            ],
            answer=found.answer,
        )
