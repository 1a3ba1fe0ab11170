"""The RPCs of memoryd.v2.OverviewService: ListOwners, GetActivity."""

from __future__ import annotations

from memoryd.api.activity_convert import activity_out, activity_scope_in, range_in
from memoryd.api.context import Context
from memoryd.api.convert import optional_timestamp_out
from memoryd.api.enum_tables import ACTIVITY_BUCKET
from memoryd.domain.conversation import agent_key
from memoryd.services.use_cases import Services
from memoryd_client.v2 import overview_service_pb2 as overview_pb
from memoryd_client.v2 import overview_service_pb2_grpc as overview_grpc


class OverviewServicer(overview_grpc.OverviewServiceServicer):
    """memoryd.v2.OverviewService."""

    def __init__(self, services: Services) -> None:
        self._overview = services.overview

    async def ListOwners(
        self, request: overview_pb.ListOwnersRequest, context: Context
    ) -> overview_pb.ListOwnersResponse:
        agent = agent_key(agent_id=request.agent_id, field="request").agent_id
        page = await self._overview.owners(agent, request.page_size, request.page_token)
        return overview_pb.ListOwnersResponse(
            owners=[
                overview_pb.OwnerSummary(
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

    async def GetActivity(
        self, request: overview_pb.GetActivityRequest, context: Context
    ) -> overview_pb.GetActivityResponse:
        scope = activity_scope_in(request)
        bucket = ACTIVITY_BUCKET.value(request.bucket, "bucket")
        start, end = range_in(request)
        report = await self._overview.activity(scope, bucket, start, end)
        return activity_out(report.span, report.points, ACTIVITY_BUCKET.numbers[bucket])
