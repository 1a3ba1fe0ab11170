"""The assembled service: the data directory, the database, the writer, the readers, the use cases.

Opening takes an exclusive lock on the data directory (one memoryd per home: the design has one
writer), creates the directory and database on first start, applies migrations, then starts the
writer thread. Closing commits what is queued and closes every connection.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping
from pathlib import Path

import apsw

from memoryd import data_directory, log_names
from memoryd.config import Settings, review_providers
from memoryd.domain import tokens
from memoryd.domain.conversation import ConversationKey
from memoryd.domain.paging import PageTokens
from memoryd.domain.turns import TurnUsage
from memoryd.errors import FailedPrecondition, StartupError
from memoryd.llm.chain import ProviderChain
from memoryd.llm.embeddings import build_embedder
from memoryd.log_events import Event
from memoryd.services.compaction import Compactor
from memoryd.services.context_composer import ContextComposer
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
from memoryd.services.search import HistorySearch, QueryVectors
from memoryd.services.semantic import VectorCache
from memoryd.services.sessions import Sessions
from memoryd.services.transcripts import TranscriptService
from memoryd.services.transfer import TransferService
from memoryd.services.turns import TurnService
from memoryd.services.use_cases import Services
from memoryd.storage import compaction_store, review_store, scrub, server_keys, transfer_store
from memoryd.storage.changes import DatabaseChanges
from memoryd.storage.connection import ConnectionSettings, open_connection, writer_policy
from memoryd.storage.migrations import bundled_migrations, migrate, schema_version
from memoryd.storage.readers import ReaderPool
from memoryd.storage.writer import Writer, WriterSettings

log = logging.getLogger("memoryd.runtime")


@dataclasses.dataclass(slots=True, kw_only=True)
class Runtime:
    """Everything a running server holds."""

    settings: Settings
    writer: Writer
    readers: ReaderPool
    services: Services
    changes: DatabaseChanges
    schema_version: int
    _lock_fd: int

    @classmethod
    def open(cls, settings: Settings, env: Mapping[str, str]) -> Runtime:
        """Open (creating if needed) the data directory and database, ready to serve."""
        private_files(settings.home)
        lock_fd = _lock_home(settings.home)
        try:
            return cls._open_locked(settings, env, lock_fd)
        except BaseException:
            os.close(lock_fd)
            raise

    @classmethod
    def _open_locked(cls, settings: Settings, env: Mapping[str, str], lock_fd: int) -> Runtime:
        connection_settings = ConnectionSettings(
            path=settings.database_path,
            busy_timeout_ms=settings.storage.busy_timeout_ms,
            synchronous=settings.storage.synchronous,
            secure_delete=settings.storage.secure_delete,
        )
        try:
            connection = open_connection(connection_settings, writer_policy(connection_settings))
        except apsw.Error as error:
            raise StartupError(f"cannot open database {settings.database_path}: {error}") from error
        try:
            applied = migrate(connection, bundled_migrations())
            version = schema_version(connection)
        except BaseException:
            connection.close()
            raise
        if applied:
            log.info(
                "applied migrations %s",
                applied,
                extra={"event": Event.MIGRATED, "versions": applied, "schema_version": version},
            )
        writer = Writer(
            connection,
            WriterSettings(
                max_rows=settings.storage.group_commit_max_rows,
                max_wait_seconds=settings.storage.group_commit_max_wait_ms / 1000,
                attempts=settings.storage.write_attempts,
                retry_delay_seconds=settings.storage.write_retry_delay_ms / 1000,
            ),
        )
        readers = ReaderPool(connection_settings, settings.server.reader_threads)
        page_tokens = PageTokens(server_keys.page_token_key(connection))
        hashed_names = settings.server.log_identifiers == "hashed"
        log_names.use(server_keys.log_names_key(connection) if hashed_names else None)
        prompts = PromptFiles(settings.home, readers)
        tokens.load()  # the first render must not pay for loading the encoding
        _resync_prompt_files(prompts, connection)  # before the writer thread owns the connection
        _clear_review_claims(connection)
        _finish_scrubs(connection)
        _split_old_checkpoints(connection)
        _count_stored_tokens(connection)
        writer.start()
        history = HistoryService(writer, readers, settings.history, page_tokens)
        memory = LongTermMemory(writer, readers, prompts, page_tokens)
        changes = DatabaseChanges(connection_settings)
        embedding = EmbeddingService(
            build_embedder(settings, env), writer, readers, changes, settings.search.embedding_batch
        )
        query_vectors = QueryVectors(embedding, VectorCache(settings.search.vector_cache_mb))
        search = HistorySearch(readers, query_vectors)
        recall = RecallService(readers, search)
        resources = ResourceService(writer, readers, prompts, page_tokens)
        erasure = ErasureService(
            home=settings.home,
            writer=writer,
            readers=readers,
            history=history,
            memory=memory,
            prompts=prompts,
            connection_settings=connection_settings,
            vectors=query_vectors.cache,
        )
        ingest = IngestService(history)
        jobs = JobService(writer, memory)
        reviewer = Reviewer(
            writer=writer,
            readers=readers,
            prompts=prompts,
            memory=memory,
            chain=ProviderChain(review_providers(settings.providers, settings.memory.model), env),
            settings=settings.memory,
        )
        scheduler = ReviewScheduler(reviewer, readers)
        composer = ContextComposer(
            readers=readers,
            history=history,
            prompts=prompts,
            settings=settings.compaction,
            changes=changes,
            default_window=settings.providers[0].context_window if settings.providers else None,
        )
        compactor = Compactor(
            writer=writer,
            readers=readers,
            history=history,
            prompts=prompts,
            reviewer=reviewer,
            chain=(
                reviewer.chain
                if not settings.memory.model
                else ProviderChain(settings.providers, env)
            ),
            settings=settings.compaction,
            composer=composer,
        )

        def turn_committed(key: ConversationKey, usage: TurnUsage) -> None:
            scheduler.nudge()
            compactor.after_turn(key, usage)

        turns = TurnService(writer, history, turn_committed)
        transcripts = TranscriptService(
            writer=writer,
            readers=readers,
            history=history,
            settings=settings.realtime,
            on_input=scheduler.nudge,
        )
        transfer = TransferService(
            writer=writer,
            readers=readers,
            connection_settings=connection_settings,
            history=history,
            memory=memory,
            prompts=prompts,
        )
        services = Services(
            history=history,
            search=search,
            embedding=embedding,
            memory=memory,
            recall=recall,
            prompts=prompts,
            resources=resources,
            erasure=erasure,
            ingest=ingest,
            sessions=Sessions(history, reviewer, settings.compaction.review_catch_up_seconds),
            jobs=jobs,
            reviewer=reviewer,
            scheduler=scheduler,
            turns=turns,
            transcripts=transcripts,
            transfer=transfer,
            compactor=compactor,
            recalled=RecalledContext(composer, search, recall),
        )
        return cls(
            settings=settings,
            writer=writer,
            readers=readers,
            services=services,
            changes=changes,
            schema_version=version,
            _lock_fd=lock_fd,
        )

    async def close(self) -> None:
        """Commit what is queued, close every connection, release the data directory."""
        try:
            services = self.services
            await services.scheduler.stop()
            await services.embedding.stop()
            await services.erasure.close()
            await services.compactor.close()
            await services.reviewer.chain.close()
            if services.compactor.chain is not services.reviewer.chain:
                await services.compactor.chain.close()
            await self.writer.close()
            self.readers.close()
            self.changes.close()
        finally:
            os.close(self._lock_fd)


def _split_old_checkpoints(connection: apsw.Connection) -> None:
    """Checkpoint resources of the version 1 format left by an import that stopped before it
    split them (memoryd.storage.transfer_store): split them now."""
    try:
        with connection:
            split = transfer_store.split_old_checkpoints(connection)
    except FailedPrecondition as error:
        log.warning("%s", error.message, extra={"event": Event.CHECKPOINTS_NOT_SPLIT})
        return
    if split:
        log.info(
            "split checkpoint resources of an older format by owner",
            extra={"event": Event.CHECKPOINTS_SPLIT},
        )


def _finish_scrubs(connection: apsw.Connection) -> None:
    """Erasures that ended before their WAL was truncated (readers held it, then the server
    stopped): truncate now, before anything reads, and clear them."""
    through = scrub.newest_pending(connection)
    if through and scrub.truncate_wal(connection):
        with connection:
            scrub.clear_pending(connection, through)
        log.info(
            "truncated the WAL for erasures recorded before the last stop",
            extra={"event": Event.WAL_TRUNCATED},
        )


def _resync_prompt_files(prompts: PromptFiles, connection: apsw.Connection) -> None:
    report = prompts.resync(connection)
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


def _clear_review_claims(connection: apsw.Connection) -> None:
    # One server per home (the lock): a claim left in the database is a stopped server's, and
    # its review is retried.
    with connection:
        cleared = review_store.clear_claims(connection)
    if cleared:
        log.info(
            "%d review(s) were interrupted by the last stop; they will run again",
            cleared,
            extra={"event": Event.REVIEW_CLAIMS_CLEARED, "claims": cleared},
        )


def private_files(home: Path) -> None:
    """What memoryd writes only its own user may read: the process creates files 0600 and
    folders 0700 whatever umask it was started with (SQLite's WAL and shared-memory files take
    the database's mode), and files an older memoryd left readable are tightened. A data
    directory that others can read is the operator's choice, and only warned about."""
    os.umask(0o077)
    try:
        mode = home.stat().st_mode
    except FileNotFoundError:
        return
    if mode & 0o077:
        log.warning(
            "the data directory %s can be read by other users (mode %s); chmod 700 it",
            home,
            oct(mode & 0o777),
            extra={"event": Event.HOME_READABLE, "home": str(home), "mode": oct(mode & 0o777)},
        )
    for path in [
        *(home / name for name in (data_directory.LOCK_FILE, *data_directory.DATABASE_FILES)),
        *_tree(home / "memory"),
    ]:
        try:
            current = path.stat().st_mode
            private = 0o700 if path.is_dir() else 0o600
            if current & 0o077:
                path.chmod(private)
        except OSError:  # gone meanwhile, or not ours to change: nothing to tighten
            continue


def _tree(root: Path) -> list[Path]:
    try:
        return [root, *root.rglob("*")] if root.exists() else []
    except OSError:
        return []


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


def _count_stored_tokens(connection: apsw.Connection) -> None:
    """Count the tokens of messages stored before counts existed (once, after the upgrade)."""
    counted = 0
    while batch := compaction_store.uncounted(connection, 5000):
        with connection:
            compaction_store.set_token_counts(
                connection, [(message_id, tokens.count_tokens(text)) for message_id, text in batch]
            )
        counted += len(batch)
    if counted:
        log.info(
            "counted the tokens of %d stored messages",
            counted,
            extra={"event": Event.TOKENS_COUNTED, "messages": counted},
        )
