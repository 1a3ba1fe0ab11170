"""Resource versioning use cases: list, history, show, diff, rollback."""

from __future__ import annotations

import dataclasses

from memoryd.domain import resources as rules
from memoryd.domain.answers import page_of, resource_bytes, revision_bytes
from memoryd.domain.paging import PageTokens, TokenKind, page_size, request_fingerprint
from memoryd.domain.quoting import shortened
from memoryd.domain.resources import (
    PROMPT_FILE_NAMES,
    MutationSource,
    ResourceInfo,
    ResourceKey,
    ResourceType,
    Revision,
)
from memoryd.domain.timestamps import utc_now
from memoryd.errors import InvalidArgument, NotFound, Reason
from memoryd.services.prompt_files import PromptFiles
from memoryd.storage import resource_store as store
from memoryd.storage.readers import ReaderPool
from memoryd.storage.transaction import Transaction
from memoryd.storage.writer import Writer

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


class ResourceService:
    """Resource revisions over the readers and the writer."""

    def __init__(
        self, writer: Writer, readers: ReaderPool, prompts: PromptFiles, tokens: PageTokens
    ) -> None:
        self._writer = writer
        self._tokens = tokens
        self._readers = readers
        self._prompts = prompts

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
        """A new revision with `target`'s content; the file is rewritten after commit."""
        if target <= 0:
            raise InvalidArgument(f"revision is required (a revision number), got {target}")
        return await self._writer.run(
            "resource_rollback",
            lambda transaction: _rollback(transaction, key, target),
            after_commit=self._publish,
        )

    def _publish(self, done: Rollback) -> None:
        if done.changed and done.revision.key.resource_type in PROMPT_FILE_NAMES:
            self._prompts.publish_revision(done.path, done.revision)

    async def _require_resource(self, key: ResourceKey) -> None:
        found = await self._readers.read(lambda connection: store.path(connection, key))
        if found is None:
            raise NotFound(f"{_describe(key)} has no revisions")


def _rollback(connection: Transaction, key: ResourceKey, target: int) -> Rollback:
    wanted = store.revision(connection, key, target)
    if wanted is None:
        raise NotFound(_missing(key, target))
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
