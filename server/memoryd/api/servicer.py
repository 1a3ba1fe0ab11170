"""The servicers: each gRPC service assembled from its RPC groups (no handler lives here).

memoryd.v1.MemoryService has one group per use case, each in a file of its own: history_rpcs,
search_rpcs, memory_rpcs, resource_rpcs, review_rpcs, job_rpcs, transcript_rpcs and
transfer_rpcs. The handlers of memoryd.v1.CompactionService are compaction_rpcs. Errors are
raised, never turned into statuses by a handler: memoryd.api.status does that for every RPC.
"""

from __future__ import annotations

from memoryd.api.compaction_rpcs import CompactionRpcs
from memoryd.api.history_rpcs import HistoryRpcs
from memoryd.api.job_rpcs import JobRpcs
from memoryd.api.memory_rpcs import MemoryRpcs
from memoryd.api.resource_rpcs import ResourceRpcs
from memoryd.api.review_rpcs import ReviewRpcs
from memoryd.api.search_rpcs import SearchRpcs
from memoryd.api.transcript_rpcs import TranscriptRpcs
from memoryd.api.transfer_rpcs import TransferRpcs
from memoryd.services.compaction import Compactor
from memoryd.services.embedding import EmbeddingService
from memoryd.services.erasure import ErasureService
from memoryd.services.history import HistoryService
from memoryd.services.ingest import IngestService
from memoryd.services.jobs import JobService
from memoryd.services.long_term_memory import LongTermMemory
from memoryd.services.prompt_files import PromptFiles
from memoryd.services.recall import RecallService
from memoryd.services.recalled_context import RecalledContext
from memoryd.services.resources import ResourceService
from memoryd.services.review import Reviewer
from memoryd.services.review_scheduler import ReviewScheduler
from memoryd.services.search import HistorySearch
from memoryd.services.sessions import Sessions
from memoryd.services.transcripts import TranscriptService
from memoryd.services.transfer import TransferService
from memoryd.services.turns import TurnService
from memoryd_client.v1 import compaction_service_pb2_grpc as compaction_grpc
from memoryd_client.v1 import memory_service_pb2_grpc as service_grpc


class MemoryServicer(
    HistoryRpcs,
    SearchRpcs,
    MemoryRpcs,
    ResourceRpcs,
    ReviewRpcs,
    JobRpcs,
    TranscriptRpcs,
    TransferRpcs,
    service_grpc.MemoryServiceServicer,
):
    """memoryd.v1.MemoryService."""

    def __init__(
        self,
        *,
        history: HistoryService,
        search: HistorySearch,
        embedding: EmbeddingService,
        memory: LongTermMemory,
        recall: RecallService,
        prompts: PromptFiles,
        resources: ResourceService,
        erasure: ErasureService,
        ingest: IngestService,
        sessions: Sessions,
        jobs: JobService,
        turns: TurnService,
        scheduler: ReviewScheduler,
        reviewer: Reviewer,
        transcripts: TranscriptService,
        transfer: TransferService,
    ) -> None:
        HistoryRpcs.__init__(self, history, erasure, ingest, sessions)
        SearchRpcs.__init__(self, search, embedding)
        MemoryRpcs.__init__(self, memory, recall, prompts)
        ResourceRpcs.__init__(self, resources)
        ReviewRpcs.__init__(self, turns, scheduler, reviewer)
        JobRpcs.__init__(self, jobs)
        TranscriptRpcs.__init__(self, transcripts)
        TransferRpcs.__init__(self, transfer)


class CompactionServicer(CompactionRpcs, compaction_grpc.CompactionServiceServicer):
    """memoryd.v1.CompactionService."""

    def __init__(self, *, compactor: Compactor, recalled: RecalledContext) -> None:
        CompactionRpcs.__init__(self, compactor, recalled)
