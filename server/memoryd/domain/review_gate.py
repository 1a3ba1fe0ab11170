"""When a scheduled review may run: its triggers and the failure backoff, as a pure rule.

The scheduler finds due conversations with SQL (storage.review_store.due) and the reviewer
checks the conversation it picked with `gate`; both read the same Thresholds, and a test pins
the rule to the SQL (tests/review/test_review_gate.py), so the scheduler never picks a conversation
the gate then refuses, in a loop.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from memoryd.domain.review_runs import ReviewState, SkipReason


@dataclasses.dataclass(frozen=True, slots=True)
class Thresholds:
    """The times and counts a trigger compares with, at one moment (None: that trigger is off)."""

    interval_before: dt.datetime | None
    backoff_before: dt.datetime
    stale_before: dt.datetime
    idle_before: dt.datetime | None
    turn_interval: int | None = None
    passive_interval: int | None = None


def fired(state: ReviewState, at: Thresholds) -> bool:
    """Whether a trigger fired: a backlog, the interval since the last review (or never
    reviewed), the turns or the passive messages since it, or the time without a new message."""
    return (
        state.backlog
        or (
            at.interval_before is not None
            and (state.last_reviewed_at is None or state.last_reviewed_at <= at.interval_before)
        )
        or (at.turn_interval is not None and state.turns_since_review >= at.turn_interval)
        or (at.passive_interval is not None and state.passive_since_review >= at.passive_interval)
        or (
            at.idle_before is not None
            and state.last_input_at is not None
            and state.last_input_at <= at.idle_before
        )
    )


def gate(state: ReviewState | None, at: Thresholds) -> SkipReason | None:
    """Why a scheduled review may not run now; None: it may (a conversation never marked has no
    state, and is gated only by its input)."""
    if state is None:
        return None
    if not fired(state, at):
        return SkipReason.UNDER_INTERVAL
    failed_at = state.last_review_failed_at
    if state.failure_count and failed_at is not None and failed_at > at.backoff_before:
        return SkipReason.BACKOFF
    return None
