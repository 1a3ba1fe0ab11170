"""Operations on a data directory: `memoryd backup`, `restore` and `check`.

They run in the CLI's process, on the database itself. A backup and a check work while a server
is serving (a snapshot through SQLite's backup API; on PostgreSQL, one REPEATABLE READ
transaction); a restore refuses to run while one holds the data directory, checks the backup
first, and keeps the database it replaces. On PostgreSQL, backup and restore are PostgreSQL's
own tools (pg_dump, or continuous archiving), which memoryd does not wrap: both commands refuse
and say so.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from memoryd import data_directory
from memoryd.domain import prompt_files as render_rules
from memoryd.domain.prompt_files import PROMPT_FILES
from memoryd.domain.resources import MutationSource, ResourceKey, prompt_file_path
from memoryd.domain.tokens import count_tokens
from memoryd.errors import FailedPrecondition, InvalidArgument, MemorydError
from memoryd.log_names import hashed
from memoryd.services import transfer
from memoryd.storage import database as databases
from memoryd.storage import (
    maintenance,
    memory_reads,
    resource_store,
    scrub,
    server_keys,
    vector_reads,
)
from memoryd.storage.engine import engine_for, engine_of
from memoryd.storage.location import DatabaseLocation
from memoryd.storage.migrations import latest_version, schema_version
from memoryd.storage.postgres.settings import PostgresSettings
from memoryd.storage.transaction import Transaction

DATABASE = data_directory.DATABASE_FILE
# The migrations that brought a part of the schema (an older database may lack it).
PENDING_SCRUBS_VERSION = 10  # the migration that records erasures waiting for the WAL
VECTORS_VERSION = 12  # the migration that adds vectors


@dataclasses.dataclass(slots=True)
class CheckReport:
    """What `memoryd check` found: problems (unhealthy), notes (worth knowing), and counts."""

    problems: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    # Erasures whose text may still be in the WAL: (erased_at, what), oldest first.
    erasures_waiting: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    # Databases `memoryd restore` replaced, still in the data directory.
    replaced_databases: list[str] = dataclasses.field(default_factory=list)
    # Each embedding model's vectors and queue, newest model first (semantic search).
    embedding_models: list[dict[str, object]] = dataclasses.field(default_factory=list)
    schema_version: int = 0
    messages: int = 0
    memories: int = 0
    prompt_files: int = 0

    @property
    def healthy(self) -> bool:
        """No problem was found."""
        return not self.problems


def backup(home: Path, target: Path, store: DatabaseLocation) -> int:
    """An online backup of the data directory's database to `target`; its size in bytes."""
    _refuse_without_file(store, "backup")
    database = _database(home)
    if target.resolve() == database.resolve():
        raise InvalidArgument("the backup must not be written over the database itself")
    return maintenance.backup(database, target)


def check(home: Path, store: DatabaseLocation) -> CheckReport:
    """Integrity, every word index, no orphaned rows, a known schema, prompt files equal to a
    fresh render of their rows (and to the files on disk) — on a snapshot of the database."""
    report = CheckReport()
    try:
        with _snapshot(home, store) as connection:
            _check_database(connection, report)
            _check_prompt_files(connection, home, report)
            _check_erasures(connection, report)
            _check_vectors(connection, report)
    except maintenance.Unreadable as error:
        report.problems.append(f"the database cannot be read: {error}")
    _check_replaced(home, report)
    return report


def discard_replaced(home: Path) -> list[Path]:
    """Delete the databases `memoryd restore` replaced (they may hold what was erased since);
    returns what was deleted."""
    removed = []
    for path in data_directory.replaced_databases(home):
        path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def log_names(home: Path, identifiers: list[str], store: DatabaseLocation) -> dict[str, str]:
    """What log lines written with log_identifiers = "hashed" call each identifier."""
    with _snapshot(home, store) as connection:
        if not _has(connection, PENDING_SCRUBS_VERSION):
            raise FailedPrecondition(
                f"the database in {home} has no log key yet: start the server once to migrate it"
            )
        key = server_keys.log_names_key(connection)
    return {identifier: hashed(identifier, key) for identifier in identifiers}


def _has(connection: Transaction, version: int) -> bool:
    """Whether the database has what migration `version` brought."""
    return schema_version(connection) >= version


def _check_vectors(connection: Transaction, report: CheckReport) -> None:
    """The embedding models' progress, and no vector of a message or row that is gone."""
    if not _has(connection, VECTORS_VERSION):
        return
    report.embedding_models = [
        {
            "provider": provider,
            "model": model,
            "dimension": dimension,
            "embedded_messages": counts.embedded_messages,
            "waiting_messages": counts.pending_messages,
            "embedded_memories": counts.embedded_memories,
            "waiting_memories": counts.pending_memories,
        }
        for provider, model, dimension, counts in vector_reads.model_progress(connection)
    ]
    if report.embedding_models:
        newest = report.embedding_models[0]
        waiting = int(str(newest["waiting_messages"])) + int(str(newest["waiting_memories"]))
        if waiting:
            report.notes.append(
                f"{waiting:,} message(s) and row(s) wait for a vector of {newest['model']} "
                "(the server embeds them in the background; searches find them by words meanwhile)"
            )
    orphans = vector_reads.orphaned_vectors(connection)
    if orphans:
        report.problems.append(f"{orphans} vector(s) of messages or memory rows that are gone")


def _check_erasures(connection: Transaction, report: CheckReport) -> None:
    if not _has(connection, PENDING_SCRUBS_VERSION):
        return
    report.erasures_waiting = scrub.pending(connection)
    if report.erasures_waiting:
        report.notes.append(
            engine_of(connection).erasure_wait(
                len(report.erasures_waiting), report.erasures_waiting[0][0], DATABASE
            )
        )


def _check_replaced(home: Path, report: CheckReport) -> None:
    report.replaced_databases = [path.name for path in data_directory.replaced_databases(home)]
    if report.replaced_databases:
        report.notes.append(
            f"{', '.join(report.replaced_databases)}: what `memoryd restore` replaced, kept in "
            "the data directory; it may hold data erased since (`memoryd discard-replaced` "
            "deletes it)"
        )


def restore(home: Path, source: Path, store: DatabaseLocation) -> Path | None:
    """Replace the data directory's database with the backup at `source`, after checking it.
    Refused while a server holds the directory. Returns where the replaced database was kept
    (None when there was none)."""
    _refuse_without_file(store, "restore")
    if not source.is_file():
        raise InvalidArgument(f"{source} is not a file")
    with _home_locked(home):
        verdict = CheckReport()
        try:
            with maintenance.snapshot(source) as connection:
                _check_database(connection, verdict)
        except maintenance.Unreadable as error:
            raise FailedPrecondition(
                f"{source} is not a usable memoryd database, nothing was changed: {error}"
            ) from None
        if not verdict.healthy:
            raise FailedPrecondition(
                f"{source} failed its checks, nothing was changed: " + "; ".join(verdict.problems)
            )
        database = home / DATABASE
        kept = None
        if database.exists():
            stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
            kept = home / f"{data_directory.REPLACED_PREFIX}{stamp}"
            for suffix in ("", "-wal", "-shm"):
                current = Path(f"{database}{suffix}")
                if current.exists():
                    current.replace(Path(f"{kept}{suffix}"))
        maintenance.backup(source, database)
        return kept


def _check_database(connection: Transaction, report: CheckReport) -> None:
    report.problems += maintenance.problems(connection)
    report.schema_version = schema_version(connection)
    known = latest_version()
    if report.schema_version > known:
        report.problems.append(
            f"schema version {report.schema_version} is newer than this memoryd knows ({known})"
        )
    elif report.schema_version < known:
        report.notes.append(
            f"schema version {report.schema_version}; the server migrates it to {known} at start"
        )
    report.messages, report.memories = maintenance.counts(connection)


def _check_prompt_files(connection: Transaction, home: Path, report: CheckReport) -> None:
    """Each prompt file against its current revision. On PostgreSQL, replicas may serve the
    store from other data directories: a file of an earlier revision, or none, is then what
    this directory's last own write left, a note and not a problem; a file that is no revision
    at all (edited by hand, cut short) is a problem everywhere."""
    replicas = engine_of(connection).replicas
    for owner in maintenance.prompt_file_owners(connection):
        agent_id, owner_id = owner.agent_id, owner.owner_id
        records = memory_reads.render_input(connection, owner)
        for file in PROMPT_FILES:
            rendered = render_rules.render(file, records, count_tokens).text
            key = ResourceKey(agent_id, file.resource_type, owner_id)
            current = resource_store.current(connection, key)
            label = f"{file.file_name} of agent {agent_id!r}, owner {owner_id!r}"
            if current is None:
                if rendered.strip():
                    report.problems.append(f"{label} has rows to show but no revision")
                continue
            report.prompt_files += 1
            if current.content != rendered:
                if current.mutation_source == MutationSource.ROLLBACK:
                    report.notes.append(
                        f"{label} is a rollback to an earlier revision; the next change of its "
                        "rows renders it again"
                    )
                else:
                    report.problems.append(f"{label} differs from a fresh render of its rows")
            path = home / prompt_file_path(agent_id, owner_id, file.resource_type)
            try:
                on_disk = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                on_disk = None
            if on_disk == current.content:
                continue
            earlier = (
                None if on_disk is None else resource_store.revision_with(connection, key, on_disk)
            )
            if replicas and (on_disk is None or earlier is not None):
                # A replica keeps the files of its own writes: this one's is as it last wrote it.
                report.notes.append(
                    f"{label}: the file {path} is "
                    f"{'absent' if earlier is None else f'revision {earlier}'}, and revision "
                    f"{current.revision} was written through another process (each replica "
                    "keeps the files of its own writes; a server started here rewrites them)"
                )
            else:
                report.problems.append(
                    f"{label}: the file {path} is not its current revision (a server rewrites "
                    "it when it starts)"
                )


def migrate(
    home: Path,
    source: DatabaseLocation,
    target: PostgresSettings,
    progress: Callable[[int, int], None] | None = None,
) -> transfer.Copied:
    """Copy the data directory's SQLite database into the empty PostgreSQL at `target`, as an
    export imported there, then ANALYZE it. The directory is locked meanwhile (no server may
    write to what is being copied); the SQLite database stays as it was."""
    if not engine_for(source).one_file:
        raise FailedPrecondition(
            f"this memoryd keeps its data in {databases.describe(source)} already; `memoryd "
            "migrate` moves a data directory's SQLite database to PostgreSQL"
        )
    _database(home)
    with _home_locked(home, "migrating"):
        opened = databases.open_database(target)
        try:
            copied = transfer.copy_database(source, opened, progress)
            opened.refresh_statistics()
            return copied
        finally:
            opened.close()


def _refuse_without_file(store: DatabaseLocation, command: str) -> None:
    if not engine_for(store).one_file:
        raise FailedPrecondition(
            f"memoryd {command} copies SQLite's database file; this memoryd keeps its data in "
            f"{databases.describe(store)}: back it up with pg_dump and restore with pg_restore "
            "(or use PostgreSQL's continuous archiving for point-in-time recovery); `memoryd "
            "export` writes a portable copy of everything, which `memoryd import` reads on either "
            "backend"
        )


@contextlib.contextmanager
def _snapshot(home: Path, store: DatabaseLocation) -> Iterator[Transaction]:
    """One consistent view of the database: a private copy of SQLite's file, or a REPEATABLE
    READ transaction on PostgreSQL. What cannot be read raises maintenance.Unreadable."""
    if engine_for(store).one_file:
        with maintenance.snapshot(_database(home)) as connection:
            yield connection
        return
    try:
        with databases.read_snapshot(store) as connection:
            yield connection
    except (MemorydError, maintenance.Unreadable):
        raise
    except Exception as error:  # psycopg's: the server cannot be reached, or a read failed
        raise maintenance.Unreadable(f"{databases.describe(store)}: {error}") from error


def _database(home: Path) -> Path:
    database = home / DATABASE
    if not database.is_file():
        raise InvalidArgument(f"there is no memoryd database in {home}")
    return database


@contextlib.contextmanager
def _home_locked(home: Path, doing: str = "restoring") -> Iterator[None]:
    """Hold the data directory's lock as a server does, so none starts meanwhile."""
    try:
        descriptor = data_directory.lock(home)
    except data_directory.Locked as locked:
        raise FailedPrecondition(
            f"a memoryd (pid {locked.holder}) is serving {home}; stop it before {doing}"
        ) from None
    try:
        yield
    finally:
        os.close(descriptor)
