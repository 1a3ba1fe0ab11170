"""What an operator looks at (the console, GetServerInfo, ListOwners, ListReviewRuns): the
server's agents and owners with their counts, the work waiting in the background, what it did
lately, and each conversation's review runs."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path

from memoryd.domain import activity as activity_rules
from memoryd.domain.answers import page_of, text_bytes
from memoryd.domain.conversation import ConversationKey, HistoryScope, OwnerKey
from memoryd.domain.digits import is_number
from memoryd.domain.messages import StoredMessage
from memoryd.domain.paging import PageTokens, TokenKind, page_size, request_fingerprint
from memoryd.domain.review_runs import Exchange, StoredRun
from memoryd.domain.timestamps import utc_now
from memoryd.errors import NotFound
from memoryd.services.embedding import EmbeddingService
from memoryd.storage import activity_reads, metric_reads, overview_reads, review_run_store
from memoryd.storage.overview_reads import AgentCount, ConversationRow, OwnerCount
from memoryd.storage.readers import ReaderPool
from memoryd.storage.transaction import Transaction

MAX_AGENTS = 1000
RECENT_FAILURES = 10
DEFAULT_RUNS_PAGE, MAX_RUNS_PAGE = 20, 200
DEFAULT_OWNERS_PAGE, MAX_OWNERS_PAGE = 50, 500
ACTIVITY_WINDOW = dt.timedelta(hours=24)


@dataclasses.dataclass(frozen=True, slots=True)
class ServerFacts:
    """What the server knows of itself, fixed when it starts."""

    version: str
    backend: str
    started_at: dt.datetime
    # SQLite's database file (its -wal beside it); None on PostgreSQL, which measures itself.
    database_path: Path | None
    # The effective settings, secrets masked (memoryd.config.shown), as JSON.
    settings_json: str
    background_review: bool


@dataclasses.dataclass(frozen=True, slots=True)
class ServerInfo:
    """The overview."""

    facts: ServerFacts
    database_bytes: int
    agents: list[AgentCount]
    review_backlog: int
    review_failures: int
    recent_failures: list[tuple[ConversationKey, StoredRun]]
    compacted: int
    pending_messages: int
    pending_memories: int


@dataclasses.dataclass(frozen=True, slots=True)
class ActivityReport:
    """Activity over a span, one entry per bucket, oldest first."""

    span: activity_rules.Span
    points: list[tuple[dt.datetime, activity_rules.Counts]]


@dataclasses.dataclass(frozen=True, slots=True)
class RunPage:
    """One page of a conversation's review runs, newest first."""

    runs: list[StoredRun]
    next_page_token: str


@dataclasses.dataclass(frozen=True, slots=True)
class OwnerPage:
    """One page of an agent's owners, by id."""

    owners: list[OwnerCount]
    next_page_token: str


@dataclasses.dataclass(frozen=True, slots=True)
class ConversationPage:
    """One page of an owner's conversations."""

    conversations: list[ConversationRow]
    next_page_token: str


class Overview:
    """Reads for an operator; nothing here writes."""

    def __init__(
        self,
        readers: ReaderPool,
        tokens: PageTokens,
        embedding: EmbeddingService,
        facts: Callable[[], ServerFacts],
    ) -> None:
        self._readers = readers
        self._tokens = tokens
        self._embedding = embedding
        self._facts = facts

    async def server_info(self) -> ServerInfo:
        """The overview, read in one transaction."""
        facts = self._facts()
        queue = self._embedding.queue_position
        since = utc_now() - ACTIVITY_WINDOW

        def read(connection: Transaction) -> ServerInfo:
            levels = metric_reads.levels(connection, queue)
            activity = overview_reads.activity(connection, since, RECENT_FAILURES)
            failures: list[tuple[ConversationKey, StoredRun]] = []
            for key in activity.failing:
                failed = review_run_store.runs(
                    connection, key, before_id=None, limit=1, failed_only=True
                )
                failures.extend((key, run) for run in failed)
            return ServerInfo(
                facts=facts,
                database_bytes=levels.database_bytes or 0,
                agents=overview_reads.agents(connection, MAX_AGENTS),
                review_backlog=levels.review_backlog,
                review_failures=activity.review_failures,
                recent_failures=failures,
                compacted=activity.compacted,
                pending_messages=levels.pending_messages,
                pending_memories=levels.pending_memories,
            )

        info = await self._readers.read(read)
        if facts.database_path is not None:
            info = dataclasses.replace(info, database_bytes=_files_size(facts.database_path))
        return info

    async def activity(
        self,
        scope: HistoryScope | None,
        bucket: activity_rules.Bucket,
        start: dt.datetime | None,
        end: dt.datetime | None,
    ) -> ActivityReport:
        """The scope's activity (None: every agent's) by bucket over the span asked for."""
        span = activity_rules.span(bucket, start, end, utc_now())
        found = await self._readers.read(
            lambda connection: activity_reads.by_bucket(connection, scope, span)
        )
        return ActivityReport(span, activity_rules.laid_out(found, span))

    async def owners(self, agent_id: str, requested_page_size: int, page_token: str) -> OwnerPage:
        """The agent's owners after the page token's, by id (`agent_id` validated, defaults
        filled in)."""
        size = page_size(requested_page_size, default=DEFAULT_OWNERS_PAGE, maximum=MAX_OWNERS_PAGE)
        bound_to = request_fingerprint(json.dumps(["owners", agent_id]))
        after = ""
        if page_token:
            position = self._tokens.position(TokenKind.OWNERS, page_token, bound_to)
            after = position[0] if position else ""
        found = await self._readers.read(
            lambda connection: overview_reads.owners(connection, agent_id, after, size + 1)
        )
        kept, more = page_of(found, size, lambda owner: 64 + text_bytes(owner.owner_id))
        token = ""
        if more:
            token = self._tokens.position_token(TokenKind.OWNERS, (kept[-1].owner_id,), bound_to)
        return OwnerPage(kept, token)

    async def conversations(
        self, owner: OwnerKey, requested_page_size: int, page_token: str
    ) -> ConversationPage:
        """The owner's conversations after the page token's, by channel, chat and thread."""
        size = page_size(requested_page_size, default=DEFAULT_OWNERS_PAGE, maximum=MAX_OWNERS_PAGE)
        bound_to = request_fingerprint(
            json.dumps(["conversations", owner.agent_id, owner.owner_id])
        )
        after = ("", "", "")
        if page_token:
            position = self._tokens.position(TokenKind.CONVERSATIONS, page_token, bound_to)
            if len(position) == 3:
                after = (position[0], position[1], position[2])
        found = await self._readers.read(
            lambda connection: overview_reads.conversations(
                connection, owner.agent_id, owner.owner_id, after, size + 1
            )
        )
        kept, more = page_of(found, size, lambda row: 64 + text_bytes(*row.key.as_row()))
        token = ""
        if more:
            key = kept[-1].key
            token = self._tokens.position_token(
                TokenKind.CONVERSATIONS, (key.channel, key.chat_id, key.thread_scope), bound_to
            )
        return ConversationPage(kept, token)

    async def message(self, owner: OwnerKey, message_id: int) -> StoredMessage:
        """The owner's message of this id (NOT_FOUND otherwise)."""
        found = await self._readers.read(
            lambda connection: overview_reads.message(
                connection, owner.agent_id, owner.owner_id, message_id
            )
        )
        if found is None:
            raise NotFound(f"owner {owner.owner_id!r} has no message {message_id}")
        return found

    async def exchange(self, key: ConversationKey, run_id: int) -> Exchange:
        """A run's kept exchange with the model (NOT_FOUND otherwise)."""
        found = await self._readers.read(
            lambda connection: review_run_store.exchange(connection, key, run_id)
        )
        if found is None:
            raise NotFound(
                f"conversation {key.describe()} has no review run {run_id} with a kept exchange "
                "(memoryd.memory.keep_review_exchanges keeps them from when it is on)"
            )
        return found

    async def review_runs(
        self, key: ConversationKey, requested_page_size: int, page_token: str
    ) -> RunPage:
        """The conversation's review runs older than the page token's, newest first."""
        size = page_size(requested_page_size, default=DEFAULT_RUNS_PAGE, maximum=MAX_RUNS_PAGE)
        bound_to = request_fingerprint(json.dumps(["review_runs", key.as_row()]))
        before = None
        if page_token:
            position = self._tokens.position(TokenKind.REVIEW_RUNS, page_token, bound_to)
            before = int(position[0]) if position and is_number(position[0]) else 0
        found = await self._readers.read(
            lambda connection: review_run_store.runs(
                connection, key, before_id=before, limit=size + 1
            )
        )
        kept, more = page_of(found, size, _run_bytes)
        token = ""
        if more:
            token = self._tokens.position_token(
                TokenKind.REVIEW_RUNS, (str(kept[-1].id),), bound_to
            )
        return RunPage(kept, token)


def _run_bytes(run: StoredRun) -> int:
    """An upper bound of a ReviewRun on the wire."""
    record = run.record
    skipped = sum(32 + text_bytes(op.action, op.reason, op.value) for op in record.skipped_ops)
    applied = sum(48 + text_bytes(op.action, op.value_before, op.value_after) for op in run.applied)
    return 256 + text_bytes(record.provider, record.model, record.error) + skipped + applied


def _files_size(database: Path) -> int:
    """SQLite's database file and its write-ahead log, in bytes."""
    total = 0
    for path in (database, database.with_name(database.name + "-wal")):
        with contextlib.suppress(FileNotFoundError):
            total += path.stat().st_size
    return total
