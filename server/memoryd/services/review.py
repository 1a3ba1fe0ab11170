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
import datetime as dt
import logging
import secrets
import time
from typing import TYPE_CHECKING, Any

from memoryd import log_names
from memoryd.config import ReviewSettings
from memoryd.domain import model_calls
from memoryd.domain import review_answer as answers
from memoryd.domain import review_prompt as prompts
from memoryd.domain.conversation import ConversationKey, OwnerKey
from memoryd.domain.model_calls import Attempt, no_provider
from memoryd.domain.review_gate import Thresholds, gate
from memoryd.domain.review_runs import (
    Exchange,
    ReviewResult,
    ReviewState,
    ReviewStatus,
    SkipReason,
)
from memoryd.domain.timestamps import utc_now
from memoryd.domain.tokens import count_tokens
from memoryd.errors import FailedPrecondition, NotFound, Reason
from memoryd.llm.chain import ModelUnavailableError, ProviderChain
from memoryd.log_events import Event
from memoryd.observability import metrics, tracing
from memoryd.services import review_model, review_reads, review_reports
from memoryd.services.long_term_memory import LongTermMemory
from memoryd.services.prompt_files import PromptFiles
from memoryd.services.review_apply import (
    Applied,
    ApplyJob,
    FailJob,
    apply_answer,
    record_failure,
)
from memoryd.storage import (
    review_input,
    review_store,
)
from memoryd.storage.readers import ReaderPool
from memoryd.storage.transaction import Transaction
from memoryd.storage.writer import Writer

if TYPE_CHECKING:
    from opentelemetry.context import Context

log = logging.getLogger("memoryd.review")


NO_PROVIDER = no_provider("review")


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
        settings: ReviewSettings,
    ) -> None:
        self._writer = writer
        self._readers = readers
        self._prompts = prompts
        self._memory = memory
        self._chain = chain
        self.settings = settings
        self.backoff = dt.timedelta(milliseconds=settings.review_failure_backoff_ms)
        timeouts = sum(provider.timeout_seconds for provider in chain.providers)
        # A claim older than this belongs to a review that died: it may be taken over.
        self.stale_after = max(self.backoff, dt.timedelta(seconds=timeouts))
        # Claims whose release failed (storage away when the review ended): released again by
        # `release_owed`, so that the conversation is reviewed when storage is back, not only
        # once the claim is stale.
        self._owed: dict[ConversationKey, str] = {}
        self.retune(settings)

    def retune(self, settings: ReviewSettings) -> None:
        """Run with these settings from now on (their triggers: UpdateReviewSettings)."""
        self.settings = settings
        # One exact duration, fractions of an hour included, for the gate and the scheduler.
        hours = settings.review_interval_hours
        self.interval = dt.timedelta(hours=hours) if hours > 0 else None
        idle = settings.idle_timeout_minutes
        self.idle = dt.timedelta(minutes=idle) if idle is not None else None

    def _exchange(self, messages: list[dict[str, Any]], answered: str) -> Exchange | None:
        """The review's exchange with the model, when the settings keep it."""
        if not self.settings.keep_review_exchanges:
            return None
        prompt = tuple((str(m.get("role", "")), str(m.get("content") or "")) for m in messages)
        return Exchange(prompt=prompt, answer=answered)

    def thresholds(self, now: dt.datetime) -> Thresholds:
        """The trigger times at `now`."""
        return Thresholds(
            interval_before=now - self.interval if self.interval is not None else None,
            backoff_before=now - self.backoff,
            stale_before=now - self.stale_after,
            idle_before=now - self.idle if self.idle is not None else None,
            turn_interval=self.settings.turn_interval,
            passive_interval=self.settings.passive_turn_interval,
        )

    @property
    def configured(self) -> bool:
        """A model is configured: reviews can run."""
        return self._chain.configured

    def require_provider(self) -> None:
        """Reviews need a model: FAILED_PRECONDITION otherwise."""
        if not self._chain.configured:
            raise FailedPrecondition(NO_PROVIDER, reason=Reason.NO_MODEL_PROVIDER)

    async def review(
        self, key: ConversationKey, *, forced: bool, origin: Context | None = None
    ) -> ReviewResult:
        """Review one conversation if its gates allow; never raises for a failed review.
        `origin`: the trace context of what asked for it (the turn that triggered a scheduled
        review), its span's parent; by default the current one."""
        self.require_provider()
        with tracing.span(
            "memoryd.review", {"memoryd.review.forced": forced}, parent=origin
        ) as span:
            result = await self._review(key, forced=forced)
            tracing.annotate(span, review_reports.span_attributes(result))
        if result.status is not ReviewStatus.SKIPPED:
            metrics.REVIEWS.labels(result.status.value).inc()
            for outcome, count in (
                ("added", result.added),
                ("replaced", result.replaced),
                ("archived", result.archived),
                ("skipped", result.skipped_ops),
                ("deferred", result.deferred_ops),
            ):
                if count:
                    metrics.REVIEW_OPERATIONS.labels(outcome).inc(count)
        return result

    async def _review(self, key: ConversationKey, *, forced: bool) -> ReviewResult:
        now = utc_now()
        found = await self._readers.read(
            lambda connection: review_reads.gate_input(connection, key)
        )
        if found is None:
            return review_reports.skipped(key, SkipReason.NO_RECORD)
        state, has_new = found
        if not forced:
            skip = self._gated(state, now)
            if skip is not None:
                return review_reports.skipped(key, skip)
        if not has_new:
            if state is not None and state.pending_input:
                # Nothing left to read (its messages were reviewed by a forced run, say): the
                # scheduler must stop picking the conversation up.
                await self._writer.run(
                    "review_settle", lambda transaction: review_reads.settle(transaction, key)
                )
            return review_reports.skipped(key, SkipReason.NO_NEW_INPUT)
        token = secrets.token_hex(8)
        stale_before = now - self.stale_after
        claimed = await self._writer.run(
            "review_claim",
            lambda transaction: review_store.claim(
                transaction, key, token, now=now, stale_before=stale_before
            ),
        )
        if not claimed:
            return review_reports.skipped(key, SkipReason.CONCURRENT_RUN)
        try:
            return await self._claimed_review(key, token, now)
        except BaseException:
            # Cancelled (the server is stopping), storage away, or a defect: give the claim
            # back, now or, when storage is away, once it is back (release_owed). A writer
            # closed by a stop needs none: start-up clears every claim.
            try:
                await self._release(key, token)
            except Exception:
                self._owed[key] = token
                log.debug("could not release review claim", exc_info=True)
            raise

    async def release_owed(self) -> None:
        """Give back the claims whose release failed; Unavailable while storage is still away
        (those left are tried again next time)."""
        for key, token in list(self._owed.items()):
            await self._release(key, token)
            del self._owed[key]

    async def catch_up(
        self, key: ConversationKey, *, through_id: int | None, seconds: float, before: str
    ) -> None:
        """Review the user messages up to `through_id` (None: every one) that the reviewer has
        not read, in its batches, for at most `seconds`; `before` names what waits ("compaction",
        "/new"). A failed review stops the catch-up but loses nothing: the messages stay in the
        review queue (its cursor is not the window)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:

            def unread(connection: Transaction) -> bool:
                if through_id is None:
                    return review_input.has_input_after(
                        connection, key, review_store.cursor(connection, key)
                    )
                return review_store.unread_through(connection, key, through_id)

            if not await self._readers.read(unread):
                return
            result = await self.review(key, forced=True)
            if result.skip is SkipReason.CONCURRENT_RUN:
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
        return await self._readers.read(lambda connection: review_reads.unread(connection, key))

    async def state(self, key: ConversationKey) -> review_reads.ReviewDescription:
        """A conversation's review state, backlog and latest run; NOT_FOUND without a record."""
        described = await self._readers.read(
            lambda connection: review_reads.described(connection, key)
        )
        if described is None:
            raise NotFound(f"conversation {key.describe()} has no record")
        return described

    def _gated(self, state: ReviewState | None, now: dt.datetime) -> SkipReason | None:
        """Why a scheduled review may not run now (the rule review_store.due applies in SQL)."""
        return gate(state, self.thresholds(now))

    async def _claimed_review(
        self, key: ConversationKey, token: str, started: dt.datetime
    ) -> ReviewResult:
        # Read after the claim: a review that finished in between has moved the cursor.
        snapshot = await self._readers.read(
            lambda connection: review_reads.snapshot(
                connection, key, self.settings.review_max_messages
            )
        )
        begin = time.perf_counter()
        prompt_state = await self._prompts.state(OwnerKey(key.agent_id, key.owner_id))
        packed = prompts.pack(
            snapshot.messages,
            self.settings.review_input_token_budget,
            count_tokens,
            review_model.cut,
            snapshot.part,
        )
        if not packed.message_ids:
            await self._release(key, token)
            return review_reports.skipped(key, SkipReason.NO_NEW_INPUT)
        listing = prompts.memory_section(
            snapshot.records,
            (len(prompt_state.user_md.text), len(prompt_state.memory_md.text)),
            self.settings.review_memory_token_budget,
            count_tokens,
        )
        messages = prompts.prompt(
            packed, listing.text, snapshot.working_memory, snapshot.description
        )
        build_ms = (time.perf_counter() - begin) * 1000
        attempts: list[Attempt] = []
        session = model_calls.session_id("memory_review", key, packed.max_message_id)
        answered = ""
        try:
            completion = await self._chain.complete(
                messages,
                agent=prompts.REVIEWER_AGENT,
                session_id=session,
                tools=prompts.TOOLS,
                max_tokens=self.settings.review_max_output_tokens,
                on_attempt=attempts.append,
            )
            answered = review_model.answered(completion)
            answer = await review_model.fitted(
                self._chain,
                review_model.read_answer(completion, self.settings.review_max_output_tokens),
                session,
                attempts,
                self.settings.review_max_output_tokens,
            )
        except (ModelUnavailableError, answers.ReviewOutputError) as error:
            reason = str(error)
            failed = FailJob(
                key=key,
                token=token,
                max_message_id=packed.max_message_id,
                error=reason,
                attempts=attempts,
                started=started,
                exchange=self._exchange(messages, answered),
            )
            await self._writer.run(
                "review_fail", lambda transaction: record_failure(transaction, failed)
            )
            return review_reports.failed(key, session, reason, packed.tokens)
        begin = time.perf_counter()
        job = ApplyJob(
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
            exchange=self._exchange(messages, answered),
        )
        applied = await self._writer.run(
            "review_apply",
            lambda transaction: self._apply_in_transaction(transaction, job),
            after_commit=self._publish,
        )
        own_ms = build_ms + (time.perf_counter() - begin) * 1000
        if applied.claim_lost or applied.record is None:
            return review_reports.skipped(key, SkipReason.CLAIM_TAKEN_OVER)
        return review_reports.reviewed(
            key,
            session,
            record=applied.record,
            applied=applied,
            completion=completion,
            own_ms=own_ms,
        )

    async def _release(self, key: ConversationKey, token: str) -> None:
        await self._writer.run(
            "review_release", lambda transaction: review_store.release(transaction, key, token)
        )

    def _apply_in_transaction(self, connection: Transaction, job: ApplyJob) -> Applied:
        return apply_answer(
            connection,
            job,
            max_operations=self.settings.operation_cap,
            prompts=self._prompts,
        )

    def _publish(self, applied: Applied) -> None:
        for memory_id in applied.touched:
            self._memory.rows.invalidate(memory_id)
        if applied.render is not None:
            self._prompts.publish(applied.render)
