"""The RPCs of memoryd.v2.AdminService, the operator's: GetServerInfo, UpdateReviewSettings,
GetEmbeddingStatus, ReindexEmbeddings, ExportData, ImportData, PurgeOwner."""

from __future__ import annotations

from collections.abc import AsyncIterator

from memoryd.api.context import Context
from memoryd.api.convert import conversation_out, timestamp_out
from memoryd.api.review_convert import (
    run_out,
    triggers_in,
    triggers_out,
)
from memoryd.domain.conversation import check_identifier, owner_key
from memoryd.domain.export_shapes import Kind
from memoryd.domain.transfer import selection
from memoryd.errors import InvalidArgument, Reason
from memoryd.services.transfer import ImportChunk, ImportReport
from memoryd.services.use_cases import Services
from memoryd_client.v2 import admin_service_pb2 as admin_pb
from memoryd_client.v2 import admin_service_pb2_grpc as admin_grpc


class AdminServicer(admin_grpc.AdminServiceServicer):
    """memoryd.v2.AdminService."""

    def __init__(self, services: Services) -> None:
        self._embedding = services.embedding
        self._erasure = services.erasure
        self._overview = services.overview
        self._transfer = services.transfer
        self._tuning = services.tuning

    async def GetServerInfo(
        self, request: admin_pb.GetServerInfoRequest, context: Context
    ) -> admin_pb.GetServerInfoResponse:
        info = await self._overview.server_info()
        facts = info.facts
        return admin_pb.GetServerInfoResponse(
            version=facts.version,
            backend=facts.backend,
            started_at=timestamp_out(facts.started_at),
            database_bytes=info.database_bytes,
            agents=[
                admin_pb.AgentSummary(
                    agent_id=agent.agent_id,
                    owners=agent.owners,
                    conversations=agent.conversations,
                )
                for agent in info.agents
            ],
            review_backlog=info.review_backlog,
            review_failures_24h=info.review_failures,
            recent_failures=[
                admin_pb.FailedReview(conversation=conversation_out(key), run=run_out(run))
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

    async def UpdateReviewSettings(
        self, request: admin_pb.UpdateReviewSettingsRequest, context: Context
    ) -> admin_pb.UpdateReviewSettingsResponse:
        if not request.HasField("triggers"):
            raise InvalidArgument("triggers is required", reason=Reason.REQUIRED, field="triggers")
        tuned = await self._tuning.update(triggers_in(request.triggers))
        return admin_pb.UpdateReviewSettingsResponse(
            triggers=triggers_out(tuned.triggers),
            config_path=str(tuned.path),
            applied=tuned.applied,
            notice=tuned.notice,
        )

    async def GetEmbeddingStatus(
        self, request: admin_pb.GetEmbeddingStatusRequest, context: Context
    ) -> admin_pb.GetEmbeddingStatusResponse:
        status = await self._embedding.status()
        response = admin_pb.GetEmbeddingStatusResponse(
            enabled=status.enabled,
            provider=status.provider,
            model=status.model,
            dimension=status.dimension,
            last_error=status.last_error,
        )
        if status.counts is not None:
            response.embedded_messages = status.counts.embedded_messages
            response.embedded_memories = status.counts.embedded_memories
            response.pending_messages = status.counts.pending_messages
            response.pending_memories = status.counts.pending_memories
            response.live_messages = status.counts.live_messages
            response.other_model_vectors = status.counts.other_model_vectors
        return response

    async def ReindexEmbeddings(
        self, request: admin_pb.ReindexEmbeddingsRequest, context: Context
    ) -> admin_pb.ReindexEmbeddingsResponse:
        messages, memories = await self._embedding.reindex()
        return admin_pb.ReindexEmbeddingsResponse(
            queued_messages=messages, queued_memories=memories
        )

    async def ExportData(
        self, request: admin_pb.ExportDataRequest, context: Context
    ) -> AsyncIterator[admin_pb.ExportDataResponse]:
        chosen = selection(request.agent_id, request.owner_id)
        async for chunk in self._transfer.export(chosen):
            yield admin_pb.ExportDataResponse(lines=chunk.lines, total_records=chunk.total_records)

    async def ImportData(
        self, request_iterator: AsyncIterator[admin_pb.ImportDataRequest], context: Context
    ) -> admin_pb.ImportDataResponse:
        report = await self._transfer.import_lines(_lines(request_iterator))
        return _report_out(report)

    async def PurgeOwner(
        self, request: admin_pb.PurgeOwnerRequest, context: Context
    ) -> admin_pb.PurgeOwnerResponse:
        check_identifier(request.owner_id, "owner_id", required=True)
        owner = owner_key(agent_id=request.agent_id, owner_id=request.owner_id, field="request")
        receipt = await self._erasure.purge_owner(owner)
        return admin_pb.PurgeOwnerResponse(
            erased=[
                admin_pb.ErasedRows(table=table, rows=rows)
                for table, rows in sorted(receipt.counts.items())
            ],
            prompt_files_removed=receipt.files_removed,
            wal_truncated=receipt.wal_truncated,
            statistics_rebuilt=receipt.statistics_rebuilt,
            residual_files=receipt.residual_files,
        )


async def _lines(
    requests: AsyncIterator[admin_pb.ImportDataRequest],
) -> AsyncIterator[ImportChunk]:
    async for request in requests:
        # The agent as the guard read it (memoryd.api.access: the same selection).
        agent = selection(request.agent_id, "").agent_id
        yield ImportChunk(list(request.lines), request.as_reviewed, agent)


def _report_out(report: ImportReport) -> admin_pb.ImportDataResponse:
    response = admin_pb.ImportDataResponse(
        lines=report.lines,
        stored=sum(report.stored.values()),
        present=sum(report.present.values()),
        stored_as_reviewed=report.stored_as_reviewed,
    )
    for kind in Kind:
        if report.stored[kind] or report.present[kind]:
            response.records.add(
                record=kind.value, stored=report.stored[kind], present=report.present[kind]
            )
    return response
