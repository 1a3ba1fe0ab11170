"""The one writer: a thread that owns the only read-write connection and commits in groups.

Callers on the event loop submit jobs and await their results. Most jobs are a closure over
the transaction (`run(name, work)`). The set-based kinds, appends and transcript finals, are a
payload and its kind (a `Batch`, through `submit`): a function that carries out a list of
payloads of that kind in a few statements and returns their results in order.

The thread takes every job waiting in the queue (up to `group_commit_max_rows` rows, optionally
lingering `group_commit_max_wait_ms` for more), runs each run of consecutive jobs of one kind as
a single call, commits once, and only then answers every caller.

Set-based batches matter here more than anywhere: every SQLite call releases the interpreter
lock and must win it back from the event loop, so a group's cost follows the number of
statements it runs, not the rows. For the same reason a group that is a single batch (the
common case) runs without a savepoint. If a batch fails for a non-transient reason, the group
is rolled back and run again with a savepoint per batch, and a failing batch is re-run one
payload at a time, each in its own savepoint: one bad call gets its error, the others commit.

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
from contextlib import AbstractContextManager
from typing import Any, Generic, TypeVar

from memoryd.errors import Unavailable
from memoryd.log_events import Event
from memoryd.observability import metrics, tracing
from memoryd.storage import errors as database_errors
from memoryd.storage.errors import unavailable
from memoryd.storage.transaction import Transaction
from memoryd.storage.write_terms import (
    Batch,
    CommitClock,
    WriterConnection,
    WriterSettings,
    WriterStats,
)

T = TypeVar("T")
P = TypeVar("P")
log = logging.getLogger("memoryd.storage.writer")

_STOP = object()


class _Isolate(Exception):
    """An unguarded batch failed: roll the group back and run it again with savepoints."""


def _each(transaction: Transaction, works: list[Callable[[Transaction], Any]]) -> list[Any]:
    return [work(transaction) for work in works]


@dataclasses.dataclass(slots=True, kw_only=True)
class _Job(Generic[P, T]):
    batch: Batch[P, T]
    payload: P
    after_commit: Callable[[T], None] | None
    rows: int
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[T]
    outcome: tuple[bool, Any] = (False, None)
    # The jobs of the group it was committed in (for its span).
    group_jobs: int = 0


class Writer:
    """Owns the read-write connection; see the module docstring."""

    def __init__(
        self,
        connection: WriterConnection,
        settings: WriterSettings,
        *,
        name: str = "main",
        closed: Callable[[], None] | None = None,
    ) -> None:
        self._connection = connection
        # Called once the connection is closed: what served it stops (SQLite's checkpointer).
        self._closed = closed
        self._settings = settings
        self._metrics = _WriterMetrics(name)
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="memoryd-writer", daemon=True)
        self._closures: dict[str, Batch[Callable[[Transaction], Any], Any]] = {}
        self._clock: CommitClock | None = None
        self._queue_lock: AbstractContextManager[None] = contextlib.nullcontext()
        self.stats = WriterStats()

    def follow(self, clock: CommitClock) -> None:
        """Stamp every group with `clock` (before `start`)."""
        self._clock = clock

    def queue_writes(self, lock: AbstractContextManager[None]) -> None:
        """Hold `lock` around each group's transaction (before `start`): where several
        processes' writers share one SQLite database, a lock they wait for in the kernel, woken
        the moment it is free, instead of SQLite's busy handler, which sleeps 1, 2, 5, 10 ms...
        between tries."""
        self._queue_lock = lock

    @property
    def queued(self) -> int:
        """Jobs waiting for the writer thread (approximate, as any queue's size)."""
        return self._queue.qsize()

    def start(self) -> None:
        """Start the writer thread; the connection is used only from it from now on."""
        self._thread.start()

    async def run(
        self,
        name: str,
        work: Callable[[Transaction], T],
        *,
        rows: int = 1,
        after_commit: Callable[[T], None] | None = None,
    ) -> T:
        """Run `work(transaction)` in the next group; return its result once committed.

        `name` says what the work is (consecutive works of one name run as one call, as a
        batch's payloads do); `rows` is how many rows it writes, for the group's bound.
        """
        kind = self._closures.get(name)
        if kind is None:
            kind = self._closures.setdefault(name, Batch(name, _each))
        result: T = await self.submit(kind, work, rows=rows, after_commit=after_commit)
        return result

    async def submit(
        self,
        batch: Batch[P, T],
        payload: P,
        *,
        rows: int = 1,
        after_commit: Callable[[T], None] | None = None,
    ) -> T:
        """Carry out `payload` in the next group; return its result once committed."""
        if self._closing:
            raise Unavailable("memoryd is shutting down; retry against another instance")
        loop = asyncio.get_running_loop()
        job: _Job[P, T] = _Job(
            batch=batch,
            payload=payload,
            after_commit=after_commit,
            rows=max(rows, 1),
            loop=loop,
            future=loop.create_future(),
        )
        if not tracing.enabled():
            self._queue.put(job)
            return await job.future
        with tracing.span(f"memoryd.write {batch.name}", {"memoryd.writer.rows": job.rows}) as span:
            self._queue.put(job)
            result = await job.future
            tracing.annotate(span, {"memoryd.writer.group_jobs": job.group_jobs})
        return result

    async def close(self) -> None:
        """Stop accepting jobs, commit everything already queued, then close the connection."""
        if self._closing:
            return
        self._closing = True
        self._queue.put(_STOP)
        if self._thread.is_alive():
            await asyncio.to_thread(self._thread.join)
        self._connection.close()
        if self._closed is not None:
            await asyncio.to_thread(self._closed)

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

    def _collect(self, first: _Job[Any, Any]) -> tuple[list[_Job[Any, Any]], bool]:
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

    def _commit_group(self, group: list[_Job[Any, Any]]) -> None:
        self.stats.groups += 1
        self.stats.jobs += len(group)
        self.stats.rows += sum(job.rows for job in group)
        runs = _consecutive_runs(group)
        # Most groups are one batch (all appends): it runs without a savepoint, and if it fails
        # the transaction is rolled back and the group runs again with savepoints to find the
        # culprit. Every statement saved is one less wait for the interpreter lock.
        guarded = len(runs) > 1
        attempt = 1
        while True:
            begin = time.perf_counter()
            try:
                with self._queue_lock:
                    version = self._transaction(runs, guarded=guarded)
            except _Isolate:
                self._rollback()
                guarded = True
            except database_errors.TRANSIENT_ERRORS as error:
                self._rollback()
                if attempt == self._settings.attempts:
                    self._give_up(group, attempt, error)
                    return
                self.stats.retries += 1
                self._metrics.retries.inc()
                log.warning(
                    "write attempt %d failed, retrying: %s",
                    attempt,
                    error,
                    extra={"event": Event.WRITE_RETRY, "attempt": attempt, "jobs": len(group)},
                )
                time.sleep(self._settings.retry_delay_seconds * attempt)
                attempt += 1
            except Exception as error:  # BEGIN/COMMIT itself failed for a non-transient reason
                self._rollback()
                self.stats.failed_groups += 1
                self._metrics.failures.inc()
                log.exception("write group failed", extra={"event": Event.WRITE_FAILED})
                self._deliver(group, (False, error))
                return
            else:
                self.stats.commits += 1
                if metrics.RECORDING.on:
                    self._metrics.committed(group, time.perf_counter() - begin)
                for job in group:
                    job.group_jobs = len(group)
                if self._clock is None:
                    self._after_commit(group)
                else:
                    self._clock.committed(version, lambda: self._after_commit(group))
                self._deliver(group, None)
                return

    def _transaction(self, runs: list[list[_Job[Any, Any]]], *, guarded: bool) -> int:
        """The group's transaction, committed, or rolled back here when it raises (before the
        lock passes to another process's writer); its version on the clock (0 without one)."""
        try:
            self._connection.begin_write()
            for run in runs:
                self._run_batch(run, guarded=guarded)
            version = self._clock.advance(self._connection) if self._clock else 0
            self._connection.execute("COMMIT")
        except BaseException:
            self._rollback()  # before the lock passes on
            raise
        return version

    def _give_up(self, group: list[_Job[Any, Any]], attempts: int, error: Exception) -> None:
        self.stats.failed_groups += 1
        self._metrics.failures.inc()
        log.error(
            "write failed after %d attempts: %s",
            attempts,
            error,
            extra={
                "event": Event.WRITE_FAILED,
                "attempts": attempts,
                "jobs": len(group),
                "work": sorted({job.batch.name for job in group}),
            },
        )
        self._deliver(group, (False, unavailable(error, doing="nothing was written")))

    def _run_batch(self, jobs: list[_Job[Any, Any]], *, guarded: bool) -> None:
        """Run jobs of one kind as one call; guarded, a failure is isolated to its job."""
        if not guarded:
            try:
                results = jobs[0].batch.run(self._connection, [job.payload for job in jobs])
            except database_errors.TRANSIENT_ERRORS:
                raise
            except Exception as error:
                raise _Isolate from error
            self._record(jobs, results)
            return
        self._connection.execute("SAVEPOINT batch")
        try:
            results = jobs[0].batch.run(self._connection, [job.payload for job in jobs])
        except database_errors.TRANSIENT_ERRORS:
            raise
        except Exception as error:  # noqa: BLE001 - retried job by job below, to find the culprit
            self._connection.execute("ROLLBACK TO batch; RELEASE batch")
            if len(jobs) == 1:
                jobs[0].outcome = (False, error)
                return
            for job in jobs:
                self._run_batch([job], guarded=True)
            return
        self._connection.execute("RELEASE batch")
        self._record(jobs, results)

    @staticmethod
    def _record(jobs: list[_Job[Any, Any]], results: list[Any]) -> None:
        if len(results) != len(jobs):  # pragma: no cover - a defect in a Batch.run
            message = f"{jobs[0].batch.name} returned {len(results)} results for {len(jobs)} jobs"
            raise RuntimeError(message)
        for job, result in zip(jobs, results, strict=True):
            job.outcome = (True, result)

    def _rollback(self) -> None:
        if not self._connection.in_transaction:
            return
        try:
            self._connection.execute("ROLLBACK")
        except Exception:
            log.exception("rollback failed", extra={"event": Event.WRITE_ROLLBACK_FAILED})

    def _after_commit(self, group: list[_Job[Any, Any]]) -> None:
        for job in group:
            succeeded, value = job.outcome
            if succeeded and job.after_commit is not None:
                try:
                    job.after_commit(value)
                except Exception:
                    log.exception("after-commit hook failed", extra={"event": Event.AFTER_COMMIT})

    def _deliver(self, group: list[_Job[Any, Any]], override: tuple[bool, Any] | None) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[_Job[Any, Any], tuple[bool, Any]]]] = {}
        for job in group:
            by_loop.setdefault(job.loop, []).append((job, override or job.outcome))
        for loop, answers in by_loop.items():
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody is waiting
                loop.call_soon_threadsafe(_resolve, answers)


class _WriterMetrics:
    """A writer's metrics (memoryd.observability.metrics), bound to its name once."""

    __slots__ = ("failures", "labels", "retries")

    def __init__(self, name: str) -> None:
        self.labels = (name,)
        self.retries = metrics.WRITER_RETRIES.labels(name)
        self.failures = metrics.WRITER_FAILURES.labels(name)

    def committed(self, group: list[_Job[Any, Any]], seconds: float) -> None:
        """A group committed: its size and its transaction's time (from the writer thread)."""
        metrics.WRITER_GROUP_JOBS.observe(self.labels, len(group))
        metrics.WRITER_GROUP_ROWS.observe(self.labels, sum(job.rows for job in group))
        metrics.WRITER_COMMIT_SECONDS.observe(self.labels, seconds)


def _consecutive_runs(group: list[_Job[Any, Any]]) -> list[list[_Job[Any, Any]]]:
    """Split a group into runs of consecutive jobs of the same kind (order is kept)."""
    runs: list[list[_Job[Any, Any]]] = []
    for job in group:
        if runs and runs[-1][0].batch is job.batch:
            runs[-1].append(job)
        else:
            runs.append([job])
    return runs


def _resolve(answers: list[tuple[_Job[Any, Any], tuple[bool, Any]]]) -> None:
    for job, (succeeded, value) in answers:
        if job.future.done():  # the caller was cancelled; the write stands
            continue
        if succeeded:
            job.future.set_result(value)
        else:
            job.future.set_exception(value)
