"""The assembled service: the data directory, the database, the writer, the readers, the use cases.

Opening takes an exclusive lock on the data directory (one memoryd per home: the design has one
writer), creates the directory and database on first start, applies migrations, then starts the
writer thread. Closing commits what is queued and closes every connection.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from memoryd import __version__, data_directory, log_names
from memoryd.config import Settings, review_providers
from memoryd.config.editing import save_section
from memoryd.config.shown import effective
from memoryd.domain import tokens
from memoryd.domain.conversation import ConversationKey
from memoryd.domain.paging import PageTokens
from memoryd.domain.relevance import UNCALIBRATED, Calibration
from memoryd.domain.timestamps import utc_now
from memoryd.domain.turns import TurnUsage
from memoryd.errors import FailedPrecondition, StartupError
from memoryd.llm.chain import ProviderChain
from memoryd.llm.embeddings import Embedder, build_embedder
from memoryd.log_events import Event
from memoryd.services.coherence import Coherence
from memoryd.services.compaction import Compactor
from memoryd.services.context_composer import ContextComposer
from memoryd.services.embedding import EmbeddingService
from memoryd.services.erasure import ErasureService
from memoryd.services.evidence import Relevance
from memoryd.services.history import HistoryService
from memoryd.services.ingest import IngestService
from memoryd.services.jobs import JobService
from memoryd.services.long_term_memory import LongTermMemory
from memoryd.services.outages import Outage
from memoryd.services.overview import Overview, ServerFacts
from memoryd.services.prompt_files import PromptFiles
from memoryd.services.recall import RecallService
from memoryd.services.recalled_context import RecalledContext
from memoryd.services.resources import ResourceService
from memoryd.services.review import Reviewer
from memoryd.services.review_scheduler import ReviewScheduler
from memoryd.services.review_tuning import ReviewTuning
from memoryd.services.search import HistorySearch, QueryVectors
from memoryd.services.semantic import VectorCache
from memoryd.services.sessions import Sessions
from memoryd.services.transcripts import TranscriptService
from memoryd.services.transfer import TransferService
from memoryd.services.turns import TurnService
from memoryd.services.use_cases import Services
from memoryd.storage import compaction_store, review_store, scrub, server_keys, transfer_store
from memoryd.storage import database as databases
from memoryd.storage.background_lock import BackgroundLock, background_lock
from memoryd.storage.database import Changes, OpenedDatabase
from memoryd.storage.readers import ReaderPool
from memoryd.storage.write_queue import WriteQueue
from memoryd.storage.writer import Writer, WriterSettings

log = logging.getLogger("memoryd.runtime")


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


@dataclasses.dataclass(slots=True, kw_only=True)
class Runtime:
    """Everything a running server holds."""

    settings: Settings
    writer: Writer
    # The vectors' own writer, where the database gives one (memoryd.storage.database).
    side_writer: Writer | None
    readers: ReaderPool
    models: Models
    services: Services
    changes: Changes
    schema_version: int
    # Where the database is: SQLite's file, or PostgreSQL's server and database.
    database: str
    # Decides which process embeds, when the store may be shared (a worker's, PostgreSQL's);
    # None for a server alone on its SQLite database (memoryd.storage.background_lock).
    background: BackgroundLock | None
    # The writers' queue, where workers share a SQLite database (memoryd.storage.write_queue).
    write_queue: WriteQueue | None
    _lock_fd: int

    @classmethod
    def open(
        cls, settings: Settings, env: Mapping[str, str], *, lock_fd: int | None = None
    ) -> Runtime:
        """Open (creating if needed) the data directory and database, ready to serve.

        `lock_fd`: a worker's data directory lock, inherited from its supervisor, which has
        already recovered what the last stop left (`prepare`); None for a server on its own.
        """
        data_directory.private_files(settings.home)
        worker = lock_fd is not None
        if lock_fd is None:
            lock_fd = _lock_home(settings.home)
        else:
            lock_fd = data_directory.inherit_lock(settings.home, lock_fd)
        try:
            database = _open_database(settings, env)
        except BaseException:
            os.close(lock_fd)
            raise
        try:
            return cls._build(settings, env, database, lock_fd, recover=not worker)
        except BaseException:
            database.close()
            os.close(lock_fd)
            raise

    @classmethod
    def _build(
        cls,
        settings: Settings,
        env: Mapping[str, str],
        database: OpenedDatabase,
        lock_fd: int,
        *,
        recover: bool,
    ) -> Runtime:
        """Recover what the last stop left (unless a supervisor did), then assemble the use
        cases on the database."""
        postgres = settings.storage.backend == "postgres"
        readers = database.readers(
            settings.storage.pool_size if postgres else settings.server.reader_threads
        )
        page_tokens = PageTokens(server_keys.page_token_key(database.autocommit))
        hashed_names = settings.server.log_identifiers == "hashed"
        log_names.use(server_keys.log_names_key(database.autocommit) if hashed_names else None)
        tokens.load()  # the first render must not pay for loading the encoding
        if recover:
            _recover(database, PromptFiles(settings.home, readers))
        else:
            # A worker's start, its supervisor's first or a restart after it died (perhaps
            # between a commit and its file): its files too, under the lock the others write by.
            starting = PromptFiles(settings.home, readers)
            with starting.files_locked():
                _resync_prompt_files(starting, database)
        writing = WriterSettings(
            max_rows=settings.storage.group_commit_max_rows,
            max_wait_seconds=settings.storage.group_commit_max_wait_ms / 1000,
            attempts=settings.storage.write_attempts,
            retry_delay_seconds=settings.storage.write_retry_delay_ms / 1000,
        )
        writer = database.writer(writing)
        changes = database.changes()
        # Other processes may write to this store: a supervisor's workers (this is one), or
        # any memoryd over the same PostgreSQL (memoryd.services.coherence).
        shared = postgres or not recover
        coherence = Coherence(shared=shared, changes=changes, readers=readers)
        # PostgreSQL's writers queue on a lock of their own.
        write_queue = WriteQueue(settings.home) if shared and not postgres else None
        if shared:
            writer.follow(coherence)
        if write_queue is not None:
            writer.queue_writes(write_queue)
        writer.start()
        side_writer = database.side_writer(writing)
        if side_writer is not None:
            side_writer.start()
        prompts = PromptFiles(settings.home, readers, coherence=coherence)
        models = Models.build(settings, env)
        services = _services(
            settings,
            env,
            database=database,
            writers=(writer, side_writer or writer),
            readers=readers,
            changes=changes,
            prompts=prompts,
            page_tokens=page_tokens,
            models=models,
            coherence=coherence,
        )
        return cls(
            settings=settings,
            writer=writer,
            side_writer=side_writer,
            readers=readers,
            models=models,
            services=services,
            changes=changes,
            schema_version=database.schema_version,
            database=databases.describe(database.settings),
            background=background_lock(database.settings) if shared else None,
            write_queue=write_queue,
            _lock_fd=lock_fd,
        )

    async def close(self) -> None:
        """Commit what is queued, close every connection, release the data directory."""
        try:
            services = self.services
            await services.scheduler.stop()
            await services.embedding.stop()
            if self.side_writer is not None:
                await self.side_writer.close()
            await services.erasure.close()
            await services.compactor.close()
            await self.models.close()
            await self.writer.close()
            if self.write_queue is not None:
                self.write_queue.close()
            self.readers.close()
            self.changes.close()
        finally:
            os.close(self._lock_fd)


def prepare(settings: Settings, env: Mapping[str, str]) -> int:
    """What a supervisor does before it starts its workers (memoryd.supervisor): lock the data
    directory, open the database (applying migrations), recover what the last stop left, close
    it. Returns the lock's descriptor, for the workers to inherit."""
    data_directory.private_files(settings.home)
    lock_fd = _lock_home(settings.home)
    try:
        database = _open_database(settings, env)
        try:
            readers = database.readers(1)
            try:
                _recover(database, PromptFiles(settings.home, readers))
            finally:
                readers.close()
        finally:
            database.close()
    except BaseException:
        os.close(lock_fd)
        raise
    return lock_fd


def _open_database(settings: Settings, env: Mapping[str, str]) -> OpenedDatabase:
    database = databases.open_database(
        databases.store_settings(settings.storage, settings.home, env)
    )
    if database.applied:
        log.info(
            "applied migrations %s",
            database.applied,
            extra={
                "event": Event.MIGRATED,
                "versions": database.applied,
                "schema_version": database.schema_version,
            },
        )
    return database


def _recover(database: OpenedDatabase, prompts: PromptFiles) -> None:
    """What the last stop left undone, before the writer thread owns the connection."""
    _resync_prompt_files(prompts, database)
    _clear_review_claims(database)
    _finish_scrubs(database)
    _split_old_checkpoints(database)
    _count_stored_tokens(database)


def calibration_of(embedder: Embedder | None, settings: Settings) -> Calibration:
    """How hits are judged: the embedding model's calibration, its meaning floor replaced by
    [memoryd.search] min_similarity when that is set (0: meaning alone always passes, as for a
    model never calibrated)."""
    found = (embedder.calibration if embedder else None) or UNCALIBRATED
    floor = settings.search.min_similarity
    if floor == "model":
        return found
    return dataclasses.replace(found, meaning_floor=floor or None)


def _services(
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
    embedding = EmbeddingService(
        embedder, vectors_writer, readers, changes, settings.search.embedding_batch, outage=outage
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
        ingest=IngestService(history),
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
            readers, page_tokens, embedding, _facts(settings, env, reviewer, scheduler)
        ),
        tuning=ReviewTuning(
            reviewer,
            scheduler,
            path=settings.config_path or settings.home / "config.toml",
            save=save_section,
            workers=settings.server.workers,
        ),
    )


def _facts(
    settings: Settings, env: Mapping[str, str], reviewer: Reviewer, scheduler: ReviewScheduler
) -> Callable[[], ServerFacts]:
    """What GetServerInfo says of the server itself: fixed at start, but for the review's
    settings (UpdateReviewSettings retunes them)."""
    sqlite = settings.storage.backend == "sqlite"
    started = utc_now()

    def facts() -> ServerFacts:
        current = dataclasses.replace(settings, memory=reviewer.settings)
        return ServerFacts(
            version=__version__,
            backend=settings.storage.backend,
            started_at=started,
            database_path=settings.database_path if sqlite else None,
            settings_json=json.dumps(effective(current, env), indent=2),
            background_review=scheduler.enabled,
        )

    return facts


def _split_old_checkpoints(database: OpenedDatabase) -> None:
    """Checkpoint resources of the version 1 format left by an import that stopped before it
    split them (memoryd.storage.transfer_store): split them now."""
    try:
        with database.transaction() as transaction:
            split = transfer_store.split_old_checkpoints(transaction)
    except FailedPrecondition as error:
        log.warning("%s", error.message, extra={"event": Event.CHECKPOINTS_NOT_SPLIT})
        return
    if split:
        log.info(
            "split checkpoint resources of an older format by owner",
            extra={"event": Event.CHECKPOINTS_SPLIT},
        )


def _finish_scrubs(database: OpenedDatabase) -> None:
    """Erasures that ended before their WAL was truncated (readers held it, then the server
    stopped): truncate now, before anything reads, and clear them."""
    through = scrub.newest_pending(database.autocommit)
    if through and databases.scrub_erased(database.settings).wal_truncated:
        with database.transaction() as transaction:
            scrub.clear_pending(transaction, through)
        log.info(
            "truncated the WAL for erasures recorded before the last stop",
            extra={"event": Event.WAL_TRUNCATED},
        )


def _resync_prompt_files(prompts: PromptFiles, database: OpenedDatabase) -> None:
    report = prompts.resync(database)
    if report.rewritten or report.moved:
        log.info(
            "rewrote %d prompt file(s) from their current revision (%d moved to a new path)",
            report.rewritten,
            report.moved,
            extra={
                "event": Event.PROMPT_FILES_RESYNCED,
                "files": report.rewritten,
                "moved": report.moved,
            },
        )
    if report.failed:
        log.error(
            "%d prompt file(s) could not be written; GetPromptContext still serves them, and "
            "the next start tries again",
            report.failed,
            extra={"event": Event.PROMPT_FILES_UNWRITTEN, "files": report.failed},
        )


def _clear_review_claims(database: OpenedDatabase) -> None:
    # Alone on the database (no other memoryd is connected to it; on SQLite the data
    # directory's lock says so), a claim left there is a stopped server's: its review is
    # retried. With other processes, claims may be theirs: a dead one's goes stale.
    if not database.alone():
        return
    with database.transaction() as transaction:
        cleared = review_store.clear_claims(transaction)
    if cleared:
        log.info(
            "%d review(s) were interrupted by the last stop; they will run again",
            cleared,
            extra={"event": Event.REVIEW_CLAIMS_CLEARED, "claims": cleared},
        )


def _lock_home(home: Path) -> int:
    try:
        return data_directory.lock(home)
    except data_directory.Locked as locked:
        raise StartupError(
            f"another memoryd (pid {locked.holder}) is already serving {home}; "
            "stop it or use another --home"
        ) from None
    except OSError as error:
        raise StartupError(f"cannot use data directory {home}: {error.strerror}") from error


def _count_stored_tokens(database: OpenedDatabase) -> None:
    """Count the tokens of messages stored before counts existed (once, after the upgrade)."""
    counted = 0
    while batch := compaction_store.uncounted(database.autocommit, 5000):
        with database.transaction() as transaction:
            compaction_store.set_token_counts(
                transaction, [(message_id, tokens.count_tokens(text)) for message_id, text in batch]
            )
        counted += len(batch)
    if counted:
        log.info(
            "counted the tokens of %d stored messages",
            counted,
            extra={"event": Event.TOKENS_COUNTED, "messages": counted},
        )
