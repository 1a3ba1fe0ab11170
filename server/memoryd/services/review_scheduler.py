"""The scheduler: finds conversations whose review is due and runs them, a few at a time.

Due means: new input is pending (a committed turn, or appended user messages), no live claim,
past the failure backoff, and one trigger fired: the review interval since the last review
(exactly, fractions of an hour too; or never reviewed), a backlog (the last review left unread
input: the next batch runs at once), OpenHermit's turn_interval completed turns,
passive_turn_interval user messages stored without a turn, or idle_timeout_minutes without a
new message. The gate in Reviewer applies the same rule, from the same thresholds, so a picked
conversation is never refused and picked again in a loop. State lives in SQLite, so after a
restart the same conversations are due again; claims of the previous process are cleared at
start-up. `enabled = false` turns it off (ReviewNow still works); `review_interval_hours = 0`
turns only the time trigger off. A turn commit nudges the scheduler, so turn triggers do not
wait for the next tick.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import time
from typing import TYPE_CHECKING

from memoryd import log_names
from memoryd.config import ReviewSettings
from memoryd.domain.conversation import ConversationKey
from memoryd.domain.review_runs import ReviewResult, ReviewSelection
from memoryd.domain.timestamps import utc_now
from memoryd.errors import Unavailable
from memoryd.log_events import Event
from memoryd.observability import metrics, tracing
from memoryd.services.outages import Outage
from memoryd.services.review import Reviewer
from memoryd.services.waiting import wait_at_most
from memoryd.storage import review_store
from memoryd.storage.readers import ReaderPool

if TYPE_CHECKING:
    from opentelemetry.context import Context

log = logging.getLogger("memoryd.review")
# With tracing on, the trace contexts of the latest turns kept for their reviews, at most.
MAX_ORIGINS = 10_000


class ReviewScheduler:
    """Runs due reviews in the background with bounded concurrency."""

    def __init__(self, reviewer: Reviewer, readers: ReaderPool, outage: Outage) -> None:
        self._reviewer = reviewer
        self._readers = readers
        self._limit = asyncio.Semaphore(reviewer.settings.review_concurrency)
        self._running: dict[ConversationKey, asyncio.Task[ReviewResult | None]] = {}
        # Conversations whose scheduled review was skipped, and when they may be tried again.
        self._resting: dict[ConversationKey, float] = {}
        self._wake = asyncio.Event()
        # With tracing on: the trace context of each conversation's latest turn, the parent of
        # the review it triggers.
        self._origins: dict[ConversationKey, Context] = {}
        self._loop_task: asyncio.Task[None] | None = None
        # start() was called: the server runs the background (not read-only).
        self._started = False
        self.completed = 0
        self._outage = outage

    @property
    def _settings(self) -> ReviewSettings:
        """The reviewer's settings, as retuned last (UpdateReviewSettings)."""
        return self._reviewer.settings

    @property
    def enabled(self) -> bool:
        """Background review runs with a provider, when it is enabled and a trigger is set."""
        settings = self._settings
        triggers = (
            settings.review_interval_hours > 0,
            settings.turn_interval is not None,
            settings.idle_timeout_minutes is not None,
            settings.passive_turn_interval is not None,
        )
        return self._reviewer.configured and settings.enabled and any(triggers)

    def start(self) -> None:
        """Start the background loop (on the running event loop), when reviews are enabled;
        a later retune starts it once they are."""
        self._started = True
        if self.enabled and self._loop_task is None:
            self._loop_task = asyncio.create_task(self._loop(), name="memoryd-review-scheduler")

    def retuned(self) -> None:
        """The reviewer's triggers changed: start the loop if it may run now, and look again
        at once (a loop whose triggers are all off finds nothing due)."""
        if self._started:
            self.start()
        self._wake.set()

    def nudge(self, key: ConversationKey | None = None) -> None:
        """A turn was committed (in `key`): look for due reviews now."""
        if key is not None and tracing.enabled():
            self._origins.pop(key, None)
            if len(self._origins) >= MAX_ORIGINS:
                del self._origins[next(iter(self._origins))]
            context = tracing.current()
            if context is not None:
                self._origins[key] = context
        self._wake.set()

    async def stop(self) -> None:
        """Stop looking, and cancel running reviews (they are retried after a restart)."""
        tasks: list[asyncio.Task[object]] = list(self._running.values())
        if self._loop_task is not None:
            self._loop_task.cancel()
            tasks.append(self._loop_task)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def run_once(self) -> bool:
        """Start every due review not already running; True when more may be due than were
        read (the next look should come as soon as a slot frees)."""
        if not self.enabled:  # retuned off: nothing is due
            return False
        # Claims a review could not give back while storage was away: given back first, or
        # their conversations would wait for the claims to go stale.
        await self._reviewer.release_owed()
        now = utc_now()
        settings = self._settings
        at = self._reviewer.thresholds(now)
        batch = max(settings.review_concurrency * 4, 16)
        limit = batch + len(self._running)
        due = await self._readers.read(
            lambda connection: review_store.due(
                connection,
                interval_before=at.interval_before,
                backoff_before=at.backoff_before,
                stale_before=at.stale_before,
                turn_interval=at.turn_interval,
                passive_interval=at.passive_interval,
                idle_before=at.idle_before,
                limit=limit,
            )
        )
        resting_until = time.monotonic()
        for key in due:
            if key in self._running or self._resting.get(key, 0.0) > resting_until:
                continue
            task = asyncio.create_task(self._review(key))
            self._running[key] = task
            task.add_done_callback(functools.partial(self._finished, key))
        return len(due) >= limit

    async def review_now(self, chosen: ReviewSelection) -> list[ReviewResult]:
        """ReviewNow: force reviews (past interval and backoff, never past "new messages").

        One conversation must have a record (NOT_FOUND); without one, every conversation of the
        agent (and owner) with pending input is reviewed.
        """
        self._reviewer.require_provider()
        if chosen.conversation is not None:
            await self._reviewer.state(chosen.conversation)  # NOT_FOUND without a record
            keys = [chosen.conversation]
        else:
            keys = await self._readers.read(
                lambda connection: review_store.candidates(
                    connection, agent_id=chosen.agent_id, owner_id=chosen.owner_id
                )
            )

        async def forced(key: ConversationKey) -> ReviewResult:
            async with self._limit:
                result = await self._reviewer.review(key, forced=True)
            return dataclasses.replace(result, unread=await self._reviewer.unread(key))

        return list(await asyncio.gather(*(forced(key) for key in keys)))

    async def _loop(self) -> None:
        while True:
            metrics.REVIEW_SCHEDULER_PASSES.inc()
            # Cleared before the pass, not after it: a review that finishes during the pass (its
            # backlog due at once) wakes the wait below instead of being lost for a whole tick.
            self._wake.clear()
            try:
                more = await self.run_once()
                self._outage.answered()
            except asyncio.CancelledError:
                raise
            except Unavailable as error:  # storage is away: one line, and the next tick retries
                self._outage.failed(error, "reviews")
                more = False
            except Exception:
                log.exception(
                    "the review scheduler failed; retrying", extra={"event": Event.SCHEDULER}
                )
                more = False
            # A finished review wakes the loop (its backlog may be due at once); otherwise look
            # again after a tick, or soon when the batch read was full.
            wait = 0.05 if more else self._settings.scheduler_tick_seconds
            await wait_at_most(self._wake, wait)

    async def _review(self, key: ConversationKey) -> ReviewResult | None:
        async with self._limit:
            with self._outage.during():
                try:
                    return await self._reviewer.review(
                        key, forced=False, origin=self._origins.pop(key, None)
                    )
                except asyncio.CancelledError:
                    raise
                except Unavailable as error:  # its cursor did not move: it runs again when back
                    self._outage.failed(error, "reviews", interrupted=1)
                    return None
                except Exception:
                    log.exception(
                        "review of %s crashed",
                        log_names.conversation(key),
                        extra={"event": Event.REVIEW_CRASHED},
                    )
                    return None

    def _finished(self, key: ConversationKey, task: asyncio.Task[ReviewResult | None]) -> None:
        self._running.pop(key, None)
        self.completed += 1
        result = None if task.cancelled() or task.exception() else task.result()
        if result is None or result.status == "skipped":
            # Refused after all (a claim taken in between, say): not again before the next tick,
            # so a disagreement can never turn into a busy loop.
            self._resting[key] = time.monotonic() + self._settings.scheduler_tick_seconds
        else:
            self._resting.pop(key, None)
        now = time.monotonic()
        for rested in [k for k, until in self._resting.items() if until <= now]:
            del self._resting[rested]
        self._wake.set()
