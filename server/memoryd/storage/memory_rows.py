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
from memoryd.storage.history_rows import Row

MEMORY_COLUMNS = (
    "r.id, r.agent_id, r.owner_id, r.scope_type, r.scope_id, r.category, r.key, r.value, "
    "r.confidence, r.promote_target, r.metadata_json, r.trust, r.source_id, r.source_type, "
    "r.source_name, r.source_description, r.session_id, r.run_id, r.source_message_id, "
    "r.provenance_json, r.created_at, r.updated_at, r.archived_at, r.archived_by, "
    "r.archive_reason"
)
MEMORY_COLUMN_COUNT = 25
# RETURNING clauses cannot name a table alias.
RETURNED_COLUMNS = MEMORY_COLUMNS.replace("r.", "")
# A memory alias `r` restricted to one agent and owner (two parameters).
OWNER_MATCH = "r.agent_id = ? AND r.owner_id = ?"


def memory_from_row(row: Row) -> MemoryRecord:
    """A MemoryRecord from MEMORY_COLUMNS."""
    return MemoryRecord(
        id=row[0],
        agent_id=row[1],
        owner_id=row[2],
        scope_type=ScopeType(row[3]),
        scope_id=row[4],
        category=Category(row[5]),
        key=row[6],
        value=row[7],
        confidence=row[8],
        prompt_target=PromptTarget(row[9]),
        metadata_json=row[10],
        trust=Trust(row[11]),
        provenance=Provenance(
            source_id=row[12],
            source_type=row[13],
            source_name=row[14],
            source_description=row[15],
            session_id=row[16],
            run_id=row[17],
            source_message_id=row[18],
            details_json=row[19],
        ),
        created_at=from_text(row[20]),
        updated_at=from_text(row[21]),
        archived_at=from_text(row[22]) if row[22] is not None else None,
        archived_by=row[23],
        archive_reason=row[24],
    )
