"""One review of one conversation: gates, claim, model call, and the apply transaction.

    gates    a trigger (review_interval_hours since the last review, exactly; a backlog; turn or
             idle triggers; skipped when forced), failure backoff (skipped when forced), new
             reviewable messages since the cursor (always), the claim
    call     the provider chain, tagged agent memory_reviewer and session
             memory_review:<agent>:<channel>:<chat>:<thread>:<max_message_id>
    apply    one transaction: the review run, its admitted operations, the cursor, the model
             calls, and the prompt files' revisions; files are written after the commit

A failed review (no provider answered, broken JSON) records the failure and moves nothing, so a
retry reads the same messages; its operations are keyed by their content, so it cannot
duplicate rows either. A review whose answer passed review_max_operations applies the first
row changes and keeps the cursor, so the same messages are read again at once: operations are
deferred, never dropped. The model may change only the rows its prompt listed.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import datetime as dt
import json
import logging
import secrets
import time

import apsw

from memoryd import log_names
from memoryd.config import MemorySettings
from memoryd.domain import review as rules
from memoryd.domain.conversation import ConversationKey, OwnerKey
from memoryd.domain.memories import (
    MemoryRecord,
    NewFact,
    PromptTarget,
    Provenance,
    ScopeType,
    SourceInfo,
)
from memoryd.domain.memory_queries import Locator
from memoryd.domain.messages import Trust
from memoryd.domain.model_calls import Attempt
from memoryd.domain.review_runs import (
    AnswerKind,
    ReviewState,
    ReviewStatus,
    RunRecord,
    SkippedOperation,
    SkipReason,
    StoredRun,
)
from memoryd.domain.timestamps import utc_now
from memoryd.domain.tokens import count_tokens, load
from memoryd.errors import FailedPrecondition, MemorydError, NotFound
from memoryd.llm.chain import ModelUnavailableError, ProviderChain
from memoryd.log_events import Event
from memoryd.services.long_term_memory import LongTermMemory
from memoryd.services.prompt_files import CommittedRender, PromptFiles
from memoryd.storage import history_reads, memory_reads, memory_writes, review_store
from memoryd.storage.readers import ReaderPool
from memoryd.storage.sql import savepoint
from memoryd.storage.writer import Batch, Writer

log = logging.getLogger("memoryd.review")


def no_provider(work: str) -> str:
    """What a call needing a model is told when none is configured; `work` is what is off."""
    return (
        f"no model provider is configured, so {work} is off: add a [[memoryd.providers]] entry "
        "(name, base_url, model, api_key_env) to the config file, or run `memoryd setup`"
    )


NO_PROVIDER = no_provider("review")


def reviewer_source(owner: OwnerKey) -> SourceInfo:
    """The memory source of every row the reviewer writes."""
    return SourceInfo(
        id="memory_reviewer",
        source_type="memory_reviewer",
        name="memory reviewer",
        description="background review",
        memory_scope=owner.owner_id,
    )


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ReviewResult:
    """What one review did (`reason`: why it was skipped, or why it failed)."""

    key: ConversationKey
    status: ReviewStatus
    reason: str = ""
    added: int = 0
    replaced: int = 0
    archived: int = 0
    skipped_ops: int = 0
    tokens_in: int = 0
    run_id: int = 0
    provider: str = ""
    model: str = ""
    own_ms: float = 0.0
    deferred_ops: int = 0
    # Reviewable messages left after the cursor (the backlog the next batch reads); counted for
    # ReviewNow's answer only.
    unread: int = 0


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ReviewDescription:
    """GetReviewState: the state, the latest run, and the backlog of unread messages."""

    state: ReviewState
    last_run: StoredRun | None
    unread: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _Snapshot:
    messages: list[rules.InputMessage]
    records: list[MemoryRecord]
    working_memory: str
    description: str
    session_start_id: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _ApplyJob:
    key: ConversationKey
    token: str
    packed: rules.PackedInput
    answer: rules.Answer
    shown_ids: frozenset[int]
    attempts: list[Attempt]
    provider: str
    model: str
    started: dt.datetime
    # The session the review read: a working memory or description it writes belongs to it.
    session_start_id: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _Applied:
    claim_lost: bool
    record: RunRecord | None = None
    run_id: int = 0
    touched: tuple[int, ...] = ()
    render: CommittedRender | None = None
    more: bool = False


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _FailJob:
    key: ConversationKey
    token: str
    max_message_id: int
    error: str
    attempts: list[Attempt]
    started: dt.datetime


@dataclasses.dataclass(frozen=True, slots=True)
class Thresholds:
    """The times a trigger compares with, at one moment: one rule for the gate and the
    scheduler's query, so the scheduler never picks a conversation the gate then refuses."""

    interval_before: dt.datetime | None
    backoff_before: dt.datetime
    stale_before: dt.datetime
    idle_before: dt.datetime | None


class Reviewer:
    """Runs reviews; safe to call for many conversations at once."""

    def __init__(
        self,
        *,
        writer: Writer,
        readers: ReaderPool,
        prompts: PromptFiles,
        memory: LongTermMemory,
        chain: ProviderChain,
        settings: MemorySettings,
    ) -> None:
        self._writer = writer
        self._readers = readers
        self._prompts = prompts
        self._memory = memory
        self.chain = chain
        self.settings = settings
        self._claim = Batch.each("review_claim", _claim)
        self._release = Batch.each("review_release", _release)
        self._apply = Batch.each("review_apply", self._apply_in_transaction)
        self._fail = Batch.each("review_fail", _fail_in_transaction)
        self._settle = Batch.each("review_settle", _settle)
        self.backoff = dt.timedelta(milliseconds=settings.review_failure_backoff_ms)
        timeouts = sum(provider.timeout_seconds for provider in chain.providers)
        # A claim older than this belongs to a review that died: it may be taken over.
        self.stale_after = max(self.backoff, dt.timedelta(seconds=timeouts))
        # One exact duration, fractions of an hour included, for the gate and the scheduler.
        hours = settings.review_interval_hours
        self.interval = dt.timedelta(hours=hours) if hours > 0 else None
        idle = settings.idle_timeout_minutes
        self.idle = dt.timedelta(minutes=idle) if idle is not None else None

    def thresholds(self, now: dt.datetime) -> Thresholds:
        """The trigger times at `now`."""
        return Thresholds(
            interval_before=now - self.interval if self.interval is not None else None,
            backoff_before=now - self.backoff,
            stale_before=now - self.stale_after,
            idle_before=now - self.idle if self.idle is not None else None,
        )

    def require_provider(self) -> None:
        """Reviews need a model: FAILED_PRECONDITION otherwise."""
        if not self.chain.configured:
            raise FailedPrecondition(NO_PROVIDER)

    async def review(self, key: ConversationKey, *, forced: bool) -> ReviewResult:
        """Review one conversation if its gates allow; never raises for a failed review."""
        self.require_provider()
        now = utc_now()
        found = await self._readers.read(lambda connection: _gate_input(connection, key))
        if found is None:
            return _skipped(key, SkipReason.NO_RECORD)
        state, has_new = found
        if not forced:
            skip = self._gated(state, now)
            if skip is not None:
                return _skipped(key, skip)
        if not has_new:
            if state is not None and state.pending_input:
                # Nothing left to read (its messages were reviewed by a forced run, say): the
                # scheduler must stop picking the conversation up.
                await self._writer.submit(self._settle, key)
            return _skipped(key, SkipReason.NO_NEW_INPUT)
        token = secrets.token_hex(8)
        claimed = await self._writer.submit(self._claim, (key, token, now, now - self.stale_after))
        if not claimed:
            return _skipped(key, SkipReason.CONCURRENT_RUN)
        try:
            return await self._claimed_review(key, token, now)
        except BaseException:
            # Cancelled (the server is stopping) or a defect: give the claim back if we can.
            try:
                await self._writer.submit(self._release, (key, token))
            except Exception:  # the writer may be closed; start-up clears every claim
                log.debug("could not release review claim", exc_info=True)
            raise

    async def catch_up(
        self, key: ConversationKey, *, through_id: int | None, seconds: float, before: str
    ) -> None:
        """Review the user messages up to `through_id` (None: every one) that the reviewer has
        not read, in its batches, for at most `seconds`; `before` names what waits ("compaction",
        "/new"). A failed review stops the catch-up but loses nothing: the messages stay in the
        review queue (its cursor is not the window)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:

            def unread(connection: apsw.Connection) -> bool:
                if through_id is None:
                    return review_store.has_input_after(
                        connection, key, review_store.cursor(connection, key)
                    )
                return review_store.unread_through(connection, key, through_id)

            if not await self._readers.read(unread):
                return
            result = await self.review(key, forced=True)
            if result.status is ReviewStatus.SKIPPED and result.reason == SkipReason.CONCURRENT_RUN:
                await asyncio.sleep(0.1)  # the scheduler's review is reading them now
                continue
            if result.status in (ReviewStatus.FAILED, ReviewStatus.SKIPPED):
                log.warning(
                    "%s of %s goes ahead without reviewing first: %s",
                    before,
                    log_names.conversation(key),
                    result.reason,
                    extra={"event": Event.REVIEW_CATCH_UP, "review": result.status.value},
                )
                return

    async def unread(self, key: ConversationKey) -> int:
        """The backlog: reviewable messages after the cursor."""

        def read(connection: apsw.Connection) -> int:
            cursor = review_store.cursor(connection, key)
            return review_store.unread_count(connection, key, cursor)

        return await self._readers.read(read)

    async def describe(self, key: ConversationKey) -> ReviewDescription:
        """A conversation's review state, backlog and latest run; NOT_FOUND without a record."""

        def read(connection: apsw.Connection) -> ReviewDescription | None:
            found = _gate_input(connection, key)
            if found is None:
                return None
            state = found[0] or ReviewState()
            return ReviewDescription(
                state=state,
                last_run=review_store.last_run(connection, key),
                unread=review_store.unread_count(connection, key, state.cursor),
            )

        described = await self._readers.read(read)
        if described is None:
            raise NotFound(f"conversation {key.describe()} has no record")
        return described

    def _gated(self, state: ReviewState | None, now: dt.datetime) -> SkipReason | None:
        """Why a scheduled review may not run now (the rule review_store.due applies in SQL)."""
        if state is None:
            return None
        at = self.thresholds(now)
        turns = self.settings.turn_interval
        passive = self.settings.passive_turn_interval
        fired = (
            state.backlog
            or (
                at.interval_before is not None
                and (state.last_reviewed_at is None or state.last_reviewed_at <= at.interval_before)
            )
            or (turns is not None and state.turns_since_review >= turns)
            or (passive is not None and state.passive_since_review >= passive)
            or (
                at.idle_before is not None
                and state.last_input_at is not None
                and state.last_input_at <= at.idle_before
            )
        )
        if not fired:
            return SkipReason.UNDER_INTERVAL
        failed_at = state.last_review_failed_at
        if state.failure_count and failed_at is not None and failed_at > at.backoff_before:
            return SkipReason.BACKOFF
        return None

    async def _claimed_review(
        self, key: ConversationKey, token: str, started: dt.datetime
    ) -> ReviewResult:
        # Read after the claim: a review that finished in between has moved the cursor.
        snapshot = await self._readers.read(
            lambda connection: _snapshot(connection, key, self.settings.review_max_messages)
        )
        begin = time.perf_counter()
        prompt_state = await self._prompts.state(OwnerKey(key.agent_id, key.owner_id))
        packed = rules.pack(
            snapshot.messages, self.settings.review_input_token_budget, count_tokens, _cut
        )
        if not packed.message_ids:
            await self._writer.submit(self._release, (key, token))
            return _skipped(key, SkipReason.NO_NEW_INPUT)
        listing = rules.memory_section(
            snapshot.records,
            (len(prompt_state.user_md.text), len(prompt_state.memory_md.text)),
            self.settings.review_memory_token_budget,
            count_tokens,
        )
        messages = rules.prompt(packed, listing.text, snapshot.working_memory, snapshot.description)
        build_ms = (time.perf_counter() - begin) * 1000
        attempts: list[Attempt] = []
        session = rules.session_id(
            key.agent_id, key.channel, key.chat_id, key.thread_scope, packed.max_message_id
        )
        try:
            completion = await self.chain.complete(
                messages,
                agent=rules.REVIEWER_AGENT,
                session_id=session,
                tools=rules.TOOLS,
                on_attempt=attempts.append,
            )
            answer = rules.parse_answer(
                completion.text, [(call.name, call.arguments) for call in completion.tool_calls]
            )
        except (ModelUnavailableError, rules.ReviewOutputError) as error:
            reason = str(error)
            await self._writer.submit(
                self._fail,
                _FailJob(
                    key=key,
                    token=token,
                    max_message_id=packed.max_message_id,
                    error=reason,
                    attempts=attempts,
                    started=started,
                ),
            )
            log.warning(
                "review of %s failed: %s",
                log_names.conversation(key),
                reason,
                extra={
                    "event": Event.REVIEW_FAILED,
                    "session_id": log_names.name(session),
                    "error": reason,
                },
            )
            return ReviewResult(
                key=key, status=ReviewStatus.FAILED, reason=reason, tokens_in=packed.tokens
            )
        begin = time.perf_counter()
        applied = await self._writer.submit(
            self._apply,
            _ApplyJob(
                key=key,
                token=token,
                packed=packed,
                answer=answer,
                shown_ids=listing.shown_ids,
                attempts=attempts,
                provider=completion.provider,
                model=completion.model,
                started=started,
                session_start_id=snapshot.session_start_id,
            ),
            after_commit=self._publish,
        )
        own_ms = build_ms + (time.perf_counter() - begin) * 1000
        if applied.claim_lost or applied.record is None:
            return _skipped(key, SkipReason.CLAIM_TAKEN_OVER)
        record = applied.record
        log.info(
            "reviewed %s: %s",
            log_names.conversation(key),
            record.status,
            extra={
                "event": Event.REVIEW,
                "session_id": log_names.name(session),
                "status": record.status,
                "added": record.added,
                "replaced": record.replaced,
                "archived": record.archived,
                "skipped": record.skipped,
                "deferred": record.deferred,
                "more": applied.more,
                "tokens_in": record.tokens_in,
                "provider": completion.provider,
                "own_ms": round(own_ms, 3),
            },
        )
        return ReviewResult(
            key=key,
            status=record.status,
            added=record.added,
            replaced=record.replaced,
            archived=record.archived,
            skipped_ops=record.skipped,
            tokens_in=record.tokens_in,
            run_id=applied.run_id,
            provider=completion.provider,
            model=completion.model,
            own_ms=round(own_ms, 3),
            deferred_ops=record.deferred,
        )

    # --- the apply transaction (writer thread) ---------------------------------------------

    def _apply_in_transaction(self, connection: apsw.Connection, job: _ApplyJob) -> _Applied:
        key = job.key
        if not review_store.holds_claim(connection, key, job.token):
            return _Applied(claim_lost=True)
        now = utc_now()
        owner = OwnerKey(key.agent_id, key.owner_id)
        status = _status(job.answer)
        run_id = review_store.start_run(
            connection,
            key,
            RunRecord(
                status=status,
                max_message_id=job.packed.max_message_id,
                provider=job.provider,
                model=job.model,
            ),
            job.started,
        )
        provenance = Provenance(
            source_id="memory_reviewer",
            source_type="memory_reviewer",
            source_name="memory reviewer",
            source_description="background review",
            run_id=str(run_id),
            details_json=json.dumps(
                {
                    "review_run_id": run_id,
                    "model": job.model,
                    "provider": job.provider,
                    "source_message_ids": list(job.packed.message_ids),
                },
                separators=(",", ":"),
            ),
        )
        applying = _Applying(
            connection=connection,
            key=key,
            owner=owner,
            provenance=provenance,
            now=now,
            guest=job.packed.guest,
            session_ended=review_store.session_start(connection, key) != job.session_start_id,
        )
        shown = _shown_rows(connection, owner, job.shown_ids, job.answer.operations)
        limit = self.settings.review_max_operations
        for index, operation in enumerate(job.answer.operations):
            if limit is not None and operation.changes_rows and applying.row_changes >= limit:
                applying.deferred += 1
                continue
            admitted = rules.admit(operation, shown, index, guest=job.packed.guest)
            if isinstance(admitted, rules.Skipped):
                applying.skip(SkippedOperation(index, operation.action, admitted.reason), run_id)
                continue
            changed = applying.apply(admitted, index, operation.action, run_id)
            if changed is not None and changed.id in shown:
                shown[changed.id] = None if changed.archived else changed
        # Deferred operations keep the cursor: the same messages are read again at once.
        cursor = review_store.cursor(connection, key)
        if not applying.deferred:
            cursor = max(cursor, job.packed.max_message_id)
        # Only whether input is left (one row read): counting the backlog here would rescan it
        # in every batch. ReviewNow and GetReviewState count it on demand.
        more = review_store.has_input_after(connection, key, cursor)
        review_store.record_success(
            connection, key, status=status, cursor=cursor, more_pending=more, now=now
        )
        record = RunRecord(
            status=status,
            max_message_id=job.packed.max_message_id,
            added=applying.changed_by[rules.Add],
            replaced=applying.changed_by[rules.Replace],
            archived=applying.changed_by[rules.Archive],
            skipped=len(applying.skipped),
            tokens_in=job.packed.tokens,
            provider=job.provider,
            model=job.model,
            deferred=applying.deferred,
            skipped_ops=tuple(applying.skipped),
        )
        review_store.finish_run(
            connection, run_id, record, job.attempts, now, answer_kind=job.answer.kind
        )
        render = None
        if applying.rendered:
            render = self._prompts.render_in_transaction(
                connection,
                owner,
                mutation_source="memory_review",
                provenance={
                    "trigger": "memory_review",
                    "memory_ids": applying.touched,
                    "run": run_id,
                },
                now=now,
            )
        return _Applied(
            claim_lost=False,
            record=record,
            run_id=run_id,
            touched=tuple(applying.touched),
            render=render,
            more=more,
        )

    def _publish(self, applied: _Applied) -> None:
        for memory_id in applied.touched:
            self._memory.rows.invalidate(memory_id)
        if applied.render is not None:
            self._prompts.publish(applied.render)


@dataclasses.dataclass(slots=True, kw_only=True)
class _Applying:
    """The operations of one answer being applied inside the review's transaction."""

    connection: apsw.Connection
    key: ConversationKey
    owner: OwnerKey
    provenance: Provenance
    now: dt.datetime
    guest: bool
    # `/new` started another session while the review ran: its session texts are not written.
    session_ended: bool
    # Rows changed, by the kind of operation (rules.Add, rules.Replace, rules.Archive).
    changed_by: collections.Counter[type] = dataclasses.field(default_factory=collections.Counter)
    skipped: list[SkippedOperation] = dataclasses.field(default_factory=list)
    touched: list[int] = dataclasses.field(default_factory=list)
    deferred: int = 0
    rendered: bool = False

    @property
    def row_changes(self) -> int:
        """Rows added, replaced or archived so far (what review_max_operations counts)."""
        return sum(self.changed_by.values())

    def skip(self, skipped: SkippedOperation, run_id: int) -> None:
        """Count an operation that is not applied, with its reason (both kept short: the
        action is the model's text)."""
        skipped = SkippedOperation(skipped.index, skipped.action[:64], skipped.reason[:512])
        self.skipped.append(skipped)
        log.info(
            "review operation skipped: %s",
            skipped.reason,
            extra={"event": Event.REVIEW_OP_SKIPPED, "run": run_id},
        )

    def apply(
        self, admitted: rules.Admitted, index: int, action: str, run_id: int
    ) -> MemoryRecord | None:
        """Apply one admitted operation in a savepoint: one the store refuses after all (a row
        that changed under it) is skipped whole, and the others stand. Returns the row changed."""
        try:
            with savepoint(self.connection, "review_op"):
                changed = _apply_one(self, admitted)
        except MemorydError as error:
            self.skip(SkippedOperation(index, action, error.message), run_id)
            return None
        if changed is None:
            return None
        self.changed_by[type(admitted)] += 1
        self.touched.append(changed.id)
        self.rendered = self.rendered or changed.prompt_target is not PromptTarget.NONE
        return changed


def _apply_one(applying: _Applying, admitted: rules.Admitted) -> MemoryRecord | None:
    """Apply one admitted operation; returns the row it changed (None when nothing changed: a
    conversation text, or an add whose fact is already an active row)."""
    connection, owner, now = applying.connection, applying.owner, applying.now
    trust = Trust.GUEST if applying.guest else Trust.OPERATOR
    if isinstance(admitted, rules.Add):
        scope_id = owner.owner_id if admitted.scope_type is ScopeType.OWNER else owner.agent_id
        if memory_writes.has_active_value(
            connection, owner, admitted.scope_type, scope_id, admitted.category, admitted.value
        ):
            return None
        fact = NewFact(
            owner=owner,
            scope_type=admitted.scope_type,
            scope_id=scope_id,
            category=admitted.category,
            key=admitted.key,
            value=admitted.value,
            confidence=1.0,
            metadata_json=None,
            trust=trust,
            provenance=applying.provenance,
        )
        return memory_writes.upsert(connection, fact, reviewer_source(owner), now).record
    if isinstance(admitted, rules.Replace):
        stored = memory_writes.set_value(
            connection,
            owner,
            Locator(id=admitted.id),
            value=admitted.value,
            metadata_json=None,
            trust=trust,
            now=now,
        )
        memory_writes.set_provenance(connection, admitted.id, applying.provenance)
        return stored.record
    if isinstance(admitted, rules.Archive):
        return memory_writes.archive(
            connection,
            owner,
            admitted.id,
            reason=admitted.reason,
            archived_by=rules.REVIEWER_AGENT,
            trust=trust,
            now=now,
        ).record
    column = "working_memory" if isinstance(admitted, rules.SetWorkingMemory) else "description"
    if applying.session_ended:
        raise FailedPrecondition(
            f"the session ended (/new) while the review ran; its {column.replace('_', ' ')} "
            "is not carried into the new session"
        )
    review_store.set_conversation_text(connection, applying.key, column, admitted.text)
    return None


def _status(answer: rules.Answer) -> ReviewStatus:
    if answer.kind is AnswerKind.PROSE:
        return ReviewStatus.NOTHING_TO_SAVE_PROSE
    return ReviewStatus.OK if answer.operations else ReviewStatus.NOTHING_TO_SAVE


def _skipped(key: ConversationKey, reason: SkipReason) -> ReviewResult:
    return ReviewResult(key=key, status=ReviewStatus.SKIPPED, reason=reason)


def _shown_rows(
    connection: apsw.Connection,
    owner: OwnerKey,
    shown_ids: frozenset[int],
    operations: list[rules.Operation],
) -> dict[int, MemoryRecord | None]:
    """The rows the review prompt listed; those the operations name, as they stand now (None:
    no longer active). Only named rows are read."""
    shown: dict[int, MemoryRecord | None] = dict.fromkeys(shown_ids)
    for memory_id in {op.named_id for op in operations} & shown_ids:
        record = memory_writes.find(connection, owner, Locator(id=memory_id))
        shown[memory_id] = record if record is not None and not record.archived else None
    return shown


def _gate_input(
    connection: apsw.Connection, key: ConversationKey
) -> tuple[ReviewState | None, bool] | None:
    if history_reads.window_state(connection, key) is None:
        return None
    state = review_store.state(connection, key)
    cursor = state.cursor if state is not None else 0
    return state, review_store.has_input_after(connection, key, cursor)


def _snapshot(connection: apsw.Connection, key: ConversationKey, limit: int) -> _Snapshot:
    cursor = review_store.cursor(connection, key)
    working_memory, description = review_store.conversation_texts(connection, key)
    return _Snapshot(
        messages=review_store.reviewable_after(connection, key, cursor, limit),
        records=memory_reads.render_input(connection, OwnerKey(key.agent_id, key.owner_id)),
        working_memory=working_memory,
        description=description,
        session_start_id=review_store.session_start(connection, key),
    )


def _claim(
    connection: apsw.Connection,
    payload: tuple[ConversationKey, str, dt.datetime, dt.datetime],
) -> bool:
    key, token, now, stale_before = payload
    return review_store.claim(connection, key, token, now=now, stale_before=stale_before)


def _release(connection: apsw.Connection, payload: tuple[ConversationKey, str]) -> None:
    review_store.release(connection, *payload)


def _settle(connection: apsw.Connection, key: ConversationKey) -> None:
    if not review_store.has_input_after(connection, key, review_store.cursor(connection, key)):
        review_store.clear_pending(connection, key)


def _fail_in_transaction(connection: apsw.Connection, job: _FailJob) -> None:
    if not review_store.holds_claim(connection, job.key, job.token):
        return
    now = utc_now()
    record = RunRecord(
        status=ReviewStatus.FAILED, max_message_id=job.max_message_id, error=job.error
    )
    run_id = review_store.start_run(connection, job.key, record, job.started)
    review_store.finish_run(connection, run_id, record, job.attempts, now)
    review_store.record_failure(connection, job.key, error=job.error, now=now)


def _cut(line: str, budget: int) -> str:
    """The longest prefix of `line` within `budget` tokens, ending on a whole character."""
    tokens = load().encode_ordinary(line)[:budget]
    text = load().decode(tokens, errors="ignore")
    return text.rstrip("\ufffd")
