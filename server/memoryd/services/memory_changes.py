"""The changes of memory rows, decided: each reads the row in the writer's transaction, holds the
change to the domain's rules (memoryd.domain.memories: who may change a row, which rows are
never edited; memoryd.domain.jobs: a paused or deleted job writes nothing), then has storage
write it. A refused change changes nothing. Every writer of memory rows (the API's use cases,
the reviewer, scheduled jobs, a rollback) goes through here, so the rules are applied in one
place and storage only stores.
"""

from __future__ import annotations

import datetime as dt

from memoryd.domain.conversation import OwnerKey
from memoryd.domain.jobs import check_writable
from memoryd.domain.memories import (
    Category,
    MemoryRecord,
    NewFact,
    check_editable,
    check_guest_may_change,
)
from memoryd.domain.memory_queries import Locator
from memoryd.domain.memory_sources import SourceInfo
from memoryd.domain.messages import Trust
from memoryd.errors import FailedPrecondition, InvalidArgument
from memoryd.storage import jobs
from memoryd.storage import memory_writes as writes
from memoryd.storage.memory_writes import Stored
from memoryd.storage.transaction import Transaction


def check_job_writes(connection: Transaction, owner: OwnerKey, job_id: str | None) -> None:
    """A paused or deleted job writes nothing (FAILED_PRECONDITION); a job never seen may."""
    if job_id is None:
        return
    status = jobs.source_status(connection, owner, job_id)
    if status is not None:
        check_writable(job_id, status)


def register_source(
    connection: Transaction,
    owner: OwnerKey,
    source: SourceInfo,
    now: dt.datetime,
    *,
    job_id: str | None = None,
) -> None:
    """Record the source rows are written through (and the job), once the job may write."""
    check_job_writes(connection, owner, job_id)
    writes.register_source(connection, owner, source, now, job_id=job_id)


def upsert(
    connection: Transaction,
    fact: NewFact,
    source: SourceInfo,
    now: dt.datetime,
    *,
    job_id: str | None = None,
) -> Stored:
    """Store `fact` by key: a new row, or the existing one updated in place (un-archived), if
    the writer may replace it."""
    locator = Locator(scope_type=fact.scope_type, scope_id=fact.scope_id, key=fact.key)
    before = writes.find(connection, fact.owner, locator)
    if before is not None:
        check_editable(before)
        check_guest_may_change(before, fact.trust, "replace")
    message_id = fact.provenance.source_message_id
    if message_id is not None and not writes.message_belongs(connection, fact.owner, message_id):
        raise InvalidArgument(
            f"source_message_id {message_id} is not a stored message of this agent and owner"
        )
    check_job_writes(connection, fact.owner, job_id)
    return writes.upsert(connection, fact, source, now, before=before, job_id=job_id)


def set_value(
    connection: Transaction,
    owner: OwnerKey,
    locator: Locator,
    *,
    value: str | None,
    metadata_json: str | None,
    trust: Trust,
    now: dt.datetime,
    category: Category | None = None,
) -> Stored:
    """Replace the value and/or merge metadata of an existing, active row of the caller.

    `category`, when given, must be the row's: replacing a value never changes what it is.
    """
    before = writes.require(connection, owner, locator)
    if category is not None and category is not before.category:
        raise InvalidArgument(
            f"memory {before.id} is {before.category.value}; replacing its value cannot make "
            f"it {category.value}"
        )
    check_editable(before)
    check_guest_may_change(before, trust, "replace")
    if before.archived:
        raise FailedPrecondition(f"memory {before.id} is archived; restore it first")
    return writes.set_value(
        connection, before, value=value, metadata_json=metadata_json, trust=trust, now=now
    )


def archive(
    connection: Transaction,
    owner: OwnerKey,
    memory_id: int,
    *,
    reason: str | None,
    archived_by: str,
    trust: Trust,
    now: dt.datetime,
) -> Stored:
    """Forget a row: archived, kept. Archiving an archived row changes nothing."""
    before = writes.require(connection, owner, Locator(id=memory_id))
    check_guest_may_change(before, trust, "archive")
    if before.archived:
        return Stored(before, before)
    return writes.archive(connection, before, reason=reason, archived_by=archived_by, now=now)


def restore(
    connection: Transaction, owner: OwnerKey, memory_id: int, *, trust: Trust, now: dt.datetime
) -> Stored:
    """Un-archive a row of the caller (Fermix skips this ownership check; memoryd does not).
    Restoring an active row changes nothing."""
    before = writes.require(connection, owner, Locator(id=memory_id))
    check_guest_may_change(before, trust, "restore")
    if not before.archived:
        return Stored(before, before)
    return writes.restore(connection, before, now=now)


def delete(
    connection: Transaction, owner: OwnerKey, locator: Locator, *, trust: Trust
) -> MemoryRecord | None:
    """Erase a row of the caller and its index entries; None when there was none."""
    before = writes.find(connection, owner, locator)
    if before is None:
        return None
    check_guest_may_change(before, trust, "delete")
    writes.delete(connection, before)
    return before
