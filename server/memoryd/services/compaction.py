"""Compaction: Preflight, Compact, GetCompactionState, and the check after each committed turn
(ComposeContext is services.context_composer).

    compact   one at a time per conversation: read the window and its history version, select,
              review the user messages about to leave the window that the reviewer has not read
              (in its batches, within review_catch_up_seconds), summarise with the provider
              chain, then in one transaction: check the version, store the checkpoint (a message
              and a checkpoint revision), move the window, reset the recorded peak
    after     CommitTurn calls `after_turn` once the turn is committed; a due compaction runs in
              the background, never on the caller's path

A failed compaction stores nothing and records the failure; automatic compactions of that
conversation wait failure_backoff_seconds. A compaction never changes working memory or
long-term memory, and never renumbers or deletes a message.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Callable

from memoryd import log_names
from memoryd.config import CompactionSettings
from memoryd.domain import compaction as rules
from memoryd.domain import model_calls
from memoryd.domain.compaction import (
    CheckpointInfo,
    CompactionDescription,
    CompactResult,
    PreflightResult,
)
from memoryd.domain.conversation import ConversationKey
from memoryd.domain.messages import Trust, require_operator
from memoryd.domain.model_calls import no_provider
from memoryd.domain.timestamps import utc_now
from memoryd.domain.tokens import count_tokens
from memoryd.domain.turns import TurnUsage
from memoryd.errors import FailedPrecondition, InvalidArgument, Reason, Unavailable
from memoryd.llm.chain import ModelUnavailableError, ProviderChain
from memoryd.log_events import Event
from memoryd.observability import metrics, tracing
from memoryd.services.compaction_claim import claimed
from memoryd.services.context_composer import (
    ContextComposer,
    compaction_snapshot,
    conversation_record,
    session_checkpoint,
)
from memoryd.services.history import HistoryService
from memoryd.services.outages import Outage
from memoryd.services.prompt_files import PromptFiles
from memoryd.services.review import Reviewer
from memoryd.storage import compaction_store as store
from memoryd.storage.readers import ReaderPool
from memoryd.storage.transaction import Transaction
from memoryd.storage.writer import Writer

log = logging.getLogger("memoryd.compaction")


class Compactor:
    """Compaction and composition over the writer, the readers, the reviewer and the model."""

    def __init__(
        self,
        *,
        writer: Writer,
        readers: ReaderPool,
        history: HistoryService,
        prompts: PromptFiles,
        reviewer: Reviewer,
        chain: ProviderChain,
        settings: CompactionSettings,
        composer: ContextComposer,
        outage: Outage,
        now: Callable[[], dt.datetime] = utc_now,
    ) -> None:
        self._writer = writer
        self._readers = readers
        self._history = history
        self._prompts = prompts
        self._reviewer = reviewer
        self._chain = chain
        self.settings = settings
        self._now = now
        self.backoff = dt.timedelta(seconds=settings.failure_backoff_seconds)
        self._locks: dict[ConversationKey, asyncio.Lock] = {}
        self.composer = composer
        # The process's storage outages, which a background compaction reports as the other
        # background work does (memoryd.services.outages).
        self._outage = outage
        self._background: set[asyncio.Task[None]] = set()

    # --- compaction ------------------------------------------------------------------------------

    async def preflight(self, key: ConversationKey, requested_window: int) -> PreflightResult:
        """Compact before a turn when the previous turn's peak reached the trigger."""
        self.require_provider()
        record = await self._readers.read(lambda connection: conversation_record(connection, key))
        window = self.composer.context_window(requested_window, record.context_window)
        trigger = rules.trigger(self.settings.threshold, window)
        peak = record.peak_prompt_tokens
        skip = await self._skip_reason(key, record, window)
        if skip is not None:
            return PreflightResult(
                outcome=rules.Outcome.SKIPPED,
                notice="",
                reason=skip,
                peak_prompt_tokens=peak or 0,
                trigger_tokens=trigger,
            )
        done = await self._compact(key, window)
        return PreflightResult(
            outcome=done.outcome,
            notice=rules.PREFLIGHT_NOTICE if done.outcome is rules.Outcome.COMPACTED else "",
            reason="" if done.outcome is rules.Outcome.COMPACTED else done.message,
            peak_prompt_tokens=peak or 0,
            trigger_tokens=trigger,
            tokens_before=done.tokens_before,
            tokens_after=done.tokens_after,
        )

    async def compact(
        self, key: ConversationKey, trust: Trust, requested_window: int
    ) -> CompactResult:
        """/compact: compact now, whatever the peak and the backoff. Operators only."""
        require_operator(trust, "/compact")
        self.require_provider()
        record = await self._readers.read(lambda connection: conversation_record(connection, key))
        return await self._compact(
            key, self.composer.context_window(requested_window, record.context_window)
        )

    def after_turn(self, key: ConversationKey, usage: TurnUsage) -> None:
        """A turn was committed: compact in the background when its peak reached the trigger."""
        if not self.settings.enabled or not self._chain.configured or key in self._locks:
            return
        task = asyncio.get_running_loop().create_task(self._after_turn(key, usage))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _after_turn(self, key: ConversationKey, usage: TurnUsage) -> None:
        try:
            with self._outage.during():
                record = await self._readers.read(
                    lambda connection: conversation_record(connection, key)
                )
                window = self.composer.context_window(
                    usage.context_window or 0, record.context_window
                )
                if await self._skip_reason(key, record, window) is None:
                    await self._compact(key, window)
            self._outage.answered()
        except asyncio.CancelledError:
            raise
        except Unavailable as error:  # storage is away: the outage's one line, no traceback
            # The next turn's check compacts it when storage is back.
            self._outage.failed(error, "compactions", interrupted=1)
        except Exception:
            log.exception(
                "compaction after a turn of %s failed",
                log_names.conversation(key),
                extra={"event": Event.COMPACTION_FAILED},
            )

    async def close(self) -> None:
        """Stop the background compactions (a compaction never half-commits)."""
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)

    def require_provider(self) -> None:
        """Compaction needs a model: FAILED_PRECONDITION otherwise."""
        if not self._chain.configured:
            raise FailedPrecondition(no_provider("compaction"), reason=Reason.NO_MODEL_PROVIDER)

    async def _compact(self, key: ConversationKey, window: int) -> CompactResult:
        lock = self._locks.setdefault(key, asyncio.Lock())
        with tracing.span("memoryd.compaction", {"memoryd.compaction.window": window}) as span:
            try:
                async with lock, claimed(self._writer, key, self._now):
                    result = await self._compact_locked(key, window)
            except Exception:
                metrics.COMPACTIONS.labels("error").inc()
                raise
            finally:
                if not lock.locked() and self._locks.get(key) is lock:
                    del self._locks[key]
            tracing.annotate(
                span,
                {
                    "memoryd.compaction.outcome": result.outcome.value,
                    "memoryd.compaction.tokens_before": result.tokens_before,
                    "memoryd.compaction.tokens_after": result.tokens_after,
                },
            )
        metrics.COMPACTIONS.labels(result.outcome.value).inc()
        if result.outcome is rules.Outcome.COMPACTED:
            metrics.COMPACTION_TOKENS.labels("before").observe(result.tokens_before)
            metrics.COMPACTION_TOKENS.labels("after").observe(result.tokens_after)
        return result

    async def _compact_locked(self, key: ConversationKey, window: int) -> CompactResult:
        snapshot = await self._readers.read(lambda connection: compaction_snapshot(connection, key))
        budget = rules.budget(window)
        selection = rules.select(snapshot.protected, snapshot.candidates, budget)
        previous = snapshot.checkpoint
        before = rules.window_tokens(snapshot.protected, snapshot.candidates) + (
            previous.tokens if previous else 0
        )
        if not selection.summarized:
            await self._writer.run(
                "compaction_reset_peak", lambda transaction: store.reset_peak(transaction, key)
            )
            return CompactResult(
                outcome=rules.Outcome.NOTHING_TO_COMPACT,
                message=rules.nothing_text(before),
                tokens_before=before,
                tokens_after=before,
            )
        boundary = selection.summarized[-1].id
        await self._reviewer.catch_up(
            key,
            through_id=boundary,
            seconds=self.settings.review_catch_up_seconds,
            before="compaction",
        )
        started = time.perf_counter()
        try:
            summary = await self._summarise(key, previous, selection, budget, boundary)
        except (ModelUnavailableError, _EmptySummaryError) as error:
            reason = str(error)
            now = self._now()
            await self._writer.run(
                "compaction_fail",
                lambda transaction: store.record_failure(transaction, key, reason, now),
            )
            log.warning(
                "compaction of %s failed: %s",
                log_names.conversation(key),
                reason,
                extra={"event": Event.COMPACTION_FAILED, "error": reason},
            )
            return CompactResult(
                outcome=rules.Outcome.FAILED,
                message=rules.failed_text(reason),
                tokens_before=before,
                tokens_after=before,
            )
        first = rules.covered_from(previous) or selection.summarized[0].id
        first_kept_id = selection.kept[0].id if selection.kept else boundary + 1
        now = self._now()
        stored = await self._writer.run(
            "compaction_store",
            lambda transaction: store.store_checkpoint(
                transaction,
                key,
                expected_version=snapshot.record.history_version,
                summary=summary,
                covers=(first, boundary),
                first_kept_id=first_kept_id,
                now=now,
            ),
            after_commit=lambda _: self._history.cache.invalidate(key),
        )
        if stored is None:
            return CompactResult(
                outcome=rules.Outcome.CONVERSATION_CHANGED,
                message=rules.CHANGED,
                tokens_before=before,
                tokens_after=before,
            )
        after = rules.window_tokens(selection.protected, selection.kept) + count_tokens(summary)
        log.info(
            "compacted %s: %d -> %d tokens",
            log_names.conversation(key),
            before,
            after,
            extra={
                "event": Event.COMPACTION,
                "summarized": len(selection.summarized),
                "kept": len(selection.kept),
                "checkpoint_id": stored.id,
                "tokens_before": before,
                "tokens_after": after,
                "ms": round((time.perf_counter() - started) * 1000, 1),
            },
        )
        return CompactResult(
            outcome=rules.Outcome.COMPACTED,
            message=rules.compacted_text(before, after),
            tokens_before=before,
            tokens_after=after,
            checkpoint_id=stored.id,
        )

    async def _summarise(
        self,
        key: ConversationKey,
        previous: rules.WindowMessage | None,
        selection: rules.Selection,
        budget: int,
        boundary: int,
    ) -> str:
        effort = self.settings.reasoning_effort
        completion = await self._chain.complete(
            rules.summary_prompt(
                previous.content if previous else None,
                selection.summarized,
                rules.summary_budget(budget),
            ),
            agent=rules.COMPACTOR,
            session_id=model_calls.session_id("compaction", key, boundary),
            reasoning_effort=None if effort == "none" else effort,
        )
        summary = completion.text.strip()
        if not summary:
            raise _EmptySummaryError("the model answered with an empty summary")
        return summary

    # --- state ---------------------------------------------------------------------------------

    async def state(self, key: ConversationKey) -> CompactionDescription:
        """GetCompactionState."""

        def read(connection: Transaction) -> tuple[store.CompactionRow, CheckpointInfo | None]:
            record = conversation_record(connection, key)
            message = session_checkpoint(connection, record)
            if message is None:
                return record, None
            first, last = rules.covers(message)
            info = CheckpointInfo(
                message=message,
                first_message_id=first,
                last_message_id=last,
                revision=store.checkpoint_revision(connection, key),
            )
            return record, info

        record, checkpoint = await self._readers.read(read)
        window = record.context_window or (
            self._chain.providers[0].context_window if self._chain.providers else 0
        )
        return CompactionDescription(
            enabled=self.settings.enabled,
            threshold=self.settings.threshold,
            context_window=window,
            budget_tokens=rules.budget(window),
            trigger_tokens=rules.trigger(self.settings.threshold, window),
            peak_prompt_tokens=record.peak_prompt_tokens or 0,
            checkpoint=checkpoint,
            window_start_id=record.window_start_id,
            backoff_until=self._backoff_until(record),
            last_error=record.error or "",
        )

    async def _skip_reason(
        self, key: ConversationKey, record: store.CompactionRow, window: int
    ) -> str | None:
        """Why an automatic compaction does not run now (None: it runs)."""
        trigger = rules.trigger(self.settings.threshold, window)
        peak = record.peak_prompt_tokens
        under = peak is None or peak < trigger
        omitted = await self._omitted(key, window) if self.settings.enabled and under else 0
        return rules.skip_reason(
            enabled=self.settings.enabled,
            peak_prompt_tokens=peak,
            trigger_tokens=trigger,
            omitted_messages=omitted,
            backoff_until=self._backoff_until(record),
            now=self._now(),
        )

    async def _omitted(self, key: ConversationKey, window: int) -> int:
        """How many of the window's messages the composed context leaves out (as an operator
        sees it: the largest blocks; usually the composition the adapter just read)."""
        try:
            composed = await self.composer.compose(key, Trust.OPERATOR, window)
        except InvalidArgument:  # the blocks alone overflow: compaction cannot help that
            return 0
        return composed.composition.omitted_messages

    def _backoff_until(self, record: store.CompactionRow) -> dt.datetime | None:
        if record.failed_at is None:
            return None
        until = record.failed_at + self.backoff
        return until if until > self._now() else None


class _EmptySummaryError(Exception):
    """The model answered, with nothing."""
