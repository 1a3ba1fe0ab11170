"""Reads of memory rows: listings, recall (word index, then substring fallback), render input.

Every query filters by the caller's agent and owner columns; the owner's token in the word index
only narrows the candidates.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from memoryd.domain.conversation import OwnerKey, owner_scope_token
from memoryd.domain.jobs import JobStatus
from memoryd.domain.memories import MemoryRecord
from memoryd.domain.memory_queries import ListFilter, RankedMemory, SourceRow, Visible
from memoryd.domain.memory_sources import SourceInfo, SourceType
from memoryd.storage.engine import engine_of
from memoryd.storage.memory_rows import (
    MEMORY,
    MEMORY_COLUMNS,
    OWNER_MATCH,
    memory_from_row,
)
from memoryd.storage.sql import Row, rows
from memoryd.storage.substrings import contains
from memoryd.storage.transaction import Transaction


def get_by_id(connection: Transaction, memory_id: int) -> MemoryRecord | None:
    """Any row by id (the caller's ownership is checked by the use case)."""
    found = rows(
        connection, f"SELECT {MEMORY_COLUMNS} FROM memories AS r WHERE r.id = ?", (memory_id,)
    )
    return memory_from_row(found[0]) if found else None


def list_page(
    connection: Transaction,
    visible: Visible,
    filters: ListFilter,
    *,
    after: tuple[str, int] | None,
    limit: int,
) -> list[MemoryRecord]:
    """Rows most recently updated first, after the (updated_at, id) cursor."""
    sql = [f"SELECT {MEMORY_COLUMNS} FROM memories AS r WHERE {OWNER_MATCH}"]
    params: list[Any] = [visible.owner.agent_id, visible.owner.owner_id]
    _add_visible(sql, params, visible)
    if filters.categories:
        sql.append(f"AND r.category IN ({_placeholders(len(filters.categories))})")
        params.extend(category.value for category in filters.categories)
    if filters.key_prefix:
        # substr() compares exactly: no LIKE wildcards, and case-sensitive.
        sql.append("AND substr(r.key, 1, ?) = ?")
        params.extend((len(filters.key_prefix), filters.key_prefix))
    if after is not None:
        sql.append("AND (r.updated_at, r.id) < (?, ?)")
        params.extend(after)
    sql.append("ORDER BY r.updated_at DESC, r.id DESC LIMIT ?")
    params.append(limit)
    return [memory_from_row(row) for row in rows(connection, " ".join(sql), params)]


def search_words(
    connection: Transaction,
    visible: Visible,
    expression: str,
    limit: int,
    *,
    exclude_ids: Sequence[int] = (),
    counted: Mapping[str, float] | None = None,
) -> list[RankedMemory]:
    """Whole-word matches over category, key and value: the word index's score (bm25 on
    SQLite; with `counted`, the rows of the index holding each word as the search read them,
    scored with those: engine.WordIndex), then newest, then id."""
    match = engine_of(connection).words.match_memories(
        connection, expression, owner_scope_token(visible.owner), counted=counted
    )
    sql = [
        (
            f"SELECT {MEMORY_COLUMNS}, {match.score} AS score FROM {match.tables} "
            f"WHERE {match.condition} AND {OWNER_MATCH}"
        )
    ]
    params: list[Any] = [
        *match.score_params,
        *match.params,
        visible.owner.agent_id,
        visible.owner.owner_id,
    ]
    _add_visible(sql, params, visible)
    if exclude_ids:
        sql.append(f"AND r.id NOT IN ({_placeholders(len(exclude_ids))})")
        params.extend(exclude_ids)
    sql.append("ORDER BY score, r.updated_at DESC, r.id DESC LIMIT ?")
    params.append(limit)
    return [
        RankedMemory(memory_from_row(row), float(MEMORY.after(row, 0)), word_match=True)
        for row in rows(connection, " ".join(sql), params)
    ]


def held_in_view(
    connection: Transaction, visible: Visible, expressions: Sequence[str]
) -> list[bool]:
    """Whether any row the caller may see holds each expression (a quoted phrase): one lookup
    an expression, unscored, which stops at the first row."""
    words = engine_of(connection).words
    token = owner_scope_token(visible.owner)
    found = []
    for expression in expressions:
        match = words.match_memories(connection, expression, token, scored=False)
        sql = [f"SELECT 1 FROM {match.tables} WHERE {match.condition} AND {OWNER_MATCH}"]
        params: list[Any] = [*match.params, visible.owner.agent_id, visible.owner.owner_id]
        _add_visible(sql, params, visible)
        sql.append("LIMIT 1")
        found.append(bool(rows(connection, " ".join(sql), params)))
    return found


def by_ids(connection: Transaction, memory_ids: Sequence[int]) -> dict[int, MemoryRecord]:
    """Rows by id (the ids come from a search that already applied the caller's visibility)."""
    if not memory_ids:
        return {}
    found = rows(
        connection,
        f"SELECT {MEMORY_COLUMNS} FROM memories AS r "
        f"WHERE r.id IN ({_placeholders(len(memory_ids))})",
        list(memory_ids),
    )
    records = (memory_from_row(row) for row in found)
    return {record.id: record for record in records}


def search_substrings(
    connection: Transaction,
    visible: Visible,
    words: tuple[str, ...],
    *,
    exclude_ids: list[int],
    limit: int,
) -> list[RankedMemory]:
    """Rows whose key or value contains any word: most matching words first, then newest.

    Words are compared with instr() ignoring case (memoryd.storage.substrings), never with
    LIKE, so no character of the query acts as a wildcard. The scan is bounded by the owner's
    rows (an index range).
    """
    engine = engine_of(connection)
    terms: list[str] = []
    params: list[Any] = []
    for word in words:
        in_key, key_param = contains(engine, "r.key", word)
        in_value, value_param = contains(engine, "r.value", word)
        terms.append(f"CASE WHEN {in_key} OR {in_value} THEN 1 ELSE 0 END")
        params.extend((key_param, value_param))
    matches = " + ".join(terms)
    sql = [
        (
            f"SELECT {MEMORY_COLUMNS} FROM (SELECT r.*, {matches} AS hits FROM memories AS r "
            f"WHERE {OWNER_MATCH}"
        )
    ]
    params.extend((visible.owner.agent_id, visible.owner.owner_id))
    _add_visible(sql, params, visible)
    if exclude_ids:
        sql.append(f"AND r.id NOT IN ({_placeholders(len(exclude_ids))})")
        params.extend(exclude_ids)
    sql.append(") AS r WHERE hits > 0 ORDER BY hits DESC, r.updated_at DESC, r.id DESC LIMIT ?")
    params.append(limit)
    return [
        RankedMemory(memory_from_row(row), 0.0, word_match=False)
        for row in rows(connection, " ".join(sql), params)
    ]


def by_key(connection: Transaction, visible: Visible, key: str, limit: int) -> list[MemoryRecord]:
    """Rows with exactly this key in the visible scopes, newest first."""
    sql = [f"SELECT {MEMORY_COLUMNS} FROM memories AS r WHERE {OWNER_MATCH} AND r.key = ?"]
    params: list[Any] = [visible.owner.agent_id, visible.owner.owner_id, key]
    _add_visible(sql, params, visible)
    sql.append("ORDER BY r.updated_at DESC, r.id DESC LIMIT ?")
    params.append(limit)
    return [memory_from_row(row) for row in rows(connection, " ".join(sql), params)]


def render_input(connection: Transaction, owner: OwnerKey) -> list[MemoryRecord]:
    """The owner's active rows that render into a prompt file."""
    return [
        memory_from_row(row)
        for row in rows(
            connection,
            f"SELECT {MEMORY_COLUMNS} FROM memories AS r WHERE {OWNER_MATCH} "
            "AND r.archived_at IS NULL AND r.promote_target != 'none'",
            (owner.agent_id, owner.owner_id),
        )
    ]


def source(connection: Transaction, owner: OwnerKey, source_id: str) -> SourceRow | None:
    """One memory source of the owner."""
    found = rows(
        connection,
        "SELECT id, source_type, name, description, memory_scope, status, created_at, "
        "updated_at FROM memory_sources WHERE agent_id = ? AND owner_id = ? AND id = ?",
        (owner.agent_id, owner.owner_id, source_id),
    )
    return _source_row(found[0]) if found else None


def list_sources(
    connection: Transaction,
    owner: OwnerKey,
    *,
    status: str,
    source_type: str,
    after: tuple[str, str] | None,
    limit: int,
) -> list[SourceRow]:
    """The owner's memory sources, most recently updated first, after the (updated_at, id)
    of the previous page's last one."""
    sql = [
        (
            "SELECT id, source_type, name, description, memory_scope, status, created_at, "
            "updated_at FROM memory_sources WHERE agent_id = ? AND owner_id = ?"
        )
    ]
    params: list[Any] = [owner.agent_id, owner.owner_id]
    if status:
        sql.append("AND status = ?")
        params.append(status)
    if source_type:
        sql.append("AND source_type = ?")
        params.append(source_type)
    if after is not None:
        sql.append("AND (updated_at < ? OR (updated_at = ? AND id > ?))")
        params.extend((after[0], after[0], after[1]))
    sql.append("ORDER BY updated_at DESC, id LIMIT ?")
    params.append(limit)
    return [_source_row(row) for row in rows(connection, " ".join(sql), params)]


def _source_row(row: Row) -> SourceRow:
    """A SourceRow from (id, source_type, name, description, memory_scope, status, created_at,
    updated_at)."""
    source_id, source_type, name, description, memory_scope, status, created, updated = row
    info = SourceInfo(
        id=source_id,
        source_type=SourceType(source_type),
        name=name,
        description=description,
        memory_scope=memory_scope,
    )
    return SourceRow(info, JobStatus(status), created, updated)


def visible_conditions(visible: Visible) -> tuple[str, list[Any]]:
    """The conditions (each starting with AND) on rows `r` that the caller may see."""
    sql: list[str] = []
    params: list[Any] = []
    _add_visible(sql, params, visible)
    return " ".join(sql), params


def _add_visible(sql: list[str], params: list[Any], visible: Visible) -> None:
    if visible.active_sources:
        sql.append(
            "AND NOT EXISTS (SELECT 1 FROM memory_sources AS s WHERE s.agent_id = r.agent_id "
            "AND s.owner_id = r.owner_id AND s.id = r.source_id AND s.status != 'active')"
        )
    if visible.unrendered_only:
        sql.append("AND r.promote_target = 'none'")
    if visible.archived is True:
        sql.append("AND r.archived_at IS NOT NULL")
    elif visible.archived is False:
        sql.append("AND r.archived_at IS NULL")
    if not visible.scopes:
        sql.append("AND r.scope_type != 'job'")
        return
    clauses = []
    for scope_type, scope_id in visible.scopes:
        if scope_id is None:
            clauses.append("r.scope_type = ?")
            params.append(scope_type.value)
        else:
            clauses.append("(r.scope_type = ? AND r.scope_id = ?)")
            params.extend((scope_type.value, scope_id))
    sql.append(f"AND ({' OR '.join(clauses)})")


def _placeholders(count: int) -> str:
    return ", ".join("?" * count)


def recent_agent_entries(
    connection: Transaction, owner: OwnerKey, limit: int, *, leaving_out: Sequence[int] = ()
) -> list[tuple[str, str]]:
    """(key, value) of the owner's most recently updated active agent-scope rows, apart from
    the rows `leaving_out` (those the memory block shows already)."""
    skipped = list(leaving_out)
    found = rows(
        connection,
        f"SELECT r.key, r.value FROM memories AS r WHERE {OWNER_MATCH} AND r.scope_type = 'agent' "
        "AND r.archived_at IS NULL "
        "AND r.id NOT IN (SELECT CAST(j.value AS BIGINT) FROM "
        f"{engine_of(connection).json_values('?', 'j')}) "
        "ORDER BY r.updated_at DESC, r.id DESC LIMIT ?",
        (owner.agent_id, owner.owner_id, json.dumps(skipped), limit),
    )
    return [(str(row[0]), str(row[1])) for row in found]
