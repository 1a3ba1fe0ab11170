"""Long-term memory use cases: store, get, list, update, archive, restore, delete.

Every write runs in the writer's transaction together with the re-render of the owner's prompt
files (when the change can affect them) and the revisions it produces; after the commit the
files are written and the caches updated, in commit order. A refused write raises before
anything is changed, and the writer rolls back its savepoint, so nothing is half-written.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable

from memoryd.domain.answers import memory_bytes, page_of, source_bytes
from memoryd.domain.conversation import OwnerKey
from memoryd.domain.jobs import JobStatus
from memoryd.domain.memories import (
    Caller,
    MemoryRecord,
    PromptTarget,
    ScopeType,
    StoreRequest,
    check_value,
)
from memoryd.domain.memory_admission import admit_new
from memoryd.domain.memory_queries import (
    ListFilter,
    Locator,
    SourceRow,
    Visible,
    guest_visibility,
    visible_to_guest,
)
from memoryd.domain.memory_sources import SourceType, source_info
from memoryd.domain.messages import Trust
from memoryd.domain.paging import PageTokens, TokenKind, page_size, request_fingerprint
from memoryd.domain.resources import MutationSource
from memoryd.domain.timestamps import to_text, utc_now
from memoryd.errors import InvalidArgument, NotFound
from memoryd.services import memory_changes
from memoryd.services.coherence import Coherence
from memoryd.services.prompt_files import PromptFiles
from memoryd.services.prompt_state import CommittedRender
from memoryd.services.read_through import ReadThroughCache
from memoryd.storage import jobs
from memoryd.storage import memory_reads as reads
from memoryd.storage import memory_writes as writes
from memoryd.storage.readers import ReaderPool
from memoryd.storage.transaction import Transaction
from memoryd.storage.writer import Writer

DEFAULT_LIST_SIZE = 20
DEFAULT_SOURCES_PAGE = 100
MAX_LIST_SIZE = 1000


@dataclasses.dataclass(frozen=True, slots=True)
class Change:
    """What a write did: the row after it (None when erased), the row before, the cause."""

    record: MemoryRecord | None
    before: MemoryRecord | None
    mutation_source: MutationSource
    owner: OwnerKey

    @property
    def memory_id(self) -> int:
        """The row's id."""
        found = self.record or self.before
        return found.id if found is not None else 0

    @property
    def touches_prompt(self) -> bool:
        """Whether the prompt files may change: the row rendered before or renders now."""
        return any(
            record is not None
            and not record.archived
            and record.prompt_target is not PromptTarget.NONE
            for record in (self.record, self.before)
        )


@dataclasses.dataclass(frozen=True, slots=True)
class Committed:
    """A write's change and the prompt render committed with it (if any)."""

    change: Change
    render: CommittedRender | None

    @property
    def record(self) -> MemoryRecord:
        """The row as committed, for writes that keep the row."""
        if self.change.record is None:  # pragma: no cover - only deletes erase the row
            message = f"{self.change.mutation_source} committed no row"
            raise RuntimeError(message)
        return self.change.record


@dataclasses.dataclass(frozen=True, slots=True)
class SourcePage:
    """One page of ListMemorySources."""

    sources: list[SourceRow]
    next_page_token: str


@dataclasses.dataclass(frozen=True, slots=True)
class MemoryPage:
    """One page of ListMemories."""

    records: list[MemoryRecord]
    next_page_token: str


Mutation = Callable[[Transaction, dt.datetime], Change]


class LongTermMemory:
    """Memory rows over the writer, the readers, the prompt files and the row cache."""

    def __init__(
        self,
        writer: Writer,
        readers: ReaderPool,
        prompts: PromptFiles,
        tokens: PageTokens,
        coherence: Coherence,
        *,
        cache_capacity: int = 65536,
    ) -> None:
        self._writer = writer
        self._tokens = tokens
        self._readers = readers
        self._prompts = prompts
        self._coherence = coherence
        # The seed's ETS Store: rows by id, filled on reads, invalidated after every write.
        self.rows: ReadThroughCache[int, MemoryRecord] = ReadThroughCache(
            cache_capacity, "memory_rows"
        )
        coherence.track(self.rows)

    # --- writes ---------------------------------------------------------------------------------

    async def store(self, request: StoreRequest) -> tuple[MemoryRecord, bool]:
        """memory_store / memory_add: by id (replace the value) or by key (upsert)."""
        caller = request.caller
        if request.id:
            value = check_value(request.value)

            def replace(connection: Transaction, now: dt.datetime) -> Change:
                stored = memory_changes.set_value(
                    connection,
                    caller.owner,
                    Locator(id=request.id),
                    value=value,
                    metadata_json=None,
                    trust=request.trust,
                    now=now,
                    category=request.category,
                )
                return Change(
                    stored.record, stored.before, MutationSource.MEMORY_STORE, caller.owner
                )

            committed = await self._submit(replace)
            return committed.record, False

        fact = admit_new(request)

        def upsert(connection: Transaction, now: dt.datetime) -> Change:
            stored = memory_changes.upsert(
                connection, fact, source_info(caller), now, job_id=caller.job_id
            )
            if caller.job_id is not None and request.run_id:
                jobs.start_run(connection, caller.owner, caller.job_id, request.run_id, now)
            return Change(stored.record, stored.before, MutationSource.MEMORY_STORE, caller.owner)

        committed = await self._submit(upsert)
        return committed.record, committed.change.before is None

    async def update(
        self,
        owner: OwnerKey,
        locator: Locator,
        *,
        value: str,
        metadata_json: str | None,
        trust: Trust,
    ) -> MemoryRecord:
        """memory_update: a blank value keeps the stored one; metadata is shallow-merged."""
        new_value = check_value(value) if value.strip() else None

        def update(connection: Transaction, now: dt.datetime) -> Change:
            stored = memory_changes.set_value(
                connection,
                owner,
                locator,
                value=new_value,
                metadata_json=metadata_json,
                trust=trust,
                now=now,
            )
            return Change(stored.record, stored.before, MutationSource.MEMORY_UPDATE, owner)

        committed = await self._submit(update)
        return committed.record

    async def archive(
        self, owner: OwnerKey, memory_id: int, *, reason: str | None, archived_by: str, trust: Trust
    ) -> MemoryRecord:
        """Forget a row (archived, kept)."""

        def archive(connection: Transaction, now: dt.datetime) -> Change:
            stored = memory_changes.archive(
                connection,
                owner,
                memory_id,
                reason=reason,
                archived_by=archived_by,
                trust=trust,
                now=now,
            )
            return Change(stored.record, stored.before, MutationSource.MEMORY_ARCHIVE, owner)

        committed = await self._submit(archive)
        return committed.record

    async def restore(self, owner: OwnerKey, memory_id: int, *, trust: Trust) -> MemoryRecord:
        """Un-archive a row of the caller; the prompt files are re-rendered."""

        def restore(connection: Transaction, now: dt.datetime) -> Change:
            stored = memory_changes.restore(connection, owner, memory_id, trust=trust, now=now)
            return Change(stored.record, stored.before, MutationSource.MEMORY_RESTORE, owner)

        committed = await self._submit(restore)
        return committed.record

    async def delete(self, owner: OwnerKey, locator: Locator, *, trust: Trust) -> int:
        """Erase a row; returns its id, 0 when there was none (idempotent)."""

        def delete(connection: Transaction, _now: dt.datetime) -> Change:
            before = memory_changes.delete(connection, owner, locator, trust=trust)
            return Change(None, before, MutationSource.MEMORY_DELETE, owner)

        committed = await self._submit(delete)
        return committed.change.memory_id

    async def _submit(self, mutation: Mutation) -> Committed:
        return await self._writer.run(
            "memory_write",
            lambda transaction: self._run(transaction, mutation),
            after_commit=self._publish,
        )

    def _run(self, connection: Transaction, mutation: Mutation) -> Committed:
        now = utc_now()
        change = mutation(connection, now)
        render = None
        if change.touches_prompt:
            render = self._prompts.render_in_transaction(
                connection,
                change.owner,
                mutation_source=change.mutation_source,
                provenance={"memory_ids": [change.memory_id], "at": to_text(now)},
                now=now,
            )
        return Committed(change, render)

    def _publish(self, committed: Committed) -> None:
        if committed.change.memory_id:
            self.rows.invalidate(committed.change.memory_id)
        if committed.render is not None:
            self._prompts.publish(committed.render)

    # --- reads ----------------------------------------------------------------------------------

    async def get(self, caller: Caller, locator: Locator, trust: Trust) -> MemoryRecord:
        """One row of the caller, archived or not; to a guest, only its conversation's notes
        (any other row is NOT_FOUND, as a row of another owner is)."""
        record = await self._get(caller.owner, locator)
        if trust is Trust.GUEST and not visible_to_guest(record, caller):
            raise NotFound(f"{locator.describe()} not found")
        return record

    async def _get(self, owner: OwnerKey, locator: Locator) -> MemoryRecord:
        if locator.id:
            await self._coherence.check()
            cached = self.rows.get(locator.id)
            if cached is None:
                token = self.rows.begin()
                cached = await self._readers.read(
                    lambda connection: reads.get_by_id(connection, locator.id)
                )
                if cached is not None:
                    self.rows.fill(locator.id, cached, token)
            if cached is None or not cached.belongs_to(owner):
                raise NotFound(f"{locator.describe()} not found")
            return cached
        found = await self._readers.read(lambda connection: writes.find(connection, owner, locator))
        if found is None:
            raise NotFound(f"{locator.describe()} not found")
        return found

    async def list_memories(
        self,
        visible: Visible,
        filters: ListFilter,
        *,
        requested_page_size: int,
        page_token: str,
    ) -> MemoryPage:
        """The caller's rows, most recently updated first, in pages."""
        if requested_page_size < 0:
            raise InvalidArgument(f"page_size must not be negative, got {requested_page_size}")
        if requested_page_size > MAX_LIST_SIZE:
            raise InvalidArgument(
                f"page_size is {requested_page_size}; the limit is {MAX_LIST_SIZE}"
            )
        size = requested_page_size or DEFAULT_LIST_SIZE
        bound_to = request_fingerprint(repr((visible, filters)))
        after = self._tokens.memories_cursor(page_token, bound_to) if page_token else None
        found = await self._readers.read(
            lambda connection: reads.list_page(
                connection, visible, filters, after=after, limit=size + 1
            )
        )
        kept, more = page_of(found, size, memory_bytes)
        token = ""
        if more:
            last = kept[-1]
            token = self._tokens.memories_token((to_text(last.updated_at), last.id), bound_to)
        return MemoryPage(kept, token)

    async def sources(
        self,
        owner: OwnerKey,
        *,
        status: JobStatus | None,
        source_type: SourceType | None,
        requested_page_size: int,
        page_token: str,
    ) -> SourcePage:
        """The owner's memory sources, most recently updated first, in pages; None: any."""
        size = page_size(requested_page_size, default=DEFAULT_SOURCES_PAGE, maximum=MAX_LIST_SIZE)
        status_text, type_text = str(status or ""), str(source_type or "")
        bound_to = request_fingerprint(repr((owner, status_text, type_text)))
        after = None
        if page_token:
            updated_at, source_id = self._tokens.position(TokenKind.SOURCES, page_token, bound_to)
            after = (updated_at, source_id)
        found = await self._readers.read(
            lambda connection: reads.list_sources(
                connection,
                owner,
                status=status_text,
                source_type=type_text,
                after=after,
                limit=size + 1,
            )
        )
        kept, more = page_of(found, size, source_bytes)
        token = ""
        if more:
            last = kept[-1]
            token = self._tokens.position_token(
                TokenKind.SOURCES, (last.updated_at, last.info.id), bound_to
            )
        return SourcePage(kept, token)


def list_visibility(
    caller: Caller, scope_type: ScopeType | None, *, archived: bool | None, trust: Trust
) -> Visible:
    """Which rows ListMemories shows: to a guest, its conversation's notes; a job's own; one
    scope type (a conversation caller's own conversation for SCOPE_TYPE_CONVERSATION); or every
    scope but jobs."""
    if trust is Trust.GUEST:
        return guest_visibility(caller, scope_type, archived=archived, active_sources=False)
    if caller.job_id is not None:
        return Visible(caller.owner, ((ScopeType.JOB, caller.scope_id(ScopeType.JOB)),), archived)
    if scope_type is None:
        return Visible(caller.owner, (), archived)
    if scope_type is ScopeType.CONVERSATION and caller.conversation is not None:
        return Visible(caller.owner, ((scope_type, caller.conversation.scope_id),), archived)
    return Visible(caller.owner, ((scope_type, None),), archived)
