"""What the memory SQL modules share: the column list, row mapping and owner filters."""

from __future__ import annotations

from memoryd.domain.memories import (
    Category,
    MemoryRecord,
    PromptTarget,
    Provenance,
    ScopeType,
)
from memoryd.domain.messages import Trust
from memoryd.domain.timestamps import from_text
from memoryd.storage.sql import Columns, Row

MEMORY = Columns(
    "r",
    (
        "id",
        "agent_id",
        "owner_id",
        "scope_type",
        "scope_id",
        "category",
        "key",
        "value",
        "confidence",
        "promote_target",
        "metadata_json",
        "trust",
        "source_id",
        "source_type",
        "source_name",
        "source_description",
        "session_id",
        "run_id",
        "source_message_id",
        "provenance_json",
        "created_at",
        "updated_at",
        "archived_at",
        "archived_by",
        "archive_reason",
    ),
)
MEMORY_COLUMNS = MEMORY.select
# RETURNING clauses cannot name a table alias.
RETURNED_COLUMNS = MEMORY.returning
# A memory alias `r` restricted to one agent and owner (two parameters).
OWNER_MATCH = "r.agent_id = ? AND r.owner_id = ?"


def memory_from_row(row: Row) -> MemoryRecord:
    """A MemoryRecord from MEMORY_COLUMNS (extra selected values after them are ignored)."""
    column = MEMORY.named(row)
    archived_at = column["archived_at"]
    return MemoryRecord(
        id=column["id"],
        agent_id=column["agent_id"],
        owner_id=column["owner_id"],
        scope_type=ScopeType(column["scope_type"]),
        scope_id=column["scope_id"],
        category=Category(column["category"]),
        key=column["key"],
        value=column["value"],
        confidence=column["confidence"],
        prompt_target=PromptTarget(column["promote_target"]),
        metadata_json=column["metadata_json"],
        trust=Trust(column["trust"]),
        provenance=Provenance(
            source_id=column["source_id"],
            source_type=column["source_type"],
            source_name=column["source_name"],
            source_description=column["source_description"],
            session_id=column["session_id"],
            run_id=column["run_id"],
            source_message_id=column["source_message_id"],
            details_json=column["provenance_json"],
        ),
        created_at=from_text(column["created_at"]),
        updated_at=from_text(column["updated_at"]),
        archived_at=from_text(archived_at) if archived_at is not None else None,
        archived_by=column["archived_by"],
        archive_reason=column["archive_reason"],
    )
