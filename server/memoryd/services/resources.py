"""Resource versioning use cases: list, history, show, diff, rollback."""

from __future__ import annotations

import dataclasses
import json

from memoryd.domain import prompt_files as render_rules
from memoryd.domain import resources as rules
from memoryd.domain.answers import page_of, resource_bytes, revision_bytes
from memoryd.domain.conversation import OwnerKey
from memoryd.domain.memories import MemoryRecord
from memoryd.domain.memory_queries import Locator
from memoryd.domain.messages import Trust
from memoryd.domain.paging import PageTokens, TokenKind, page_size, request_fingerprint
from memoryd.domain.prompt_files import PROMPT_FILES
from memoryd.domain.quoting import shortened
from memoryd.domain.resources import (
    PROMPT_FILE_NAMES,
    MutationSource,
    ResourceInfo,
    ResourceKey,
    ResourceType,
    Revision,
    prompt_file_path,
)
from memoryd.domain.timestamps import utc_now
from memoryd.domain.tokens import count_tokens
from memoryd.errors import InvalidArgument, NotFound, Reason
from memoryd.services import memory_changes
from memoryd.services.prompt_files import PromptFiles
from memoryd.services.prompt_state import CommittedRender, rendered_ids, rendered_values
from memoryd.services.read_through import ReadThroughCache
from memoryd.storage import memory_reads, memory_writes
from memoryd.storage import resource_store as store
from memoryd.storage.readers import ReaderPool
from memoryd.storage.transaction import Transaction
from memoryd.storage.writer import Writer

# Who archived a row learnt after the revision a prompt file was rolled back to.
ROLLED_BACK_BY = "rollback"
DEFAULT_HISTORY = 20
DEFAULT_RESOURCES_PAGE = 100
MAX_HISTORY = 1000


@dataclasses.dataclass(frozen=True, slots=True)
class Diff:
    """A labelled unified diff."""

    text: str
    from_label: str
    to_label: str


@dataclasses.dataclass(frozen=True, slots=True)
class ResourcePage:
    """One page of ListResources."""

    resources: list[ResourceInfo]
    next_page_token: str


@dataclasses.dataclass(frozen=True, slots=True)
class RevisionPage:
    """One page of ListRevisions."""

    revisions: list[Revision]
    next_before: int
    next_page_token: str


@dataclasses.dataclass(frozen=True, slots=True)
class Rollback:
    """What a rollback did."""

    revision: Revision
    changed: bool
    notice: str
    path: str
    # A prompt file's: the render committed with the rows put back, and the rows changed.
    render: CommittedRender | None = None
    memory_ids: tuple[int, ...] = ()


class ResourceService:
    """Resource revisions over the readers and the writer."""

    def __init__(
        self,
        writer: Writer,
        readers: ReaderPool,
        prompts: PromptFiles,
        tokens: PageTokens,
        memory_rows: ReadThroughCache[int, MemoryRecord],
    ) -> None:
        """`memory_rows`: the cache of memory rows, which a prompt file's rollback changes."""
        self._writer = writer
        self._tokens = tokens
        self._readers = readers
        self._prompts = prompts
        self._memory_rows = memory_rows

    async def list_resources(
        self,
        agent_id: str,
        resource_type: ResourceType | None,
        scope_id: str,
        *,
        requested_page_size: int,
        page_token: str,
    ) -> ResourcePage:
        """An agent's resources, by type then scope, in pages."""
        size = page_size(requested_page_size, default=DEFAULT_RESOURCES_PAGE, maximum=MAX_HISTORY)
        bound_to = request_fingerprint(repr((agent_id, resource_type, scope_id)))
        after = None
        if page_token:
            kind, scope = self._tokens.position(TokenKind.RESOURCES, page_token, bound_to)
            after = (kind, scope)
        found = await self._readers.read(
            lambda connection: store.resources(
                connection, agent_id, resource_type, scope_id, after=after, limit=size + 1
            )
        )
        kept, more = page_of(found, size, resource_bytes)
        token = ""
        if more:
            last = kept[-1].key
            token = self._tokens.position_token(
                TokenKind.RESOURCES, (last.resource_type.value, last.scope_id), bound_to
            )
        return ResourcePage(kept, token)

    async def history(
        self,
        key: ResourceKey,
        *,
        requested_page_size: int = 0,
        page_token: str = "",
        limit: int = 0,
        before: int = 0,
    ) -> RevisionPage:
        """Revisions newest first, in pages: `next_page_token` (or, for the deprecated fields,
        `next_before`) continues further back; both are empty when there is no more."""
        if not 0 <= limit <= MAX_HISTORY:
            raise InvalidArgument(
                f"limit must be between 0 and {MAX_HISTORY}, got {limit}",
                reason=Reason.OUT_OF_RANGE,
                field="limit",
            )
        if before < 0:
            raise InvalidArgument(
                f"before_revision must not be negative, got {before}",
                reason=Reason.OUT_OF_RANGE,
                field="before_revision",
            )
        if before and page_token:
            raise InvalidArgument(
                "before_revision and page_token may not be combined; pass page_token alone",
                field="before_revision",
            )
        size = page_size(requested_page_size or limit, default=DEFAULT_HISTORY, maximum=MAX_HISTORY)
        bound_to = request_fingerprint(repr(key))
        if page_token:
            (position,) = self._tokens.position(TokenKind.REVISIONS, page_token, bound_to)
            before = int(position)
        found = await self._readers.read(
            lambda connection: store.revisions(connection, key, before=before, limit=size + 1)
        )
        if not found and not before:
            await self._require_resource(key)
        kept, more = page_of(found, size, revision_bytes)
        next_before = kept[-1].revision if more else 0
        token = (
            self._tokens.position_token(TokenKind.REVISIONS, (str(next_before),), bound_to)
            if more
            else ""
        )
        return RevisionPage(kept, next_before, token)

    async def show(self, key: ResourceKey, number: int) -> Revision:
        """One revision (0: the current one)."""
        if number < 0:
            raise InvalidArgument(f"revision must not be negative, got {number}")

        def read(connection: Transaction) -> Revision | None:
            if number == 0:
                return store.current(connection, key)
            return store.revision(connection, key, number)

        found = await self._readers.read(read)
        if found is None:
            raise NotFound(_missing(key, number))
        return found

    async def diff(self, key: ResourceKey, older: int, newer: int) -> Diff:
        """The unified diff between two revisions."""
        for name, number in (("from_revision", older), ("to_revision", newer)):
            if number <= 0:
                raise InvalidArgument(f"{name} is required (a revision number), got {number}")
        first = await self.show(key, older)
        second = await self.show(key, newer)
        return Diff(rules.unified_diff(first, second), rules.label(first), rules.label(second))

    async def rollback(self, key: ResourceKey, target: int) -> Rollback:
        """A new revision with `target`'s content; the file is rewritten after commit. A prompt
        file's rows are put back as `target` rendered them, so that the file rendered from them
        is `target`'s again, and stays so until something new is learnt."""
        if target <= 0:
            raise InvalidArgument(f"revision is required (a revision number), got {target}")

        def roll_back(transaction: Transaction) -> Rollback:
            wanted = store.revision(transaction, key, target)
            if wanted is None:
                raise NotFound(_missing(key, target))
            if key.resource_type in PROMPT_FILE_NAMES and rendered_ids(wanted):
                return self._put_back(transaction, key, wanted)
            return _rollback(transaction, key, wanted)

        return await self._writer.run("resource_rollback", roll_back, after_commit=self._publish)

    def _put_back(self, connection: Transaction, key: ResourceKey, wanted: Revision) -> Rollback:
        """Roll a prompt file back through its rows: put them back as `wanted` rendered them,
        then render the file from them."""
        owner = OwnerKey(key.agent_id, key.scope_id)
        (file,) = (f for f in PROMPT_FILES if f.resource_type is key.resource_type)
        rendered = rendered_ids(wanted)
        then = {
            memory_id: found
            for memory_id in rendered
            if (found := memory_writes.find(connection, owner, Locator(id=memory_id)))
        }
        now = utc_now()
        plan = render_rules.put_back(
            file,
            rendered,
            rendered_values(wanted),
            current=memory_reads.render_input(connection, owner),
            then=then,
            now=now,
            count_tokens=count_tokens,
        )
        reason = f"rollback of {PROMPT_FILE_NAMES[key.resource_type]} to revision {wanted.revision}"
        for memory_id in plan.archive:
            memory_changes.archive(
                connection,
                owner,
                memory_id,
                reason=reason,
                archived_by=ROLLED_BACK_BY,
                trust=Trust.OPERATOR,
                now=now,
            )
        for memory_id in plan.restore:
            memory_changes.restore(connection, owner, memory_id, trust=Trust.OPERATOR, now=now)
        for memory_id, value in plan.revert:
            memory_changes.set_value(
                connection,
                owner,
                Locator(id=memory_id),
                value=value,
                metadata_json=None,
                trust=then[memory_id].trust,
                now=now,
            )
        memory_writes.set_recency(connection, plan.order, now)
        render = self._prompts.render_in_transaction(
            connection,
            owner,
            mutation_source=MutationSource.ROLLBACK,
            provenance=json.loads(rules.rollback_provenance(wanted)),
            now=now,
        )
        created = {r.key.resource_type: r for _path, r in render.revisions}
        revision = created.get(key.resource_type) or store.current(connection, key)
        if revision is None:  # pragma: no cover - the target exists, so a current one does
            raise NotFound(_missing(key, 0))
        rows = render_rules.put_back_notice(plan, exact=revision.content == wanted.content)
        changed = key.resource_type in created
        notice = rules.rollback_notice(
            key, wanted.revision, revision.revision, changed=changed, rows=rows
        )
        touched = (*plan.archive, *plan.restore, *(memory_id for memory_id, _ in plan.revert))
        path = prompt_file_path(key.agent_id, key.scope_id, key.resource_type)
        return Rollback(revision, changed, notice, path, render, (*touched, *plan.order))

    def _publish(self, done: Rollback) -> None:
        for memory_id in done.memory_ids:
            self._memory_rows.invalidate(memory_id)
        if done.render is not None:
            self._prompts.publish(done.render)
        elif done.changed and done.revision.key.resource_type in PROMPT_FILE_NAMES:
            self._prompts.publish_revision(done.path, done.revision)

    async def _require_resource(self, key: ResourceKey) -> None:
        found = await self._readers.read(lambda connection: store.path(connection, key))
        if found is None:
            raise NotFound(f"{_describe(key)} has no revisions")


def _rollback(connection: Transaction, key: ResourceKey, wanted: Revision) -> Rollback:
    """A new revision with `wanted`'s content (the rows behind a prompt file stay as they are:
    a revision that did not record them)."""
    target = wanted.revision
    path = store.path(connection, key)
    if path is None:  # pragma: no cover - the revision exists, so its resource does
        raise NotFound(_missing(key, 0))
    committed = store.commit(
        connection,
        key,
        path=path,
        content=wanted.content,
        mutation_source=MutationSource.ROLLBACK,
        provenance_json=rules.rollback_provenance(wanted),
        now=utc_now(),
    )
    if committed.created is None:
        current = store.revision(connection, key, committed.current)
        if current is None:  # pragma: no cover - the target exists, so a current one does
            raise NotFound(_missing(key, 0))
        notice = rules.rollback_notice(key, target, current.revision, changed=False)
        return Rollback(current, changed=False, notice=notice, path=path)
    notice = rules.rollback_notice(key, target, committed.current, changed=True)
    return Rollback(committed.created, changed=True, notice=notice, path=path)


def _describe(key: ResourceKey) -> str:
    return (
        f"{key.resource_type.value} of agent {shortened(key.agent_id)} "
        f"(scope {shortened(key.scope_id)})"
    )


def _missing(key: ResourceKey, number: int) -> str:
    if number == 0:
        return f"{_describe(key)} has no revisions"
    return f"{_describe(key)} has no revision {number}"
