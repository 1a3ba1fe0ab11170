"""The RPCs of memoryd.v2.ResourceService: ListResources, ListRevisions, GetRevision,
DiffRevisions, RollbackResource."""

from __future__ import annotations

from memoryd.api import resource_convert as rc
from memoryd.api.context import Context
from memoryd.api.enum_tables import RESOURCE_TYPE
from memoryd.domain.conversation import check_identifier, owner_key
from memoryd.services.use_cases import Services
from memoryd_client.v2 import resource_service_pb2 as resource_pb
from memoryd_client.v2 import resource_service_pb2_grpc as resource_grpc


class ResourceServicer(resource_grpc.ResourceServiceServicer):
    """memoryd.v2.ResourceService."""

    def __init__(self, services: Services) -> None:
        self._resources = services.resources

    async def ListResources(
        self, request: resource_pb.ListResourcesRequest, context: Context
    ) -> resource_pb.ListResourcesResponse:
        agent = owner_key(agent_id=request.agent_id, owner_id="", field="request").agent_id
        kind = RESOURCE_TYPE.optional(request.type, "type")
        page = await self._resources.list_resources(
            agent,
            kind,
            check_identifier(request.scope_id, "scope_id"),
            requested_page_size=request.page_size,
            page_token=request.page_token,
        )
        return resource_pb.ListResourcesResponse(
            resources=[rc.resource_out(info) for info in page.resources],
            next_page_token=page.next_page_token,
        )

    async def ListRevisions(
        self, request: resource_pb.ListRevisionsRequest, context: Context
    ) -> resource_pb.ListRevisionsResponse:
        key = rc.resource_key_in(request.ref)
        page = await self._resources.history(
            key,
            requested_page_size=request.page_size,
            page_token=request.page_token,
            limit=request.limit,
            before=request.before_revision,
        )
        return resource_pb.ListRevisionsResponse(
            revisions=[
                rc.revision_out(revision, with_content=False) for revision in page.revisions
            ],
            next_before_revision=page.next_before,
            next_page_token=page.next_page_token,
        )

    async def GetRevision(
        self, request: resource_pb.GetRevisionRequest, context: Context
    ) -> resource_pb.GetRevisionResponse:
        found = await self._resources.show(rc.resource_key_in(request.ref), request.revision)
        return resource_pb.GetRevisionResponse(revision=rc.revision_out(found, with_content=True))

    async def DiffRevisions(
        self, request: resource_pb.DiffRevisionsRequest, context: Context
    ) -> resource_pb.DiffRevisionsResponse:
        diff = await self._resources.diff(
            rc.resource_key_in(request.ref), request.from_revision, request.to_revision
        )
        return resource_pb.DiffRevisionsResponse(
            diff=diff.text, from_label=diff.from_label, to_label=diff.to_label
        )

    async def RollbackResource(
        self, request: resource_pb.RollbackResourceRequest, context: Context
    ) -> resource_pb.RollbackResourceResponse:
        done = await self._resources.rollback(rc.resource_key_in(request.ref), request.revision)
        return resource_pb.RollbackResourceResponse(
            revision=rc.revision_out(done.revision, with_content=True),
            changed=done.changed,
            notice=done.notice,
        )
