"""Versioned resources in SQLite: revisions are committed in the caller's write transaction."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from memoryd.domain.resources import (
    MutationSource,
    ResourceInfo,
    ResourceKey,
    ResourceType,
    Revision,
    content_hash,
)
from memoryd.domain.timestamps import from_text, to_text
from memoryd.storage.sql import Columns, Row, rows
from memoryd.storage.transaction import Transaction

# A revision joined with its resource (aliases s and v).
_REVISION = Columns(
    "v",
    (
        "s.agent_id",
        "s.resource_type",
        "s.scope_id",
        "revision",
        "parent_revision",
        "content_hash",
        "content",
        "byte_size",
        "mutation_source",
        "provenance_json",
        "created_at",
    ),
)
_REVISION_COLUMNS = _REVISION.select
_KEY_MATCH = "s.agent_id = ? AND s.resource_type = ? AND s.scope_id = ?"


def current(connection: Transaction, key: ResourceKey) -> Revision | None:
    """The resource's current revision, or None when it has none."""
    found = rows(
        connection,
        f"SELECT {_REVISION_COLUMNS} FROM resources AS s JOIN resource_revisions AS v "
        f"ON v.resource_id = s.id AND v.revision = s.current_revision WHERE {_KEY_MATCH}",
        _key_params(key),
    )
    return _revision(found[0]) if found else None


def revision(connection: Transaction, key: ResourceKey, number: int) -> Revision | None:
    """One revision, or None."""
    found = rows(
        connection,
        f"SELECT {_REVISION_COLUMNS} FROM resources AS s JOIN resource_revisions AS v "
        f"ON v.resource_id = s.id WHERE {_KEY_MATCH} AND v.revision = ?",
        (*_key_params(key), number),
    )
    return _revision(found[0]) if found else None


def revision_with(connection: Transaction, key: ResourceKey, content: str) -> int | None:
    """The newest revision of the resource whose content is `content`, or None."""
    found = rows(
        connection,
        "SELECT max(v.revision) FROM resources AS s JOIN resource_revisions AS v "
        f"ON v.resource_id = s.id WHERE {_KEY_MATCH} AND v.content_hash = ?",
        (*_key_params(key), content_hash(content)),
    )
    return int(found[0][0]) if found and found[0][0] is not None else None


def revisions(
    connection: Transaction, key: ResourceKey, *, before: int, limit: int
) -> list[Revision]:
    """Revisions newest first, below `before` (0: from the newest), content included."""
    sql = (
        f"SELECT {_REVISION_COLUMNS} FROM resources AS s JOIN resource_revisions AS v "
        f"ON v.resource_id = s.id WHERE {_KEY_MATCH}"
    )
    params: list[Any] = list(_key_params(key))
    if before:
        sql += " AND v.revision < ?"
        params.append(before)
    sql += " ORDER BY v.revision DESC LIMIT ?"
    params.append(limit)
    return [_revision(row) for row in rows(connection, sql, params)]


def resources(
    connection: Transaction,
    agent_id: str,
    resource_type: ResourceType | None,
    scope_id: str,
    *,
    after: tuple[str, str] | None = None,
    limit: int = -1,
) -> list[ResourceInfo]:
    """An agent's resources, by type then scope, after the previous page's (type, scope)."""
    sql = (
        "SELECT agent_id, resource_type, scope_id, resource_path, current_revision, updated_at "
        "FROM resources WHERE agent_id = ?"
    )
    params: list[Any] = [agent_id]
    if resource_type is not None:
        sql += " AND resource_type = ?"
        params.append(resource_type.value)
    if scope_id:
        sql += " AND scope_id = ?"
        params.append(scope_id)
    if after is not None:
        sql += " AND (resource_type, scope_id) > (?, ?)"
        params.extend(after)
    sql += " ORDER BY resource_type, scope_id LIMIT ?"
    params.append(limit)
    return [
        ResourceInfo(
            ResourceKey(row[0], ResourceType(row[1]), row[2]), row[3], row[4], from_text(row[5])
        )
        for row in rows(connection, sql, params)
    ]


def all_current(
    connection: Transaction, types: tuple[ResourceType, ...]
) -> list[tuple[str, Revision]]:
    """(path, current revision) of every resource of these types."""
    found = rows(
        connection,
        f"SELECT s.resource_path, {_REVISION_COLUMNS} FROM resources AS s "
        "JOIN resource_revisions AS v ON v.resource_id = s.id AND v.revision = s.current_revision "
        f"WHERE s.resource_type IN ({', '.join('?' * len(types))})",
        [resource_type.value for resource_type in types],
    )
    return [(row[0], _revision(row[1:])) for row in found]


def current_content(connection: Transaction, resource_path: str) -> str | None:
    """The current revision's content of the resource rendered to `resource_path`; None when
    no resource is rendered there."""
    found = rows(
        connection,
        "SELECT v.content FROM resources AS s JOIN resource_revisions AS v "
        "ON v.resource_id = s.id AND v.revision = s.current_revision WHERE s.resource_path = ?",
        (resource_path,),
    )
    return str(found[0][0]) if found else None


def path(connection: Transaction, key: ResourceKey) -> str | None:
    """The file a resource is rendered to, or None when it has no revisions."""
    found = rows(
        connection,
        "SELECT resource_path FROM resources WHERE agent_id = ? AND resource_type = ? "
        "AND scope_id = ?",
        _key_params(key),
    )
    return str(found[0][0]) if found else None


def set_path(connection: Transaction, key: ResourceKey, path: str) -> None:
    """Record where a resource's file lives now."""
    connection.execute(
        f"UPDATE resources AS s SET resource_path = ? WHERE {_KEY_MATCH}", (path, *_key_params(key))
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Committed:
    """The resource's current revision after a commit, and the revision it created (if any)."""

    current: int
    created: Revision | None


def commit(
    connection: Transaction,
    key: ResourceKey,
    *,
    path: str,
    content: str,
    mutation_source: MutationSource,
    provenance_json: str,
    now: dt.datetime,
) -> Committed:
    """Commit `content` as the next revision, unless it equals the current content.

    A resource that never existed and would start empty is not created: an empty file and no
    file read the same.
    """
    stamp = to_text(now)
    digest = content_hash(content)
    found = rows(
        connection,
        "SELECT s.id, s.current_revision, v.content_hash FROM resources AS s "
        "LEFT JOIN resource_revisions AS v ON v.resource_id = s.id "
        f"AND v.revision = s.current_revision WHERE {_KEY_MATCH}",
        _key_params(key),
    )
    if found and found[0][2] == digest:
        return Committed(int(found[0][1]), None)
    if not found and content == "":
        return Committed(0, None)
    if found:
        resource_id, parent = int(found[0][0]), int(found[0][1])
    else:
        resource_id = int(
            rows(
                connection,
                "INSERT INTO resources (agent_id, resource_type, scope_id, resource_path, "
                "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                (*_key_params(key), path, stamp, stamp),
            )[0][0]
        )
        parent = 0
    committed = Revision(
        key=key,
        revision=_next_revision(connection, resource_id),
        parent_revision=parent or None,
        content_hash=digest,
        content=content,
        byte_size=len(content.encode("utf-8")),
        mutation_source=mutation_source,
        provenance_json=provenance_json,
        created_at=from_text(stamp),
    )
    connection.execute(
        "INSERT INTO resource_revisions (resource_id, revision, parent_revision, content_hash, "
        "content, byte_size, mutation_source, provenance_json, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            resource_id,
            committed.revision,
            committed.parent_revision,
            committed.content_hash,
            committed.content,
            committed.byte_size,
            committed.mutation_source,
            committed.provenance_json,
            stamp,
        ),
    )
    connection.execute(
        "UPDATE resources SET current_revision = ?, updated_at = ? WHERE id = ?",
        (committed.revision, stamp, resource_id),
    )
    return Committed(committed.revision, committed)


def _next_revision(connection: Transaction, resource_id: int) -> int:
    # After a rollback the current revision is not the highest: numbers keep growing.
    found = rows(
        connection,
        "SELECT coalesce(max(revision), 0) FROM resource_revisions WHERE resource_id = ?",
        (resource_id,),
    )
    return int(found[0][0]) + 1


def _key_params(key: ResourceKey) -> tuple[str, str, str]:
    return (key.agent_id, key.resource_type.value, key.scope_id)


def _revision(row: Row) -> Revision:
    column = _REVISION.named(row)
    return Revision(
        key=ResourceKey(
            column["agent_id"], ResourceType(column["resource_type"]), column["scope_id"]
        ),
        revision=column["revision"],
        parent_revision=column["parent_revision"],
        content_hash=column["content_hash"],
        content=column["content"],
        byte_size=column["byte_size"],
        mutation_source=column["mutation_source"],
        provenance_json=column["provenance_json"],
        created_at=from_text(column["created_at"]),
    )
