"""UpdateReviewSettings: when the background review runs, set by an operator (the console's
settings page, Fermix's web setup), saved in the config file and applied to the running
reviewer and scheduler."""

from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from memoryd.config import ReviewSettings
from memoryd.errors import FailedPrecondition, InvalidArgument, Reason
from memoryd.services.review import Reviewer
from memoryd.services.review_scheduler import ReviewScheduler


@dataclasses.dataclass(frozen=True, slots=True)
class Triggers:
    """When the background review runs; 0 turns a trigger off."""

    enabled: bool
    review_interval_hours: float
    turn_interval: int
    idle_timeout_minutes: float
    passive_turn_interval: int


# The largest value of each trigger: a year, a week, and counts no conversation reaches.
LIMITS: dict[str, float] = {
    "review_interval_hours": 8760,
    "turn_interval": 100_000,
    "idle_timeout_minutes": 10_080,
    "passive_turn_interval": 100_000,
}


@dataclasses.dataclass(frozen=True, slots=True)
class Tuned:
    """What UpdateReviewSettings did."""

    triggers: Triggers
    path: Path
    applied: bool
    notice: str


def checked(triggers: Triggers) -> Triggers:
    """The triggers, each within its range (INVALID_ARGUMENT naming the field otherwise)."""
    for name, limit in LIMITS.items():
        value = getattr(triggers, name)
        if not math.isfinite(value) or not 0 <= value <= limit:
            raise InvalidArgument(
                f"triggers.{name} must be from 0 (off) to {limit:g}, got {value}",
                reason=Reason.OUT_OF_RANGE,
                field=f"triggers.{name}",
            )
    return triggers


def of_settings(settings: ReviewSettings) -> Triggers:
    """The triggers a reviewer runs with."""
    return Triggers(
        enabled=settings.enabled,
        review_interval_hours=settings.review_interval_hours,
        turn_interval=settings.turn_interval or 0,
        idle_timeout_minutes=settings.idle_timeout_minutes or 0.0,
        passive_turn_interval=settings.passive_turn_interval or 0,
    )


def with_triggers(settings: ReviewSettings, triggers: Triggers) -> ReviewSettings:
    """`settings` with these triggers (0 is off: None, as the config file's 0 reads)."""
    return dataclasses.replace(
        settings,
        enabled=triggers.enabled,
        review_interval_hours=triggers.review_interval_hours,
        turn_interval=triggers.turn_interval or None,
        idle_timeout_minutes=triggers.idle_timeout_minutes or None,
        passive_turn_interval=triggers.passive_turn_interval or None,
    )


def file_values(triggers: Triggers) -> dict[str, Any]:
    """The triggers as the config file holds them (whole numbers as integers)."""

    def plain(value: float) -> float | int:
        return int(value) if float(value).is_integer() else value

    return {
        "enabled": triggers.enabled,
        "review_interval_hours": plain(triggers.review_interval_hours),
        "turn_interval": triggers.turn_interval,
        "idle_timeout_minutes": plain(triggers.idle_timeout_minutes),
        "passive_turn_interval": triggers.passive_turn_interval,
    }


class ReviewTuning:
    """Saves the review's triggers, then applies them (one change at a time)."""

    def __init__(
        self,
        reviewer: Reviewer,
        scheduler: ReviewScheduler,
        *,
        path: Path,
        save: Callable[[Path, str, Mapping[str, Any]], None],
        workers: int,
    ) -> None:
        self._reviewer = reviewer
        self._scheduler = scheduler
        self.path = path
        self._save = save
        self._workers = workers
        self._lock = asyncio.Lock()

    @property
    def triggers(self) -> Triggers:
        """The triggers the reviewer runs with now."""
        return of_settings(self._reviewer.settings)

    async def update(self, triggers: Triggers) -> Tuned:
        """Save `triggers` in the config file, then run with them (with one worker)."""
        checked(triggers)
        async with self._lock:
            try:
                await asyncio.to_thread(self._save, self.path, "memory", file_values(triggers))
            except ValueError as error:
                raise FailedPrecondition(
                    f"the config file cannot be updated: {error}; change [memoryd.memory] there "
                    "by hand"
                ) from None
            except OSError as error:
                raise FailedPrecondition(
                    f"the config file {self.path} cannot be written ({error.strerror}): give "
                    "memoryd write access to it and its folder, or change [memoryd.memory] "
                    "there by hand and restart"
                ) from None
            if self._workers > 1:
                return Tuned(
                    triggers,
                    self.path,
                    applied=False,
                    notice=f"saved; memoryd runs {self._workers} workers: restart it for all "
                    "of them to use these triggers",
                )
            self._reviewer.retune(with_triggers(self._reviewer.settings, triggers))
            self._scheduler.retuned()
        notice = ""
        if triggers.enabled and not self._scheduler.enabled:
            notice = (
                "saved and applied, but no background review runs: every trigger is 0"
                if self._reviewer.configured
                else "saved and applied, but no background review runs without a model provider"
            )
        return Tuned(triggers, self.path, applied=True, notice=notice)
