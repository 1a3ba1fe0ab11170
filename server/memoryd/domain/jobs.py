"""Scheduled jobs: the status of a job's memory source, and the lifecycle of its runs.

source   active -> paused -> active ...; active | paused -> deleted (final). A paused or
         deleted job's rows are kept but never recalled, and the job writes nothing more.
run      running (its first write) -> succeeded | failed (FinishJobRun), with a summary that
         is also the job's job_run_summary row "run:<run_id>", for the next run to recall.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import hashlib

from memoryd.domain.memories import MAX_KEY_CHARS
from memoryd.domain.quoting import clipped
from memoryd.errors import FailedPrecondition


class JobStatus(enum.StrEnum):
    """The status of a job's memory source (memory_sources.status)."""

    ACTIVE = "active"
    PAUSED = "paused"
    DELETED = "deleted"


class RunOutcome(enum.StrEnum):
    """How a run ended (job_runs.status)."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class JobRun:
    """A run of a scheduled job."""

    job_id: str
    run_id: str
    status: str  # running | succeeded | failed
    started_at: dt.datetime
    finished_at: dt.datetime | None
    summary: str


def check_transition(job_id: str, current: JobStatus, wanted: JobStatus) -> None:
    """A deleted job stays deleted."""
    if current is JobStatus.DELETED and wanted is not JobStatus.DELETED:
        raise FailedPrecondition(
            f"job {clipped(job_id)} was deleted; a deleted job cannot be {wanted.value} again"
        )


def check_writable(job_id: str, status: JobStatus) -> None:
    """Only an active job writes rows or finishes runs."""
    if status is not JobStatus.ACTIVE:
        raise FailedPrecondition(
            f"job {clipped(job_id)} is {status.value}; it writes nothing until it is active "
            "again (SetJobStatus)"
            if status is JobStatus.PAUSED
            else f"job {clipped(job_id)} is deleted; it writes nothing more"
        )


def check_finish(run: JobRun, outcome: RunOutcome, summary: str) -> bool:
    """Whether the run still needs finishing: False for a repeat of the same finish; a
    different finish of a finished run is refused."""
    if run.status == "running":
        return True
    if run.status == outcome.value and run.summary == summary:
        return False
    raise FailedPrecondition(
        f"run {clipped(run.run_id)} of job {clipped(run.job_id)} already finished as "
        f"{run.status}; a finished run cannot be finished differently"
    )


def summary_key(run_id: str) -> str:
    """The key of a run's summary row: `run:<run_id>`, or a readable prefix and a digest when
    that would pass the key limit."""
    key = f"run:{run_id}"
    if len(key) <= MAX_KEY_CHARS:
        return key
    digest = hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:24]
    return f"{key[: MAX_KEY_CHARS - 25]}~{digest}"
