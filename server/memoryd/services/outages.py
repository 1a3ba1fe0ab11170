"""Storage outages as the background work sees them: news, not defects.

When the database goes away (PostgreSQL restarting, a network cut), every background task that
touches it fails with Unavailable until it is back; each such task is retried by design (a
review's cursor did not move, so it runs again; a batch of vectors is looked for again).
`Outage`, one a process, shared by the background workers, makes that one warning when the
first failure comes and one info line when storage answers again, saying how long it lasted and
how much work of each kind it interrupted: never a traceback, never a line a failed task.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import logging
import threading
import time
from collections.abc import Iterator

from memoryd.errors import Unavailable
from memoryd.log_events import Event

log = logging.getLogger("memoryd.outage")


class Outage:
    """The process's view of storage outages, as its background work meets them.

    Work that runs for a while (a review: a model call between its reads and its write) runs
    `during()`: an outage's end is told only once storage answered again and every piece of
    work that was running in the outage has finished, so that a piece that fails late (its
    retries spent) is counted in the outage's line, not taken for a new outage.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._since: float | None = None
        self._back = False
        self._interrupted: collections.Counter[str] = collections.Counter()
        self._running: set[int] = set()
        self._caught: set[int] = set()
        self._tokens = itertools.count()

    @property
    def ongoing(self) -> bool:
        """Whether storage failed and the outage's end has not been told."""
        return self._since is not None

    @contextlib.contextmanager
    def during(self) -> Iterator[None]:
        """A piece of background work: an outage's end waits for it when the outage caught it."""
        token = next(self._tokens)
        with self._lock:
            self._running.add(token)
            if self._since is not None:
                self._caught.add(token)
        try:
            yield
        finally:
            with self._lock:
                self._running.discard(token)
                self._caught.discard(token)
            self._end_when_settled()

    def failed(self, error: Unavailable, work: str, *, interrupted: int = 0) -> None:
        """Storage answered Unavailable to `work` ("reviews", "embedding batches"), which
        stopped `interrupted` pieces of it, retried once storage is back. The first failure of
        an outage is logged."""
        with self._lock:
            self._interrupted[work] += interrupted
            if self._since is not None:
                return
            self._since = time.monotonic()
            self._back = False
            self._caught = set(self._running)
        log.warning(
            "storage is unavailable: background work waits for it, and what it interrupts is "
            "retried when it is back (%s)",
            error.message,
            extra={"event": Event.STORAGE_OUTAGE, "work": work, "error": error.message},
        )

    def answered(self) -> None:
        """Storage answered: an ongoing outage ends, in one line, once the work it caught has
        finished."""
        with self._lock:
            if self._since is None:
                return
            self._back = True
        self._end_when_settled()

    def _end_when_settled(self) -> None:
        with self._lock:
            if self._since is None or not self._back or self._caught:
                return
            lasted = time.monotonic() - self._since
            interrupted = {work: count for work, count in self._interrupted.items() if count}
            self._since = None
            self._interrupted.clear()
        described = ", ".join(f"{count} {work}" for work, count in interrupted.items())
        log.info(
            "storage is back after %.1f s; interrupted and retried: %s",
            lasted,
            described or "nothing",
            extra={
                "event": Event.STORAGE_RECOVERED,
                "seconds": round(lasted, 3),
                "interrupted": interrupted,
            },
        )
