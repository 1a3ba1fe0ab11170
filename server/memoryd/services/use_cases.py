"""The use cases a server runs, as one value: built once by memoryd.runtime.Runtime.open, and
the servicers (memoryd.api.servicer) are assembled from it."""

from __future__ import annotations

import dataclasses

from memoryd.services.compaction import Compactor
from memoryd.services.embedding import EmbeddingService
from memoryd.services.erasure import ErasureService
from memoryd.services.history import HistoryService
from memoryd.services.ingest import IngestService
from memoryd.services.jobs import JobService
from memoryd.services.long_term_memory import LongTermMemory
from memoryd.services.overview import Overview
from memoryd.services.pacing import CallerActivity
from memoryd.services.prompt_files import PromptFiles
from memoryd.services.recall import RecallService
from memoryd.services.recalled_context import RecalledContext
from memoryd.services.resources import ResourceService
from memoryd.services.review import Reviewer
from memoryd.services.review_scheduler import ReviewScheduler
from memoryd.services.review_tuning import ReviewTuning
from memoryd.services.search import HistorySearch
from memoryd.services.sessions import Sessions
from memoryd.services.transcripts import TranscriptService
from memoryd.services.transfer import TransferService
from memoryd.services.turns import TurnService


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Services:
    """The use cases, built once by Runtime.open; the servicers are assembled from this."""

    callers: CallerActivity  # marked by every call (the background embedder yields to them)
    history: HistoryService
    search: HistorySearch
    embedding: EmbeddingService
    memory: LongTermMemory
    recall: RecallService
    prompts: PromptFiles
    resources: ResourceService
    erasure: ErasureService
    ingest: IngestService
    sessions: Sessions
    jobs: JobService
    reviewer: Reviewer
    scheduler: ReviewScheduler
    turns: TurnService
    transcripts: TranscriptService
    transfer: TransferService
    compactor: Compactor
    recalled: RecalledContext
    overview: Overview
    tuning: ReviewTuning
