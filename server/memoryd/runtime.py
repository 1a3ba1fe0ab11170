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

from memoryd import data_directory, log_names
from memoryd.config import Settings
from memoryd.domain import tokens
from memoryd.domain.paging import PageTokens
from memoryd.errors import StartupError
from memoryd.log_events import Event
from memoryd.services import assembly, recovery
from memoryd.services.coherence import Coherence
from memoryd.services.prompt_files import PromptFiles
from memoryd.services.use_cases import Services
from memoryd.storage import database as databases
from memoryd.storage import location, server_keys
from memoryd.storage.background_lock import BackgroundLock, background_lock
from memoryd.storage.database import Changes, OpenedDatabase
from memoryd.storage.engine import engine_for
from memoryd.storage.readers import ReaderPool
from memoryd.storage.write_queue import WriteQueue
from memoryd.storage.write_terms import WriterSettings
from memoryd.storage.writer import Writer

log = logging.getLogger("memoryd.runtime")


@dataclasses.dataclass(slots=True, kw_only=True)
class Runtime:
    """Everything a running server holds."""

    settings: Settings
    writer: Writer
    # The vectors' own writer, where the database gives one (memoryd.storage.database).
    side_writer: Writer | None
    readers: ReaderPool
    models: assembly.Models
    services: Services
    changes: Changes
    schema_version: int
    # Where the database is: SQLite's file, or PostgreSQL's server and database.
    database: str
    # The store's files in the data directory, the database then its WAL (none: a server's).
    files: tuple[Path, ...]
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
        engine = engine_for(database.settings)
        # A server's store is read through a pool of connections; a file through reader threads.
        readers = database.readers(
            settings.storage.pool_size if engine.remote else settings.server.reader_threads
        )
        page_tokens = PageTokens(server_keys.page_token_key(database.autocommit))
        hashed_names = settings.server.log_identifiers == "hashed"
        log_names.use(server_keys.log_names_key(database.autocommit) if hashed_names else None)
        tokens.load()  # the first render must not pay for loading the encoding
        if recover:
            recovery.recover(database, PromptFiles(settings.home, readers))
        else:
            # A worker's start, its supervisor's first or a restart after it died (perhaps
            # between a commit and its file): its files too, under the lock the others write by.
            starting = PromptFiles(settings.home, readers)
            with starting.files_locked():
                recovery.resync_prompt_files(starting, database)
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
        shared = engine.replicas or not recover
        coherence = Coherence(shared=shared, changes=changes, readers=readers)
        # The workers sharing a file queue in the data directory (a server's writers queue on a
        # lock of their own).
        write_queue = WriteQueue(settings.home) if shared and engine.one_file else None
        if shared:
            writer.follow(coherence)
        if write_queue is not None:
            writer.queue_writes(write_queue)
        writer.start()
        side_writer = database.side_writer(writing)
        if side_writer is not None:
            side_writer.start()
        prompts = PromptFiles(settings.home, readers, coherence=coherence)
        models = assembly.Models.build(settings, env)
        services = assembly.services(
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
            files=engine.files(database.settings),
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
                recovery.recover(database, PromptFiles(settings.home, readers))
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
        location.store_settings(settings.storage, settings.home, env)
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
