"""The export and import RPCs of memoryd.v1.MemoryService: ExportData, ImportData."""

from __future__ import annotations

from collections.abc import AsyncIterator

from memoryd.api.context import Context
from memoryd.domain.export_shapes import Kind
from memoryd.domain.transfer import selection
from memoryd.services.transfer import ImportChunk, ImportReport, TransferService
from memoryd_client.v1 import memory_service_pb2 as service_pb


class TransferRpcs:
    """ExportData, ImportData."""

    def __init__(self, transfer: TransferService) -> None:
        self._transfer = transfer

    async def ExportData(
        self, request: service_pb.ExportDataRequest, context: Context
    ) -> AsyncIterator[service_pb.ExportDataResponse]:
        chosen = selection(request.agent_id, request.owner_id)
        async for chunk in self._transfer.export(chosen):
            yield service_pb.ExportDataResponse(
                lines=chunk.lines, total_records=chunk.total_records
            )

    async def ImportData(
        self, request_iterator: AsyncIterator[service_pb.ImportDataRequest], context: Context
    ) -> service_pb.ImportDataResponse:
        report = await self._transfer.import_lines(_lines(request_iterator))
        return _report_out(report)


async def _lines(
    requests: AsyncIterator[service_pb.ImportDataRequest],
) -> AsyncIterator[ImportChunk]:
    async for request in requests:
        # The agent as the guard read it (memoryd.api.access: the same selection).
        agent = selection(request.agent_id, "").agent_id
        yield ImportChunk(list(request.lines), request.as_reviewed, agent)


def _report_out(report: ImportReport) -> service_pb.ImportDataResponse:
    response = service_pb.ImportDataResponse(
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
