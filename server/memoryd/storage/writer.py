"""The one writer: a thread that owns the only read-write connection and commits in groups.

Callers on the event loop submit jobs (functions of the connection) and await their results.
The thread takes every job waiting in the queue (up to `group_commit_max_rows` rows, optionally
lingering `group_commit_max_wait_ms` for more), runs them in one transaction, each inside its
own savepoint, commits once, and only then answers every caller. One job failing (bad input found
late, a constraint) rolls back only its savepoint; the others commit.

A transient failure (SQLITE_BUSY, a locked table, an I/O error, a full disk) rolls the whole
group back and runs it again, up to `write_attempts` times with a growing delay; after that every
caller of the group gets UNAVAILABLE and the failure is logged. Nothing is acknowledged that was
not committed, and `after_commit` hooks (cache write-through) run after the commit and before the
answers, in commit order.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import apsw

from memoryd.errors import Unavailable

T = TypeVar("T")
log = logging.getLogger("memoryd.storage.writer")

TRANSIENT_ERRORS = (apsw.BusyError, apsw.LockedError, apsw.IOError, apsw.FullError)
_STOP = object()


@dataclasses.dataclass(frozen=True, slots=True)
class WriterSettings:
    """How the writer groups and retries."""

    max_rows: int
    max_wait_seconds: float
    attempts: int
    retry_delay_seconds: float


@dataclasses.dataclass(slots=True)
class WriterStats:
    """Counters, for logs and benchmarks."""

    groups: int = 0
    jobs: int = 0
    rows: int = 0
    retries: int = 0
    failed_groups: int = 0


@dataclasses.dataclass(slots=True)
class _Job(Generic[T]):
    run: Callable[[apsw.Connection], T]
    after_commit: Callable[[T], None] | None
    rows: int
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[T]
    outcome: tuple[bool, Any] = (False, None)


class Writer:
    """Owns the read-write connection; see the module docstring."""

    def __init__(self, connection: apsw.Connection, settings: WriterSettings) -> None:
        self._connection = connection
        self._settings = settings
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="memoryd-writer", daemon=True)
        self.stats = WriterStats()

    def start(self) -> None:
        """Start the writer thread; the connection is used only from it from now on."""
        self._thread.start()

    async def submit(
        self,
        run: Callable[[apsw.Connection], T],
        *,
        rows: int = 1,
        after_commit: Callable[[T], None] | None = None,
    ) -> T:
        """Run `run(connection)` in the next group; return its result once committed."""
        if self._closing:
            raise Unavailable("memoryd is shutting down; retry against another instance")
        loop = asyncio.get_running_loop()
        job: _Job[T] = _Job(run, after_commit, max(rows, 1), loop, loop.create_future())
        self._queue.put(job)
        return await job.future

    async def close(self) -> None:
        """Stop accepting jobs, commit everything already queued, then close the connection."""
        if self._closing:
            return
        self._closing = True
        self._queue.put(_STOP)
        if self._thread.is_alive():
            await asyncio.to_thread(self._thread.join)
        self._connection.close()

    # --- the writer thread -------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is _STOP:
                return
            group, stop = self._collect(first)
            self._commit_group(group)
            if stop:
                return

    def _collect(self, first: _Job[Any]) -> tuple[list[_Job[Any]], bool]:
        group = [first]
        rows = first.rows
        deadline = time.monotonic() + self._settings.max_wait_seconds
        while rows < self._settings.max_rows:
            try:
                remaining = deadline - time.monotonic()
                item = (
                    self._queue.get(timeout=remaining)
                    if remaining > 0
                    else self._queue.get_nowait()
                )
            except queue.Empty:
                break
            if item is _STOP:
                return group, True
            group.append(item)
            rows += item.rows
        return group, False

    def _commit_group(self, group: list[_Job[Any]]) -> None:
        self.stats.groups += 1
        self.stats.jobs += len(group)
        self.stats.rows += sum(job.rows for job in group)
        for attempt in range(1, self._settings.attempts + 1):
            try:
                self._connection.execute("BEGIN IMMEDIATE")
                for job in group:
                    job.outcome = self._run_job(job)
                self._connection.execute("COMMIT")
            except TRANSIENT_ERRORS as error:
                self._rollback()
                if attempt == self._settings.attempts:
                    self.stats.failed_groups += 1
                    log.error(  # noqa: TRY400 - a transient cause; its traceback says nothing
                        "write failed after %d attempts: %s",
                        attempt,
                        error,
                        extra={"event": "write_failed", "attempts": attempt, "jobs": len(group)},
                    )
                    failure = Unavailable(
                        f"the database is unavailable ({type(error).__name__}); nothing was "
                        "written, retry later"
                    )
                    self._deliver(group, (False, failure))
                    return
                self.stats.retries += 1
                log.warning(
                    "write attempt %d failed, retrying: %s",
                    attempt,
                    error,
                    extra={"event": "write_retry", "attempt": attempt, "jobs": len(group)},
                )
                time.sleep(self._settings.retry_delay_seconds * attempt)
            except Exception as error:  # BEGIN/COMMIT itself failed for a non-transient reason
                self._rollback()
                self.stats.failed_groups += 1
                log.exception("write group failed", extra={"event": "write_failed"})
                self._deliver(group, (False, error))
                return
            else:
                self._after_commit(group)
                self._deliver(group, None)
                return

    def _run_job(self, job: _Job[Any]) -> tuple[bool, Any]:
        self._connection.execute("SAVEPOINT job")
        try:
            value = job.run(self._connection)
        except TRANSIENT_ERRORS:
            raise
        except Exception as error:  # noqa: BLE001 - the job's own failure: undo only its savepoint
            self._connection.execute("ROLLBACK TO job; RELEASE job")
            return (False, error)
        self._connection.execute("RELEASE job")
        return (True, value)

    def _rollback(self) -> None:
        if not self._connection.in_transaction:
            return
        try:
            self._connection.execute("ROLLBACK")
        except apsw.Error:
            log.exception("rollback failed", extra={"event": "write_rollback_failed"})

    def _after_commit(self, group: list[_Job[Any]]) -> None:
        for job in group:
            succeeded, value = job.outcome
            if succeeded and job.after_commit is not None:
                try:
                    job.after_commit(value)
                except Exception:
                    log.exception("after-commit hook failed", extra={"event": "after_commit"})

    def _deliver(self, group: list[_Job[Any]], override: tuple[bool, Any] | None) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[_Job[Any], tuple[bool, Any]]]] = {}
        for job in group:
            by_loop.setdefault(job.loop, []).append((job, override or job.outcome))
        for loop, answers in by_loop.items():
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody is waiting
                loop.call_soon_threadsafe(_resolve, answers)


def _resolve(answers: list[tuple[_Job[Any], tuple[bool, Any]]]) -> None:
    for job, (succeeded, value) in answers:
        if job.future.done():  # the caller was cancelled; the write stands
            continue
        if succeeded:
            job.future.set_result(value)
        else:
            job.future.set_exception(value)
