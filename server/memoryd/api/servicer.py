"""The servicers: each gRPC service assembled from its RPC groups (no handler lives here).

memoryd.v1.MemoryService has one group per use case, each in a file of its own: history_rpcs,
search_rpcs, memory_rpcs, resource_rpcs, review_rpcs, overview_rpcs, job_rpcs, transcript_rpcs and
transfer_rpcs. The handlers of memoryd.v1.CompactionService are compaction_rpcs. Errors are
raised, never turned into statuses by a handler: memoryd.api.status does that for every RPC.
"""

from __future__ import annotations

from memoryd.api.compaction_rpcs import CompactionRpcs
from memoryd.api.history_rpcs import HistoryRpcs
from memoryd.api.job_rpcs import JobRpcs
from memoryd.api.memory_rpcs import MemoryRpcs
from memoryd.api.overview_rpcs import OverviewRpcs
from memoryd.api.resource_rpcs import ResourceRpcs
from memoryd.api.review_rpcs import ReviewRpcs
from memoryd.api.search_rpcs import SearchRpcs
from memoryd.api.transcript_rpcs import TranscriptRpcs
from memoryd.api.transfer_rpcs import TransferRpcs
from memoryd.services.use_cases import Services
from memoryd_client.v1 import compaction_service_pb2_grpc as compaction_grpc
from memoryd_client.v1 import memory_service_pb2_grpc as service_grpc


class MemoryServicer(
    HistoryRpcs,
    SearchRpcs,
    MemoryRpcs,
    ResourceRpcs,
    ReviewRpcs,
    OverviewRpcs,
    JobRpcs,
    TranscriptRpcs,
    TransferRpcs,
    service_grpc.MemoryServiceServicer,
):
    """memoryd.v1.MemoryService."""

    def __init__(self, services: Services) -> None:
        s = services
        HistoryRpcs.__init__(self, s.history, s.erasure, s.ingest, s.sessions)
        SearchRpcs.__init__(self, s.search, s.embedding)
        MemoryRpcs.__init__(self, s.memory, s.recall, s.prompts)
        ResourceRpcs.__init__(self, s.resources)
        ReviewRpcs.__init__(self, s.turns, s.scheduler, s.reviewer, s.tuning)
        OverviewRpcs.__init__(self, s.overview, s.tuning)
        JobRpcs.__init__(self, s.jobs)
        TranscriptRpcs.__init__(self, s.transcripts)
        TransferRpcs.__init__(self, s.transfer)


class CompactionServicer(CompactionRpcs, compaction_grpc.CompactionServiceServicer):
    """memoryd.v1.CompactionService."""

    def __init__(self, services: Services) -> None:
        CompactionRpcs.__init__(self, services.compactor, services.recalled)
