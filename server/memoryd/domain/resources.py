"""Versioned resources: their types, where prompt files live, diff labels, rollback notices.

A resource is (agent, type, scope id); each committed change is a revision n+1 whose parent is
n. Identical content is never a new revision.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import difflib
import enum
import hashlib
import urllib.parse

from memoryd.domain.conversation import DEFAULT_OWNER_ID
from memoryd.domain.timestamps import to_text


class ResourceType(enum.Enum):
    """The kinds of versioned resources."""

    USER_MD = "user_md"
    MEMORY_MD = "memory_md"
    CHECKPOINT = "checkpoint"


PROMPT_FILE_NAMES = {ResourceType.USER_MD: "USER.md", ResourceType.MEMORY_MD: "MEMORY.md"}


@dataclasses.dataclass(frozen=True, slots=True)
class ResourceKey:
    """One resource."""

    agent_id: str
    resource_type: ResourceType
    scope_id: str


@dataclasses.dataclass(frozen=True, slots=True)
class Revision:
    """One committed revision."""

    key: ResourceKey
    revision: int
    parent_revision: int | None
    content_hash: str
    content: str
    byte_size: int
    mutation_source: str
    provenance_json: str
    created_at: dt.datetime


@dataclasses.dataclass(frozen=True, slots=True)
class ResourceInfo:
    """A resource and its current revision."""

    key: ResourceKey
    path: str
    current_revision: int
    updated_at: dt.datetime


def content_hash(content: str) -> str:
    """The sha256 of the content's UTF-8, in hex."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def prompt_file_path(agent_id: str, owner_id: str, resource_type: ResourceType) -> str:
    """Where a prompt file lives, relative to the data directory.

    The default owner's files are `memory/<agent>/USER.md` and `MEMORY.md`, as in Fermix; other
    owners of the agent get `memory/<agent>/owners/<owner>/`, so one owner's profile never
    overwrites another's. Identifiers are percent-encoded into safe path components.
    """
    name = PROMPT_FILE_NAMES[resource_type]
    folder = f"memory/{path_component(agent_id)}"
    if owner_id != DEFAULT_OWNER_ID:
        folder += f"/owners/{path_component(owner_id)}"
    return f"{folder}/{name}"


def path_component(identifier: str) -> str:
    """An identifier as one path component that cannot climb or hide: `..` -> `%2E.`."""
    encoded = urllib.parse.quote(identifier, safe="-_@+=,")
    if encoded.startswith("."):
        encoded = "%2E" + encoded[1:]
    return encoded


def label(revision: Revision) -> str:
    """`<type> @ revision N (timestamp)`."""
    return (
        f"{revision.key.resource_type.value} @ revision {revision.revision} "
        f"({to_text(revision.created_at)})"
    )


def unified_diff(older: Revision, newer: Revision) -> str:
    """The unified diff from `older` to `newer`, labelled; "" when the contents are equal."""
    lines = difflib.unified_diff(
        older.content.splitlines(),
        newer.content.splitlines(),
        fromfile=label(older),
        tofile=label(newer),
        lineterm="",
    )
    return "\n".join(lines)


def rollback_notice(key: ResourceKey, target: int, revision: int, *, changed: bool) -> str:
    """What to tell the user after a rollback."""
    name = key.resource_type.value
    if not changed:
        text = f"{name} already has the content of revision {target}; nothing changed."
    else:
        text = f"Rolled back {name} to the content of revision {target} (new revision {revision})."
    if key.resource_type in PROMPT_FILE_NAMES:
        text += (
            " Memory rows are unchanged: the next change to this memory rebuilds "
            f"{PROMPT_FILE_NAMES[key.resource_type]} from them and replaces this content."
        )
    return text
