"""The use cases assembled: the model providers (`Models`), and every use case built once on the
parts it needs (`services`), for the runtime that opened the database (memoryd.runtime)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping

from memoryd import __version__
from memoryd.config import Settings, review_providers
from memoryd.config.editing import save_section
from memoryd.config.shown import effective
from memoryd.domain.conversation import ConversationKey
from memoryd.domain.paging import PageTokens
from memoryd.domain.relevance import UNCALIBRATED, Calibration
from memoryd.domain.timestamps import utc_now
from memoryd.domain.turns import TurnUsage
from memoryd.llm.chain import ProviderChain
from memoryd.llm.embeddings import EmbeddedModel, Embedder, build_embedder
from memoryd.services.coherence import Coherence
from memoryd.services.compaction import Compactor
from memoryd.services.context_composer import ContextComposer
from memoryd.services.embedding import EmbeddingService
from memoryd.services.erasure import ErasureService
from memoryd.services.evidence import Relevance
from memoryd.services.history import HistoryService
from memoryd.services.import_activity import ImportActivity
from memoryd.services.ingest import IngestService
from memoryd.services.jobs import JobService
from memoryd.services.long_term_memory import LongTermMemory
from memoryd.services.outages import Outage
from memoryd.services.overview import Overview, ServerFacts
from memoryd.services.pacing import CallerActivity, Pacing
from memoryd.services.prompt_files import PromptFiles
from memoryd.services.query_vectors import QueryVectors
from memoryd.services.recall import RecallService
from memoryd.services.recalled_context import RecalledContext
from memoryd.services.resources import ResourceService
from memoryd.services.review import Reviewer
from memoryd.services.review_scheduler import ReviewScheduler
from memoryd.services.review_tuning import ReviewTuning
from memoryd.services.search import HistorySearch
from memoryd.services.semantic import VectorCache
from memoryd.services.sessions import Sessions
from memoryd.services.transcripts import TranscriptService
from memoryd.services.transfer import TransferService
from memoryd.services.turns import TurnService
from memoryd.services.use_cases import Services
from memoryd.storage.database import Changes, OpenedDatabase
from memoryd.storage.engine import engine_for
from memoryd.storage.location import DatabaseLocation
from memoryd.storage.readers import ReaderPool
from memoryd.storage.writer import Writer


@dataclasses.dataclass(frozen=True, slots=True)
class Models:
    """The provider chains memoryd calls: the reviewer's, and compaction's (the same chain
    unless the review has a model of its own). The runtime owns and closes them."""

    review: ProviderChain
    compaction: ProviderChain

    @classmethod
    def build(cls, settings: Settings, env: Mapping[str, str]) -> Models:
        """The chains of the configured providers, in the configured order."""
        review = ProviderChain(review_providers(settings.providers, settings.memory.model), env)
        if not settings.memory.model:
            return cls(review, review)
        return cls(review, ProviderChain(settings.providers, env))

    async def close(self) -> None:
        """Close each chain's HTTP clients."""
        await self.review.close()
        if self.compaction is not self.review:
            await self.compaction.close()


def calibration_of(embedder: Embedder | None, settings: Settings) -> Calibration:
    """How hits are judged: the embedding model's calibration, its meaning floor replaced by
    [memoryd.search] min_similarity when that is set (0: meaning alone always passes, as for a
    model never calibrated)."""
    found = (embedder.calibration if embedder else None) or UNCALIBRATED
    floor = settings.search.min_similarity
    if floor == "model":
        return found
    return dataclasses.replace(found, meaning_floor=floor or None)


def services(
    settings: Settings,
    env: Mapping[str, str],
    *,
    database: OpenedDatabase,
    writers: tuple[Writer, Writer],
    readers: ReaderPool,
    changes: Changes,
    prompts: PromptFiles,
    page_tokens: PageTokens,
    models: Models,
    coherence: Coherence,
) -> Services:
    """Every use case, each built once on the parts it needs; `writers` are the writer and the
    vectors' writer (the same one on SQLite)."""
    writer, vectors_writer = writers
    history = HistoryService(writer, readers, settings.history, page_tokens, coherence)
    memory = LongTermMemory(writer, readers, prompts, page_tokens, coherence)
    embedder = build_embedder(settings, env)
    # One a process: the background workers' storage failures, one warning an outage.
    outage = Outage()
    imports = ImportActivity()
    callers = CallerActivity()
    # The embedded model's steps, while calls come: a text for each of its threads.
    paced = settings.search.embedding_threads if isinstance(embedder, EmbeddedModel) else None
    embedding = EmbeddingService(
        embedder,
        vectors_writer,
        readers,
        changes,
        pacing=Pacing(imports, callers, batch=settings.search.embedding_batch, small=paced),
        outage=outage,
    )
    query_vectors = QueryVectors(
        embedding,
        VectorCache(settings.search.vector_cache_mb, indexed=database.vector_index),
        Relevance(calibration_of(embedder, settings), settings.search.min_relevance),
    )
    search = HistorySearch(readers, query_vectors)
    recall = RecallService(readers, search)
    reviewer = Reviewer(
        writer=writer,
        readers=readers,
        prompts=prompts,
        memory=memory,
        chain=models.review,
        settings=settings.memory,
    )
    scheduler = ReviewScheduler(reviewer, readers, outage)
    composer = ContextComposer(
        readers=readers,
        history=history,
        prompts=prompts,
        settings=settings.compaction,
        coherence=coherence,
        default_window=settings.providers[0].context_window if settings.providers else None,
    )
    compactor = Compactor(
        writer=writer,
        readers=readers,
        history=history,
        prompts=prompts,
        reviewer=reviewer,
        chain=models.compaction,
        settings=settings.compaction,
        composer=composer,
        outage=outage,
    )

    def turn_committed(key: ConversationKey, usage: TurnUsage) -> None:
        scheduler.nudge(key)
        compactor.after_turn(key, usage)

    return Services(
        callers=callers,
        history=history,
        search=search,
        embedding=embedding,
        memory=memory,
        recall=recall,
        prompts=prompts,
        resources=ResourceService(writer, readers, prompts, page_tokens, memory.rows),
        erasure=ErasureService(
            home=settings.home,
            writer=writer,
            readers=readers,
            history=history,
            memory=memory,
            prompts=prompts,
            connection_settings=database.settings,
            vectors=query_vectors.cache,
        ),
        ingest=IngestService(history, imports),
        sessions=Sessions(history, reviewer, settings.compaction.review_catch_up_seconds),
        jobs=JobService(writer, memory),
        reviewer=reviewer,
        scheduler=scheduler,
        turns=TurnService(writer, history, turn_committed),
        transcripts=TranscriptService(
            writer=writer,
            readers=readers,
            history=history,
            settings=settings.realtime,
            on_input=scheduler.nudge,
        ),
        transfer=TransferService(
            imports=imports,
            writer=writer,
            readers=readers,
            connection_settings=database.settings,
            history=history,
            memory=memory,
            prompts=prompts,
        ),
        compactor=compactor,
        recalled=RecalledContext(composer, search, recall),
        overview=Overview(
            readers,
            page_tokens,
            embedding,
            server_facts(settings, env, reviewer, scheduler, database.settings),
        ),
        tuning=ReviewTuning(
            reviewer,
            scheduler,
            path=settings.config_path or settings.home / "config.toml",
            save=save_section,
            workers=settings.server.workers,
        ),
    )


def server_facts(
    settings: Settings,
    env: Mapping[str, str],
    reviewer: Reviewer,
    scheduler: ReviewScheduler,
    location: DatabaseLocation,
) -> Callable[[], ServerFacts]:
    """What GetServerInfo says of the server itself: fixed at start, but for the review's
    settings (UpdateReviewSettings retunes them)."""
    files = engine_for(location).files(location)
    started = utc_now()

    def facts() -> ServerFacts:
        current = dataclasses.replace(settings, memory=reviewer.settings)
        return ServerFacts(
            version=__version__,
            backend=settings.storage.backend,
            started_at=started,
            database_path=files[0] if files else None,
            settings_json=json.dumps(effective(current, env), indent=2),
            background_review=scheduler.enabled,
        )

    return facts
