"""How much of the machine the background embedder takes: it yields to the callers.

A model call of the embedded model is about 7 ms of a core for a chat message, and on two cores
the embedder's threads slowed every call they ran beside, even at the lowest CPU priority: they
take the cores and caches the calls' threads leave between their wake-ups. StreamTranscript's
acknowledgement p99 at 1,000 finals/s was 27 ms with the embedder working through what the
streams said and 12 ms with embeddings off (bench/transcript_latency.py). So the embedder paces
itself by what the callers do:

- while an import writes, it takes nothing (memoryd.services.import_activity);
- while calls come at BUSY_CALLS a second or more, it takes small steps, a text for each of
  its threads, and rests after each REST_FACTOR times as long as the step's model calls took
  (not its reads and writes, which wait for the database rather than use a core), so that the
  model has at most 1 / (1 + REST_FACTOR) of the time while callers wait; the vectors fall
  behind a busy server and catch up when it is quieter (words find the messages meanwhile);
- below that rate (a console's or a monitor's polls, a few chats), it takes its full batch, back
  to back: there a call meets an embedding step now and then, where a backlog that never
  shrinks would hold back every search by meaning.

Only the embedded model is paced by the callers: an endpoint's model runs elsewhere, and its
batches cost this machine an HTTP call. Per process: with workers, calls served by one worker do
not slow the embedder of another.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from memoryd.services.import_activity import ImportActivity

T = TypeVar("T")

# Calls in the last second from which the server counts as busy.
BUSY_CALLS = 50
# While busy, the embedder rests this many times as long as each step took.
REST_FACTOR = 3.0


class CallerActivity:
    """How many calls come to this process: each unary call, and each message of a stream
    (memoryd.api.registration marks them). The calls of the last second are estimated from
    counts by whole seconds of the clock: the current second's, and the one before weighted by
    how much of it is still within a second of now."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._second = 0
        self._count = 0  # calls in self._second
        self._before = 0  # calls in the second before it
        self._last = float("-inf")

    def called(self) -> None:
        """A call, or a message of a stream, came now."""
        now = self._last = self._clock()
        second = int(now)
        if second != self._second:
            self._before = self._count if second == self._second + 1 else 0
            self._second, self._count = second, 0
        self._count += 1

    @property
    def last(self) -> float:
        """When the last call came (the clock's time; -inf: none yet)."""
        return self._last

    @property
    def busy(self) -> bool:
        """Whether about BUSY_CALLS or more came in the last second."""
        now = self._clock()
        second, within = int(now), now % 1.0
        if second == self._second:
            recent = self._count + self._before * (1.0 - within)
        elif second == self._second + 1:
            recent = self._count * (1.0 - within)
        else:
            return False
        return recent >= BUSY_CALLS


class Pacing:
    """The embedder's next step's size, and its rest after a step (see the module docstring)."""

    def __init__(
        self,
        imports: ImportActivity,
        callers: CallerActivity,
        *,
        batch: int,
        small: int | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`batch`: the embedder's full batch; `small`: its step while callers are being
        answered (None: it is not paced by them)."""
        self._imports = imports
        self._callers = callers
        self._batch = batch
        self._small = None if small is None else max(1, min(batch, small))
        self._clock = clock
        self._worked = 0.0  # seconds of model calls in the current step
        self._small_step = False  # whether the current step is a small one

    def batch(self) -> int:
        """How many texts the next step may embed (0 while an import writes); a small step is
        remembered for the rest after it."""
        self._small_step = False
        if self._imports.writing:
            return 0
        if self._small is not None and self._callers.busy:
            self._small_step = True
            return self._small
        return self._batch

    async def timed(self, call: Awaitable[T]) -> T:
        """A model call of the embedder's, its time counted for the rest after the step."""
        started = self._clock()
        try:
            return await call
        finally:
            self._worked += self._clock() - started

    async def rest(self) -> None:
        """After a small step: rest while callers are being answered (see the module
        docstring). A full batch begun while none were is not followed by a rest as long."""
        worked, self._worked = self._worked, 0.0
        if self._small_step and self._callers.busy:
            await asyncio.sleep(worked * REST_FACTOR)
