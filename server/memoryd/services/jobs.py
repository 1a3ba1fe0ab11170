"""Scheduled jobs: pause, resume and delete a job's memory source; finish a run with its summary.

Each call is one writer transaction. A run's summary is the job's job_run_summary row
"run:<run_id>", written in the same transaction as the run's end, so the next run recalls it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from memoryd.domain.conversation import OwnerKey
from memoryd.domain.jobs import (
    JobRun,
    JobStatus,
    RunOutcome,
    check_finish,
    check_transition,
    summary_key,
)
from memoryd.domain.memories import (
    Caller,
    Category,
    MemoryRecord,
    ScopeType,
    StoreRequest,
    check_value,
    job_scope_id,
)
from memoryd.domain.memory_admission import admit_new
from memoryd.domain.memory_queries import Locator, SourceRow
from memoryd.domain.memory_sources import source_info
from memoryd.domain.messages import Trust
from memoryd.domain.timestamps import utc_now
from memoryd.services import memory_changes
from memoryd.services.long_term_memory import LongTermMemory
from memoryd.storage import jobs, memory_reads, memory_writes
from memoryd.storage.transaction import Transaction
from memoryd.storage.writer import Writer


@dataclasses.dataclass(frozen=True, slots=True)
class FinishedRun:
    """A finished run and its summary row (None for a blank summary)."""

    run: JobRun
    summary: MemoryRecord | None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _Finish:
    caller: Caller
    job_id: str
    run_id: str
    outcome: RunOutcome
    summary: str


class JobService:
    """Job sources and runs over the writer; row caches are kept by the memory service."""

    def __init__(self, writer: Writer, memory: LongTermMemory) -> None:
        self._writer = writer
        self._memory = memory

    async def set_status(self, owner: OwnerKey, job_id: str, status: JobStatus) -> SourceRow:
        """Pause, resume or delete the job's source; NOT_FOUND when the job never wrote."""
        now = utc_now()
        return await self._writer.run(
            "job_status", lambda transaction: _set_status(transaction, owner, job_id, status, now)
        )

    async def finish_run(
        self, caller: Caller, run_id: str, outcome: RunOutcome, summary: str
    ) -> FinishedRun:
        """End a run (recorded now if it never wrote), with its summary row."""
        if caller.job_id is None:  # pragma: no cover - the api requires job_id
            message = "finish_run needs a job's caller"
            raise ValueError(message)
        text = check_value(summary, "summary") if summary.strip() else ""
        job = _Finish(
            caller=caller, job_id=caller.job_id, run_id=run_id, outcome=outcome, summary=text
        )
        return await self._writer.run(
            "job_finish",
            lambda transaction: _finish(transaction, job),
            after_commit=self._invalidate,
        )

    def _invalidate(self, finished: FinishedRun) -> None:
        if finished.summary is not None:
            self._memory.rows.invalidate(finished.summary.id)


def _set_status(
    connection: Transaction, owner: OwnerKey, job_id: str, status: JobStatus, now: dt.datetime
) -> SourceRow:
    current = jobs.require_status(connection, owner, job_id)
    check_transition(job_id, current, status)
    if current is not status:
        jobs.set_status(connection, owner, job_id, status, now)
    source = memory_reads.source(connection, owner, job_scope_id(job_id))
    if source is None:  # pragma: no cover - require_status found it in this transaction
        message = f"the source of job {job_id} vanished"
        raise RuntimeError(message)
    return source


def _finish(connection: Transaction, job: _Finish) -> FinishedRun:
    caller = job.caller
    owner = caller.owner
    job_id = job.job_id
    now = utc_now()
    # register_source refuses a paused or deleted job, and records a job that never wrote.
    memory_changes.register_source(connection, owner, source_info(caller), now, job_id=job_id)
    run = jobs.start_run(connection, owner, job_id, job.run_id, now)
    key = summary_key(job.run_id)
    if check_finish(run, job.outcome, job.summary):
        run = jobs.finish_run(connection, owner, run, job.outcome, job.summary, now)
    if not job.summary:
        return FinishedRun(run, None)
    locator = Locator(scope_type=ScopeType.JOB, scope_id=caller.scope_id(ScopeType.JOB), key=key)
    existing = memory_writes.find(connection, owner, locator)
    if existing is not None:  # a repeat of this finish, or a summary the run stored itself
        return FinishedRun(run, existing)
    fact = admit_new(
        StoreRequest(
            caller=caller,
            trust=Trust.OPERATOR,
            category=Category.JOB_RUN_SUMMARY,
            key=key,
            value=job.summary,
            id=0,
            scope_type=None,
            metadata_json="",
            confidence=0.0,
            session_id="",
            run_id=job.run_id,
            source_message_id=0,
        )
    )
    stored = memory_changes.upsert(connection, fact, source_info(caller), now, job_id=job_id)
    return FinishedRun(run, stored.record)
