"""The operator's RPCs of memoryd.v1.MemoryService: GetServerInfo, GetActivity, ListOwners,
ListConversations, GetMessage, ListReviewRuns, GetReviewExchange."""

from __future__ import annotations

from memoryd.api import convert
from memoryd.api.activity_convert import activity_out, activity_scope_in, range_in
from memoryd.api.context import Context
from memoryd.api.convert import conversation_out, optional_timestamp_out, timestamp_out
from memoryd.api.enum_tables import ACTIVITY_BUCKET
from memoryd.api.history_convert import fill_message
from memoryd.api.review_convert import run_out, triggers_out
from memoryd.domain.conversation import agent_key, owner_key
from memoryd.errors import InvalidArgument, Reason
from memoryd.services.overview import Overview
from memoryd.services.review_tuning import ReviewTuning
from memoryd_client.v1 import memory_service_pb2 as service_pb


class OverviewRpcs:
    """GetServerInfo, GetActivity, ListOwners, ListConversations, GetMessage, ListReviewRuns,
    GetReviewExchange."""

    def __init__(self, overview: Overview, tuning: ReviewTuning) -> None:
        self._overview = overview
        self._tuning = tuning

    async def GetServerInfo(
        self, request: service_pb.GetServerInfoRequest, context: Context
    ) -> service_pb.GetServerInfoResponse:
        info = await self._overview.server_info()
        facts = info.facts
        return service_pb.GetServerInfoResponse(
            version=facts.version,
            backend=facts.backend,
            started_at=timestamp_out(facts.started_at),
            database_bytes=info.database_bytes,
            agents=[
                service_pb.AgentSummary(
                    agent_id=agent.agent_id,
                    owners=agent.owners,
                    conversations=agent.conversations,
                )
                for agent in info.agents
            ],
            review_backlog=info.review_backlog,
            review_failures_24h=info.review_failures,
            recent_failures=[
                service_pb.FailedReview(conversation=conversation_out(key), run=run_out(run))
                for key, run in info.recent_failures
            ],
            compacted_conversations_24h=info.compacted,
            embedding_pending_messages=info.pending_messages,
            embedding_pending_memories=info.pending_memories,
            settings_json=facts.settings_json,
            background_review=facts.background_review,
            review_triggers=triggers_out(self._tuning.triggers),
            config_path=str(self._tuning.path),
        )

    async def GetActivity(
        self, request: service_pb.GetActivityRequest, context: Context
    ) -> service_pb.GetActivityResponse:
        scope = activity_scope_in(request)
        bucket = ACTIVITY_BUCKET.value(request.bucket, "bucket")
        start, end = range_in(request)
        report = await self._overview.activity(scope, bucket, start, end)
        return activity_out(report.span, report.points, ACTIVITY_BUCKET.numbers[bucket])

    async def ListOwners(
        self, request: service_pb.ListOwnersRequest, context: Context
    ) -> service_pb.ListOwnersResponse:
        agent = agent_key(agent_id=request.agent_id, field="request").agent_id
        page = await self._overview.owners(agent, request.page_size, request.page_token)
        return service_pb.ListOwnersResponse(
            owners=[
                service_pb.OwnerSummary(
                    owner_id=owner.owner_id,
                    conversations=owner.conversations,
                    active_memories=owner.active_memories,
                    archived_memories=owner.archived_memories,
                    latest_conversation_at=optional_timestamp_out(owner.latest_conversation_at),
                )
                for owner in page.owners
            ],
            next_page_token=page.next_page_token,
        )

    async def ListConversations(
        self, request: service_pb.ListConversationsRequest, context: Context
    ) -> service_pb.ListConversationsResponse:
        owner = owner_key(agent_id=request.owner.agent_id, owner_id=request.owner.owner_id)
        page = await self._overview.conversations(owner, request.page_size, request.page_token)
        return service_pb.ListConversationsResponse(
            conversations=[
                service_pb.ConversationSummary(
                    conversation=conversation_out(row.key),
                    created_at=timestamp_out(row.created_at),
                    window_start_id=row.window_start_id,
                )
                for row in page.conversations
            ],
            next_page_token=page.next_page_token,
        )

    async def GetMessage(
        self, request: service_pb.GetMessageRequest, context: Context
    ) -> service_pb.GetMessageResponse:
        owner = owner_key(agent_id=request.owner.agent_id, owner_id=request.owner.owner_id)
        message_id = _positive_id(request.id, "id", "a message id")
        response = service_pb.GetMessageResponse()
        fill_message(response.message, await self._overview.message(owner, message_id))
        return response

    async def GetReviewExchange(
        self, request: service_pb.GetReviewExchangeRequest, context: Context
    ) -> service_pb.GetReviewExchangeResponse:
        key = convert.required_conversation(request)
        run_id = _positive_id(request.run_id, "run_id", "a review run's id")
        found = await self._overview.exchange(key, run_id)
        return service_pb.GetReviewExchangeResponse(
            prompt=[
                service_pb.ReviewPromptMessage(role=role, content=content)
                for role, content in found.prompt
            ],
            answer=found.answer,
        )

    async def ListReviewRuns(
        self, request: service_pb.ListReviewRunsRequest, context: Context
    ) -> service_pb.ListReviewRunsResponse:
        key = convert.required_conversation(request)
        page = await self._overview.review_runs(key, request.page_size, request.page_token)
        return service_pb.ListReviewRunsResponse(
            runs=[run_out(run) for run in page.runs], next_page_token=page.next_page_token
        )


def _positive_id(value: int, field: str, what: str) -> int:
    """A required id: INVALID_ARGUMENT when unset or not positive."""
    if value <= 0:
        raise InvalidArgument(
            f"{field} must be {what} (positive), got {value}",
            reason=Reason.REQUIRED if value == 0 else Reason.OUT_OF_RANGE,
            field=field,
        )
    return value
