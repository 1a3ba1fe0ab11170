"""Export and import: every record of an agent (or of one owner), out as JSON Lines and back.

An export reads one snapshot: a thread with its own read-only connection holds one read
transaction for the whole export and hands chunks of lines to the event loop through a small
bounded queue, so a slow reader slows the export (HTTP/2 flow control) and memory stays bounded;
writers are never blocked (WAL). An import stores each chunk of lines it receives as one writer
job (one transaction), checking the next chunk while one commits, never further ahead. Rows
already stored with the same values are skipped, so an import cut off part-way can be run
again; any other refusal names the line, and the chunks before it stay stored.

After an import the caches forget what it touched, and the prompt files it brought are written.
An import may store old messages as already reviewed, in conversations whose review state the
file does not carry (an export's own cursor is kept as it is).

`copy_database` is an export straight into an import, with no server: `memoryd migrate` moves a
data directory's SQLite database into an empty PostgreSQL with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import queue
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator

from memoryd.domain.conversation import ConversationKey, OwnerKey
from memoryd.domain.export_shapes import Kind
from memoryd.domain.quoting import clipped
from memoryd.domain.resources import PROMPT_FILE_NAMES, ResourceKey
from memoryd.domain.transfer import (
    VERSION,
    Record,
    Selection,
    conversation_of,
    header_line,
    parse_header,
    parse_record,
    record_line,
)
from memoryd.errors import FailedPrecondition, InvalidArgument, ResourceExhausted, Unavailable
from memoryd.services.history import HistoryService
from memoryd.services.import_activity import ImportActivity
from memoryd.services.long_term_memory import LongTermMemory
from memoryd.services.prompt_files import PromptFiles
from memoryd.storage import database, resource_store, review_store
from memoryd.storage import transfer_imports as imports
from memoryd.storage import transfer_store as store
from memoryd.storage.database import OpenedDatabase
from memoryd.storage.location import DatabaseLocation
from memoryd.storage.readers import ReaderPool
from memoryd.storage.transaction import Transaction
from memoryd.storage.writer import Writer

MAX_EXPORTS = 2
CHUNK_LINES = 500
CHUNK_CHARS = 1024 * 1024
MAX_IMPORT_CHUNK_LINES = 10_000
_QUEUED_CHUNKS = 4
_PUT_WAIT_SECONDS = 0.5
_NOTHING_YET = object()


@dataclasses.dataclass(frozen=True, slots=True)
class ExportChunk:
    """Lines of an export; the first chunk also says how many records follow the header."""

    lines: list[str]
    total_records: int


@dataclasses.dataclass(slots=True)
class ImportReport:
    """What an import did: records stored and already present, by kind."""

    lines: int = 0
    stored: Counter[Kind] = dataclasses.field(default_factory=Counter)
    present: Counter[Kind] = dataclasses.field(default_factory=Counter)
    stored_as_reviewed: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class ImportChunk:
    """One request of an import: its lines, whether to store their messages as reviewed, and
    the agent the import is held to ("": any; the first request's, repeated or left empty)."""

    lines: list[str]
    as_reviewed: bool = False
    agent_id: str = ""


@dataclasses.dataclass(slots=True)
class _Reading:
    """Where an import's reading stands: the file's version, the last kind read, and the
    conversations whose review state the file carries."""

    version: int = VERSION
    previous: Kind | None = None
    file_states: set[ConversationKey] = dataclasses.field(default_factory=set)
    # The agent every record must be of ("": any), from the first request; None before it.
    agent: str | None = None

    def hold_to(self, chunk: ImportChunk) -> None:
        """The first request names the import's agent; a later one repeats it or says none."""
        if self.agent is None:
            self.agent = chunk.agent_id
        elif chunk.agent_id and chunk.agent_id != self.agent:
            raise InvalidArgument(
                f"agent_id {clipped(chunk.agent_id)} in a later request of an import of "
                f"agent {clipped(self.agent)}: the first request names the import's agent"
            )

    def records(self, lines: list[str], report: ImportReport) -> list[Record]:
        """The records of a chunk of lines, checked (the first line of the import is the
        header); counts the lines."""
        records: list[Record] = []
        for line in lines:
            report.lines += 1
            if report.lines == 1:
                self.version = parse_header(line).version
                continue
            record = parse_record(line, report.lines, self.previous, self.version)
            owner = str(record.named("agent_id"))
            if self.agent and owner != self.agent:
                raise InvalidArgument(
                    f"line {report.lines}: a {record.kind.value} record of agent "
                    f"{clipped(owner)}, in an import of agent {clipped(self.agent)} (the "
                    "agent_id of its first request)"
                )
            self.previous = record.kind
            records.append(record)
            if record.kind is Kind.REVIEW_STATE:
                self.file_states.add(conversation_of(record))
        return records


@dataclasses.dataclass(frozen=True, slots=True)
class _StoreJob:
    """A chunk's records, and the conversations whose messages to pass over for review."""

    records: list[Record]
    as_reviewed: bool
    # Conversations whose review state comes from the file: their cursor is kept.
    file_states: frozenset[ConversationKey]


def _store_chunk(connection: Transaction, job: _StoreJob) -> imports.Stored:
    done = imports.store(connection, job.records)
    if job.as_reviewed:
        for key, messages in done.messages.items():
            if key in job.file_states:
                continue
            if review_store.pass_over(connection, key, [message_id for message_id, _ in messages]):
                done.passed_over += sum(read for _, read in messages)
    return done


_Item = ExportChunk | BaseException | None


class TransferService:
    """Export over its own read-only connections, import through the writer."""

    def __init__(
        self,
        *,
        writer: Writer,
        readers: ReaderPool,
        connection_settings: DatabaseLocation,
        history: HistoryService,
        memory: LongTermMemory,
        prompts: PromptFiles,
        imports: ImportActivity,
    ) -> None:
        self._activity = imports
        self._writer = writer
        self._readers = readers
        self._connection_settings = connection_settings
        self._history = history
        self._memory = memory
        self._prompts = prompts
        self._exports = 0

    # --- export ----------------------------------------------------------------------------------

    async def export(self, chosen: Selection) -> AsyncIterator[ExportChunk]:
        """The export of `chosen`, in chunks, from one snapshot."""
        if self._exports >= MAX_EXPORTS:
            raise ResourceExhausted(
                f"{self._exports} exports are running; at most {MAX_EXPORTS} run at once, retry "
                "when one has finished"
            )
        self._exports += 1
        chunks: queue.Queue[_Item] = queue.Queue(_QUEUED_CHUNKS)
        stop = threading.Event()

        def put(item: _Item) -> bool:
            """Hand an item over, waiting while the queue is full; False once the export was
            abandoned."""
            while not stop.is_set():
                try:
                    chunks.put(item, timeout=_PUT_WAIT_SECONDS)
                except queue.Full:
                    continue
                return True
            return False

        def produce() -> None:
            try:
                for chunk in self._read_snapshot(chosen):
                    if not put(chunk):
                        return
                put(None)
            except BaseException as error:  # noqa: BLE001 - handed to the caller, not lost
                put(error)

        thread = threading.Thread(target=produce, name="memoryd-export", daemon=True)
        thread.start()
        try:
            while True:
                item = await asyncio.to_thread(_take, chunks)
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                if isinstance(item, ExportChunk):
                    yield item
        finally:
            stop.set()
            self._exports -= 1

    def _read_snapshot(self, chosen: Selection) -> Iterator[ExportChunk]:
        with database.read_snapshot(self._connection_settings) as transaction:
            yield from _chunks(transaction, chosen)

    # --- import ----------------------------------------------------------------------------------

    async def import_lines(self, chunks: AsyncIterator[ImportChunk]) -> ImportReport:
        """Store every chunk of lines in turn (the first line is the header). The background
        embedder waits meanwhile (memoryd.services.import_activity)."""
        with self._activity.importing():
            return await self._import_lines(chunks)

    async def _import_lines(self, chunks: AsyncIterator[ImportChunk]) -> ImportReport:
        report = ImportReport()
        reading = _Reading()
        in_flight: asyncio.Future[imports.Stored] | None = None
        touched: set[ResourceKey] = set()
        try:
            async for chunk in chunks:
                self._activity.batch()
                reading.hold_to(chunk)
                lines = chunk.lines
                if len(lines) > MAX_IMPORT_CHUNK_LINES:
                    raise InvalidArgument(
                        f"a chunk of {len(lines):,} lines; the limit is "
                        f"{MAX_IMPORT_CHUNK_LINES:,} (the {report.lines:,} lines before it are "
                        "stored)"
                    )
                records = reading.records(lines, report)
                if in_flight is not None:
                    _count(await in_flight, report, touched)
                    in_flight = None
                if records:
                    job = _StoreJob(records, chunk.as_reviewed, frozenset(reading.file_states))
                    in_flight = asyncio.ensure_future(
                        self._writer.run(
                            "import",
                            functools.partial(_store_chunk, job=job),
                            rows=len(records),
                            after_commit=self._forget,
                        )
                    )
            if in_flight is not None:
                _count(await in_flight, report, touched)
                in_flight = None
            if report.lines == 0:
                raise InvalidArgument("the import is empty: the first line must be the header")
        finally:
            if in_flight is not None:  # the stream failed: the chunk in flight still commits
                done = await asyncio.gather(in_flight, return_exceptions=True)
                if isinstance(done[0], imports.Stored):
                    _count(done[0], report, touched)
            if reading.version < VERSION:  # what was stored is brought to this version's shape
                await self._writer.run("import_split_checkpoints", store.split_old_checkpoints)
            with contextlib.suppress(Unavailable):
                await self._write_prompt_files(touched)
        return report

    def _forget(self, stored: imports.Stored) -> None:
        """After a commit: the caches drop what the import changed."""
        for key in stored.conversations:
            self._history.cache.invalidate(key)
        for memory_id in stored.memory_ids:
            self._memory.rows.invalidate(memory_id)
        for resource in stored.resources:
            self._prompts.cache.invalidate(OwnerKey(resource.agent_id, resource.scope_id))

    async def _write_prompt_files(self, keys: set[ResourceKey]) -> None:
        prompt_keys = [key for key in keys if key.resource_type in PROMPT_FILE_NAMES]
        if not prompt_keys:
            return

        def current(connection: Transaction) -> list[tuple[str, str]]:
            found = []
            for key in prompt_keys:
                path = resource_store.path(connection, key)
                revision = resource_store.current(connection, key)
                if path and revision is not None:
                    found.append((path, revision.content))
            return found

        for path, content in await self._readers.read(current):
            await asyncio.to_thread(self._prompts.write_committed, path, content)


def _take(chunks: queue.Queue[_Item]) -> _Item | object:
    """The next item, or _NOTHING_YET after a short wait (so no thread waits forever on an
    abandoned export)."""
    try:
        return chunks.get(timeout=_PUT_WAIT_SECONDS)
    except queue.Empty:
        return _NOTHING_YET


def _chunks(connection: Transaction, chosen: Selection) -> Iterator[ExportChunk]:
    total = store.count(connection, chosen)
    lines = [header_line(chosen)]
    size = len(lines[0])
    for kind, row in store.read(connection, chosen):
        line = record_line(kind, tuple(row))
        if lines and (len(lines) >= CHUNK_LINES or size + len(line) > CHUNK_CHARS):
            yield ExportChunk(lines, total)
            lines, size = [], 0
        lines.append(line)
        size += len(line)
    yield ExportChunk(lines, total)


def _count(stored: imports.Stored, report: ImportReport, touched: set[ResourceKey]) -> None:
    report.stored.update(stored.stored)
    report.present.update(stored.present)
    report.stored_as_reviewed += stored.passed_over
    touched.update(stored.resources)


# --- moving between backends -----------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class Copied:
    """What `copy_database` moved: records by kind, and how many lines that was."""

    records: Counter[Kind] = dataclasses.field(default_factory=Counter)
    lines: int = 0


def copy_database(
    source: DatabaseLocation,
    target: OpenedDatabase,
    progress: Callable[[int, int], None] | None = None,
) -> Copied:
    """Everything of `source` into `target`, exactly as an export of it imported there: the
    same lines, read from one snapshot, stored a chunk per transaction. `target` must hold
    nothing yet (FailedPrecondition); `progress(records done, total)` follows each chunk."""
    with target.transaction() as connection:
        held = store.held(connection)
    if held:
        raise FailedPrecondition(
            "the target database is not empty (it holds "
            + ", ".join(f"{count:,} {what}" for what, count in held.items())
            + "); migrate into a new, empty database"
        )
    copied = Copied()
    report = ImportReport()
    reading = _Reading()
    with database.read_snapshot(source) as snapshot:
        for chunk in _chunks(snapshot, Selection("", "")):
            records = reading.records(chunk.lines, report)
            if records:
                with target.transaction() as connection:
                    job = _StoreJob(records, as_reviewed=False, file_states=frozenset())
                    done = _store_chunk(connection, job)
                copied.records.update(done.stored)
            copied.lines = report.lines
            if progress is not None:
                progress(max(report.lines - 1, 0), chunk.total_records)
    return copied
