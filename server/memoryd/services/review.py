"""One review of one conversation: gates, claim, model call, and the apply transaction.

    gates    interval (whole hours since the last review; skipped when forced), failure backoff
             (skipped when forced), new reviewable messages since the cursor (always), the claim
    call     the provider chain, tagged agent memory_reviewer and session
             memory_review:<agent>:<channel>:<chat>:<thread>:<max_message_id>
    apply    one transaction: the review run, its admitted operations, the cursor, the model
             calls, and the prompt files' revisions; files are written after the commit

A failed review (no provider answered, broken JSON) records the failure and moves nothing, so a
retry reads the same messages; its operations are keyed by their content, so it cannot
duplicate rows either.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import json
import logging
import secrets
import time

import apsw

from memoryd.config import MemorySettings
from memoryd.domain import review as rules
from memoryd.domain.conversation import ConversationKey, OwnerKey
from memoryd.domain.memories import (
    MemoryRecord,
    NewFact,
    Provenance,
    ScopeType,
    SourceInfo,
)
from memoryd.domain.memory_queries import Locator
from memoryd.domain.messages import Trust
from memoryd.domain.timestamps import utc_now
from memoryd.domain.tokens import count_tokens, load
from memoryd.errors import FailedPrecondition, MemorydError, NotFound
from memoryd.llm.chain import Attempt, ModelUnavailableError, ProviderChain
from memoryd.services.memory import MemoryService
from memoryd.services.prompt_files import CommittedRender, PromptFiles
from memoryd.storage import memory_reads, memory_writes, review_store
from memoryd.storage.history_rows import CONVERSATION_MATCH, rows
from memoryd.storage.readers import ReaderPool
from memoryd.storage.review_store import ReviewState, RunRecord, StoredRun
from memoryd.storage.writer import Batch, Writer

log = logging.getLogger("memoryd.review")
NO_PROVIDER = (
    "no model provider is configured, so review is off: add a [[memoryd.providers]] entry "
    "(name, base_url, model, api_key_env) to the config file, or run `memoryd setup`"
)


def reviewer_source(owner: OwnerKey) -> SourceInfo:
    """The memory source of every row the reviewer writes."""
    return SourceInfo(
        "memory_reviewer", "memory_reviewer", "memory reviewer", "background review", owner.owner_id
    )


@dataclasses.dataclass(frozen=True, slots=True)
class ReviewResult:
    """What one review did."""

    key: ConversationKey
    status: str  # ok | nothing_to_save | skipped | failed
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


@dataclasses.dataclass(frozen=True, slots=True)
class _Snapshot:
    messages: list[rules.InputMessage]
    records: list[MemoryRecord]
    working_memory: str
    description: str


@dataclasses.dataclass(frozen=True, slots=True)
class _ApplyJob:
    key: ConversationKey
    token: str
    packed: rules.PackedInput
    operations: list[rules.Operation]
    attempts: list[Attempt]
    provider: str
    model: str
    started: dt.datetime


@dataclasses.dataclass(frozen=True, slots=True)
class _Applied:
    claim_lost: bool
    record: RunRecord | None = None
    run_id: int = 0
    touched: tuple[int, ...] = ()
    render: CommittedRender | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class _FailJob:
    key: ConversationKey
    token: str
    max_message_id: int
    error: str
    attempts: list[Attempt]
    started: dt.datetime


class Reviewer:
    """Runs reviews; safe to call for many conversations at once."""

    def __init__(
        self,
        *,
        writer: Writer,
        readers: ReaderPool,
        prompts: PromptFiles,
        memory: MemoryService,
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
        backoff = settings.review_failure_backoff_ms / 1000
        timeouts = sum(provider.timeout_seconds for provider in chain.providers)
        # A claim older than this belongs to a review that died: it may be taken over.
        self.stale_after = dt.timedelta(seconds=max(backoff, timeouts))

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
            return ReviewResult(key, "skipped", "the conversation has no record")
        state, has_new = found
        if not forced:
            skip = self._gated(state, now)
            if skip:
                return ReviewResult(key, "skipped", skip)
        if not has_new:
            if state is not None and state.pending_input:
                # Nothing left to read (its messages were reviewed by a forced run, say): the
                # scheduler must stop picking the conversation up.
                await self._writer.submit(self._settle, key)
            return ReviewResult(key, "skipped", "no new user messages since the last review")
        token = secrets.token_hex(8)
        claimed = await self._writer.submit(self._claim, (key, token, now, now - self.stale_after))
        if not claimed:
            return ReviewResult(key, "skipped", "concurrent_run: another review is running")
        try:
            return await self._claimed_review(key, token, now)
        except BaseException:
            # Cancelled (the server is stopping) or a defect: give the claim back if we can.
            try:
                await self._writer.submit(self._release, (key, token))
            except Exception:  # the writer may be closed; start-up clears every claim
                log.debug("could not release review claim", exc_info=True)
            raise

    async def describe(self, key: ConversationKey) -> tuple[ReviewState, StoredRun | None]:
        """A conversation's review state and its latest run; NOT_FOUND without a record."""

        def read(connection: apsw.Connection) -> tuple[ReviewState, StoredRun | None] | None:
            found = _gate_input(connection, key)
            if found is None:
                return None
            return found[0] or ReviewState(), review_store.last_run(connection, key)

        described = await self._readers.read(read)
        if described is None:
            raise NotFound(f"conversation {key.describe()} has no record")
        return described

    def _trigger_fired(self, state: ReviewState, now: dt.datetime) -> bool:
        """The interval (in whole hours) has passed, or one of OpenHermit's triggers fired."""
        settings = self.settings
        if state.last_reviewed_at is None:
            return True
        if (now - state.last_reviewed_at).total_seconds() // 3600 >= settings.review_interval_hours:
            return True
        if (
            settings.turn_interval is not None
            and state.turns_since_review >= settings.turn_interval
        ):
            return True
        idle = settings.idle_timeout_minutes
        return (
            idle is not None
            and state.last_input_at is not None
            and now - state.last_input_at >= dt.timedelta(minutes=idle)
        )

    def _gated(self, state: ReviewState | None, now: dt.datetime) -> str:
        if state is None:
            return ""
        if not self._trigger_fired(state, now):
            return "under_interval"
        backoff = dt.timedelta(milliseconds=self.settings.review_failure_backoff_ms)
        failed_at = state.last_review_failed_at
        if state.failure_count and failed_at is not None and now - failed_at < backoff:
            return "backoff: the last review failed"
        return ""

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
            return ReviewResult(key, "skipped", "no new user messages since the last review")
        messages = rules.prompt(
            packed,
            rules.memory_section(
                snapshot.records, len(prompt_state.user_md.text), len(prompt_state.memory_md.text)
            ),
            snapshot.working_memory,
            snapshot.description,
        )
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
            operations = rules.parse_answer(
                completion.text, [(call.name, call.arguments) for call in completion.tool_calls]
            )
        except (ModelUnavailableError, rules.ReviewOutputError) as error:
            reason = str(error)
            await self._writer.submit(
                self._fail,
                _FailJob(key, token, packed.max_message_id, reason, attempts, started),
            )
            log.warning(
                "review of %s failed: %s",
                key.describe(),
                reason,
                extra={"event": "review_failed", "session_id": session, "error": reason},
            )
            return ReviewResult(key, "failed", reason, tokens_in=packed.tokens)
        begin = time.perf_counter()
        applied = await self._writer.submit(
            self._apply,
            _ApplyJob(
                key,
                token,
                packed,
                operations,
                attempts,
                completion.provider,
                completion.model,
                started,
            ),
            after_commit=self._publish,
        )
        own_ms = build_ms + (time.perf_counter() - begin) * 1000
        if applied.claim_lost or applied.record is None:
            return ReviewResult(key, "skipped", "concurrent_run: the claim was taken over")
        record = applied.record
        log.info(
            "reviewed %s: %s",
            key.describe(),
            record.status,
            extra={
                "event": "review",
                "session_id": session,
                "status": record.status,
                "added": record.added,
                "replaced": record.replaced,
                "archived": record.archived,
                "skipped": record.skipped,
                "tokens_in": record.tokens_in,
                "provider": completion.provider,
                "own_ms": round(own_ms, 3),
            },
        )
        return ReviewResult(
            key,
            record.status,
            "",
            record.added,
            record.replaced,
            record.archived,
            record.skipped,
            record.tokens_in,
            applied.run_id,
            completion.provider,
            completion.model,
            round(own_ms, 3),
        )

    # --- the apply transaction (writer thread) ---------------------------------------------

    def _apply_in_transaction(self, connection: apsw.Connection, job: _ApplyJob) -> _Applied:
        key = job.key
        if not review_store.holds_claim(connection, key, job.token):
            return _Applied(claim_lost=True)
        now = utc_now()
        owner = OwnerKey(key.agent_id, key.owner_id)
        status = "ok" if job.operations else "nothing_to_save"
        run_id = review_store.start_run(
            connection,
            key,
            RunRecord(status, job.packed.max_message_id, provider=job.provider, model=job.model),
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
        # Rows changed, by the kind of operation (rules.Add, rules.Replace, rules.Archive).
        changed_by: collections.Counter[type] = collections.Counter()
        skipped = 0
        touched: list[int] = []
        rendered = False
        limit = self.settings.review_max_operations
        skipped += max(0, len(job.operations) - limit)
        for index, operation in enumerate(job.operations[:limit]):
            owned = _owned_rows(connection, owner, operation)
            admitted = rules.admit(operation, owned, index)
            if isinstance(admitted, str):
                skipped += 1
                log.info(
                    "review operation skipped: %s",
                    admitted,
                    extra={"event": "review_op_skipped", "run": run_id},
                )
                continue
            # A savepoint per operation: one that the store refuses after all (a row that changed
            # under it) is skipped whole, and the others stand.
            connection.execute("SAVEPOINT review_op")
            try:
                changed = _apply_one(connection, key, owner, admitted, provenance, now)
            except MemorydError as error:
                connection.execute("ROLLBACK TO review_op; RELEASE review_op")
                skipped += 1
                log.info(
                    "review operation refused: %s",
                    error.message,
                    extra={"event": "review_op_skipped", "run": run_id},
                )
                continue
            connection.execute("RELEASE review_op")
            if changed is not None:
                changed_by[type(admitted)] += 1
                touched.append(changed.id)
                rendered = rendered or changed.prompt_target.value != "none"
        more = bool(review_store.reviewable_after(connection, key, job.packed.max_message_id, 1))
        review_store.record_success(
            connection,
            key,
            status=status,
            cursor=job.packed.max_message_id,
            more_pending=more,
            now=now,
        )
        record = RunRecord(
            status,
            job.packed.max_message_id,
            added=changed_by[rules.Add],
            replaced=changed_by[rules.Replace],
            archived=changed_by[rules.Archive],
            skipped=skipped,
            tokens_in=job.packed.tokens,
            provider=job.provider,
            model=job.model,
        )
        review_store.finish_run(connection, run_id, record, job.attempts, now)
        render = None
        if rendered:
            render = self._prompts.render_in_transaction(
                connection,
                owner,
                mutation_source="memory_review",
                provenance={"trigger": "memory_review", "memory_ids": touched, "run": run_id},
                now=now,
            )
        return _Applied(
            claim_lost=False, record=record, run_id=run_id, touched=tuple(touched), render=render
        )

    def _publish(self, applied: _Applied) -> None:
        for memory_id in applied.touched:
            self._memory.rows.invalidate(memory_id)
        if applied.render is not None:
            self._prompts.publish(applied.render)


def _apply_one(  # noqa: PLR0917 - one operation and everything it is applied with
    connection: apsw.Connection,
    key: ConversationKey,
    owner: OwnerKey,
    admitted: rules.Admitted,
    provenance: Provenance,
    now: dt.datetime,
) -> MemoryRecord | None:
    """Apply one admitted operation; returns the row it changed (None for conversation texts)."""
    if isinstance(admitted, rules.Add):
        scope_id = owner.owner_id if admitted.scope_type is ScopeType.OWNER else owner.agent_id
        fact = NewFact(
            owner,
            admitted.scope_type,
            scope_id,
            admitted.category,
            admitted.key,
            admitted.value,
            1.0,
            None,
            Trust.OPERATOR,
            provenance,
        )
        return memory_writes.upsert(connection, fact, reviewer_source(owner), now).record
    if isinstance(admitted, rules.Replace):
        stored = memory_writes.set_value(
            connection,
            owner,
            Locator(id=admitted.id),
            value=admitted.value,
            metadata_json=None,
            trust=Trust.OPERATOR,
            now=now,
        )
        memory_writes.set_provenance(connection, admitted.id, provenance)
        return stored.record
    if isinstance(admitted, rules.Archive):
        return memory_writes.archive(
            connection,
            owner,
            admitted.id,
            reason=admitted.reason,
            archived_by=rules.REVIEWER_AGENT,
            trust=Trust.OPERATOR,
            now=now,
        ).before
    column = "working_memory" if isinstance(admitted, rules.SetWorkingMemory) else "description"
    review_store.set_conversation_text(connection, key, column, admitted.text)
    return None


def _owned_rows(
    connection: apsw.Connection, owner: OwnerKey, operation: rules.Operation
) -> dict[int, MemoryRecord]:
    """The active row of the owner an operation names by id, if any."""
    raw = operation.fields.get("id")
    if isinstance(raw, bool) or not isinstance(raw, int | str):
        return {}
    try:
        memory_id = int(raw)
    except ValueError:
        return {}
    record = memory_writes.find(connection, owner, Locator(id=memory_id)) if memory_id > 0 else None
    return {record.id: record} if record is not None and not record.archived else {}


def _gate_input(
    connection: apsw.Connection, key: ConversationKey
) -> tuple[ReviewState | None, bool] | None:
    if not rows(
        connection, f"SELECT 1 FROM conversations WHERE {CONVERSATION_MATCH}", key.as_row()
    ):
        return None
    state = review_store.state(connection, key)
    cursor = state.last_reviewed_message_id if state else 0
    return state, bool(review_store.reviewable_after(connection, key, cursor, 1))


def _snapshot(connection: apsw.Connection, key: ConversationKey, limit: int) -> _Snapshot:
    state = review_store.state(connection, key)
    cursor = state.last_reviewed_message_id if state else 0
    working_memory, description = review_store.conversation_texts(connection, key)
    return _Snapshot(
        review_store.reviewable_after(connection, key, cursor, limit),
        memory_reads.render_input(connection, OwnerKey(key.agent_id, key.owner_id)),
        working_memory,
        description,
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
    state = review_store.state(connection, key)
    cursor = state.last_reviewed_message_id if state else 0
    if not review_store.reviewable_after(connection, key, cursor, 1):
        review_store.clear_pending(connection, key)


def _fail_in_transaction(connection: apsw.Connection, job: _FailJob) -> None:
    if not review_store.holds_claim(connection, job.key, job.token):
        return
    now = utc_now()
    record = RunRecord("failed", job.max_message_id, error=job.error)
    run_id = review_store.start_run(connection, job.key, record, job.started)
    review_store.finish_run(connection, run_id, record, job.attempts, now)
    review_store.record_failure(connection, job.key, error=job.error, now=now)


def _cut(line: str, budget: int) -> str:
    """The longest prefix of `line` within `budget` tokens, ending on a whole character."""
    tokens = load().encode_ordinary(line)[:budget]
    text = load().decode(tokens, errors="ignore")
    return text.rstrip("\ufffd")
