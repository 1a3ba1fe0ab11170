"""Scheduled jobs in SQLite: the status of a job's memory source and its runs.

Every function runs inside the caller's transaction (the writer's, for writes).
"""

from __future__ import annotations

import datetime as dt

from memoryd.domain.conversation import OwnerKey
from memoryd.domain.jobs import JobRun, JobStatus, RunOutcome
from memoryd.domain.memories import job_scope_id
from memoryd.domain.quoting import clipped
from memoryd.domain.timestamps import from_text, to_text
from memoryd.errors import NotFound
from memoryd.storage.sql import rows
from memoryd.storage.transaction import Transaction


def source_status(connection: Transaction, owner: OwnerKey, job_id: str) -> JobStatus | None:
    """The status of the job's memory source; None when the job never wrote."""
    found = rows(
        connection,
        "SELECT status FROM memory_sources WHERE agent_id = ? AND owner_id = ? AND id = ? "
        "AND source_type = 'scheduled_job'",
        (owner.agent_id, owner.owner_id, job_scope_id(job_id)),
    )
    return JobStatus(found[0][0]) if found else None


def require_status(connection: Transaction, owner: OwnerKey, job_id: str) -> JobStatus:
    """The status of a job that has a memory source; NOT_FOUND otherwise."""
    status = source_status(connection, owner, job_id)
    if status is None:
        raise NotFound(
            f"job {clipped(job_id)} has no memory source for agent {clipped(owner.agent_id)} "
            f"and owner {clipped(owner.owner_id)}"
        )
    return status


def set_status(
    connection: Transaction,
    owner: OwnerKey,
    job_id: str,
    status: JobStatus,
    now: dt.datetime,
) -> None:
    """The job's source and the job itself take `status`."""
    stamp = to_text(now)
    connection.execute(
        "UPDATE memory_sources SET status = ?, updated_at = ? WHERE agent_id = ? "
        "AND owner_id = ? AND id = ?",
        (status.value, stamp, owner.agent_id, owner.owner_id, job_scope_id(job_id)),
    )
    connection.execute(
        "UPDATE scheduled_jobs SET status = ?, updated_at = ? WHERE agent_id = ? "
        "AND owner_id = ? AND job_id = ?",
        (status.value, stamp, owner.agent_id, owner.owner_id, job_id),
    )


def start_run(
    connection: Transaction, owner: OwnerKey, job_id: str, run_id: str, now: dt.datetime
) -> JobRun:
    """The run, recorded as running when it is new."""
    connection.execute(
        "INSERT INTO job_runs (agent_id, owner_id, job_id, run_id, started_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        (owner.agent_id, owner.owner_id, job_id, run_id, to_text(now)),
    )
    found = rows(
        connection,
        "SELECT status, started_at, finished_at, summary FROM job_runs WHERE agent_id = ? "
        "AND owner_id = ? AND job_id = ? AND run_id = ?",
        (owner.agent_id, owner.owner_id, job_id, run_id),
    )
    status, started_at, finished_at, summary = found[0]
    return JobRun(
        job_id=job_id,
        run_id=run_id,
        status=status,
        started_at=from_text(started_at),
        finished_at=from_text(finished_at) if finished_at is not None else None,
        summary=summary,
    )


def finish_run(  # noqa: PLR0917 - the run and how it ended
    connection: Transaction,
    owner: OwnerKey,
    run: JobRun,
    outcome: RunOutcome,
    summary: str,
    now: dt.datetime,
) -> JobRun:
    """Record the run's end."""
    connection.execute(
        "UPDATE job_runs SET status = ?, finished_at = ?, summary = ? WHERE agent_id = ? "
        "AND owner_id = ? AND job_id = ? AND run_id = ?",
        (
            outcome.value,
            to_text(now),
            summary,
            owner.agent_id,
            owner.owner_id,
            run.job_id,
            run.run_id,
        ),
    )
    return JobRun(
        job_id=run.job_id,
        run_id=run.run_id,
        status=outcome.value,
        started_at=run.started_at,
        finished_at=now,
        summary=summary,
    )
