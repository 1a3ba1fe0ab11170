"""SQL of export and import: every kind of record read from its table, and stored back.

An export reads every kind in one read transaction (one snapshot), in file order. An import
stores a batch of records kind by kind, set-based (one INSERT ... SELECT per run of a kind, so
the word indexes get one segment per batch, as appends do): rows already there with exactly the
same values are counted as present and skipped, so a cut-off import can be run again; a row
that is there with other values is a conflict. Columns memoryd derives are computed here:
search tokens and token counts, and a revision's resource id from its key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import cast

from memoryd.domain.export_shapes import SHAPES, Kind
from memoryd.domain.resources import checkpoint_owner_prefix
from memoryd.domain.transfer import Selection
from memoryd.errors import FailedPrecondition
from memoryd.storage import checkpoint_split
from memoryd.storage import errors as database_errors
from memoryd.storage.engine import engine_of
from memoryd.storage.sql import Row, rows, savepoint
from memoryd.storage.transaction import Transaction

_OWNED = "(:agent = '' OR t.agent_id = :agent) AND (:owner = '' OR t.owner_id = :owner)"
# A resource belongs to an owner when it is one of the owner's prompt files, or the checkpoint
# of one of the owner's conversations (its scope id starts with the owner, :prefix).
_RESOURCE_SELECTED = (
    "(:agent = '' OR s.agent_id = :agent) AND (:owner = '' "
    "OR (s.resource_type <> 'checkpoint' AND s.scope_id = :owner) "
    "OR (s.resource_type = 'checkpoint' AND substr(s.scope_id, 1, length(:prefix)) = :prefix))"
)
# A checkpoint resource of the version 1 format: its scope id does not name the owner.
_OLD_CHECKPOINTS = (
    "SELECT 1 FROM resources WHERE resource_type = 'checkpoint' "
    "AND length(scope_id) - length(replace(scope_id, ':', '')) = 2 LIMIT 1"
)


@dataclasses.dataclass(frozen=True, slots=True)
class Table:
    """Where a kind's rows live: the FROM clause (alias t, or s for resources), the filter of a
    selection, the order, and the table written to."""

    source: str
    selected: str
    order: str
    table: str


TABLES: dict[Kind, Table] = {
    Kind.CONVERSATION: Table("conversations AS t", _OWNED, "t.id", "conversations"),
    Kind.REVIEW_STATE: Table(
        "memory_review_state AS t",
        _OWNED,
        "t.agent_id, t.owner_id, t.channel, t.chat_id, t.thread_scope",
        "memory_review_state",
    ),
    Kind.MESSAGE: Table("messages AS t", _OWNED, "t.id", "messages"),
    Kind.MEMORY_SOURCE: Table(
        "memory_sources AS t", _OWNED, "t.agent_id, t.owner_id, t.id", "memory_sources"
    ),
    Kind.SCHEDULED_JOB: Table(
        "scheduled_jobs AS t", _OWNED, "t.agent_id, t.owner_id, t.job_id", "scheduled_jobs"
    ),
    Kind.JOB_RUN: Table("job_runs AS t", _OWNED, "t.id", "job_runs"),
    Kind.MEMORY: Table("memories AS t", _OWNED, "t.id", "memories"),
    Kind.REVIEW_RUN: Table("review_runs AS t", _OWNED, "t.id", "review_runs"),
    Kind.RESOURCE: Table(
        "resources AS s",
        _RESOURCE_SELECTED,
        "s.agent_id, s.resource_type, s.scope_id",
        "resources",
    ),
    Kind.RESOURCE_REVISION: Table(
        "resource_revisions AS t JOIN resources AS s ON s.id = t.resource_id",
        _RESOURCE_SELECTED,
        "s.agent_id, s.resource_type, s.scope_id, t.revision",
        "resource_revisions",
    ),
    Kind.TRANSCRIPT_SESSION: Table(
        "transcript_sessions AS t",
        _OWNED,
        "t.agent_id, t.owner_id, t.device_id, t.session_id",
        "transcript_sessions",
    ),
    Kind.ENDED_SESSION: Table("ended_sessions AS t", _OWNED, "t.id", "ended_sessions"),
}
# Columns read from the resource (alias s) rather than the kind's own table.
RESOURCE_KEY = ("agent_id", "resource_type", "scope_id")


def select_list(kind: Kind) -> str:
    alias = "s" if kind is Kind.RESOURCE else "t"
    return ", ".join(
        f"s.{column}"
        if kind is Kind.RESOURCE_REVISION and column in RESOURCE_KEY
        else f"{alias}.{column}"
        for column in SHAPES[kind].columns
    )


# --- export --------------------------------------------------------------------------------------


def _parameters(chosen: Selection) -> dict[str, str]:
    return {
        "agent": chosen.agent_id,
        "owner": chosen.owner_id,
        "prefix": checkpoint_owner_prefix(chosen.owner_id),
    }


def count(connection: Transaction, chosen: Selection) -> int:
    """How many records an export of `chosen` holds (in the caller's read transaction)."""
    parameters = _parameters(chosen)
    total = 0
    for table in TABLES.values():
        sql = f"SELECT count(*) FROM {table.source} WHERE {table.selected}"
        total += cast("int", connection.execute(sql, parameters).fetchall()[0][0])
    return total


def read(connection: Transaction, chosen: Selection) -> Iterator[tuple[Kind, Row]]:
    """Every record of `chosen`, in file order (in the caller's read transaction)."""
    parameters = _parameters(chosen)
    for kind, table in TABLES.items():
        sql = (
            f"SELECT {select_list(kind)} FROM {table.source} WHERE {table.selected} "
            f"ORDER BY {table.order}"
        )
        for row in connection.execute(sql, parameters):
            yield kind, row


# --- import --------------------------------------------------------------------------------------


# What makes a database not empty, for a migration into it: (what, the query counting it).
_HELD = (
    ("conversations", "SELECT count(*) FROM conversations"),
    ("memory rows", "SELECT count(*) FROM memories"),
    ("memory sources", "SELECT count(*) FROM memory_sources"),
    ("resources", "SELECT count(*) FROM resources"),
    ("transcript sessions", "SELECT count(*) FROM transcript_sessions"),
)


def held(connection: Transaction) -> dict[str, int]:
    """What the database holds already, by kind (nothing: an empty dict)."""
    found = {what: int(rows(connection, sql)[0][0]) for what, sql in _HELD}
    return {what: count for what, count in found.items() if count}


def split_old_checkpoints(connection: Transaction) -> bool:
    """Split checkpoint resources of the version 1 format by owner, as migration 0009 did
    (memoryd.storage.checkpoint_split, in the caller's transaction); whether there were any.
    FAILED_PRECONDITION when a split revision would land on a stored one of the same number."""
    if not rows(connection, _OLD_CHECKPOINTS):
        return False
    try:
        with savepoint(connection, "checkpoint_split"):
            connection.execute(checkpoint_split.statements(engine_of(connection)))
    except database_errors.CONSTRAINT_ERRORS:
        raise FailedPrecondition(
            "the version 1 export's checkpoints, once split by owner, collide with stored "
            "checkpoint revisions; import it into an empty data directory"
        ) from None
    return True
