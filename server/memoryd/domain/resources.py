"""Versioned resources: their types, where prompt files live, diff labels, rollback notices.

A resource is (agent, type, scope id); each committed change is a revision n+1 whose parent is
n. Identical content is never a new revision.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import difflib
import enum
import functools
import hashlib
import json
import urllib.parse

from memoryd.domain.conversation import DEFAULT_OWNER_ID, ConversationKey, scope_part
from memoryd.domain.timestamps import to_text


class ResourceType(enum.Enum):
    """The kinds of versioned resources."""

    USER_MD = "user_md"
    MEMORY_MD = "memory_md"
    CHECKPOINT = "checkpoint"


PROMPT_FILE_NAMES = {ResourceType.USER_MD: "USER.md", ResourceType.MEMORY_MD: "MEMORY.md"}
# A path component is at most this many (ASCII) bytes: half of the usual 255-byte name limit,
# leaving room for the writer's temp names and for filesystems with shorter limits.
MAX_COMPONENT_CHARS = 128
COMPONENT_HASH_CHARS = 24  # 96 bits of sha256


@dataclasses.dataclass(frozen=True, slots=True)
class ResourceKey:
    """One resource."""

    agent_id: str
    resource_type: ResourceType
    scope_id: str


class MutationSource(enum.StrEnum):
    """What made a revision (resource_revisions.mutation_source). Revisions imported from an
    export keep the text they were stored with, so a read revision's is a plain str."""

    MEMORY_STORE = "memory_store"
    MEMORY_UPDATE = "memory_update"
    MEMORY_ARCHIVE = "memory_archive"
    MEMORY_RESTORE = "memory_restore"
    MEMORY_DELETE = "memory_delete"
    MEMORY_REVIEW = "memory_review"
    ROLLBACK = "rollback"
    CONVERSATION_PURGE = "conversation_purge"
    COMPACTION = "compaction"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
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


def checkpoint_owner_prefix(owner_id: str) -> str:
    """How every checkpoint scope id of one owner starts: `<owner>:` (the owner escaped)."""
    return f"{scope_part(owner_id)}:"


def checkpoint_resource(key: ConversationKey) -> ResourceKey:
    """A conversation's checkpoint resource: one per owner, as the conversation is.

    Its scope id is `<owner>:<channel>:<chat_id>:<thread>`, the conversation's scope id after
    its owner, so two owners in one chat never share a checkpoint or its revisions.
    """
    return ResourceKey(
        key.agent_id,
        ResourceType.CHECKPOINT,
        checkpoint_owner_prefix(key.owner_id) + key.scope_id,
    )


def is_checkpoint_scope(scope_id: str) -> bool:
    """Whether a scope id has the shape of a checkpoint's (owner, channel, chat, thread)."""
    return scope_id.count(":") == 3  # each part has its `:` escaped


# What a rollback revision keeps of the revision it goes back to: the record of what the
# content quotes (its rendered rows, its checkpoint and range), which erasure relies on.
QUOTED_PROVENANCE = (
    "rendered",
    "checkpoint_id",
    "conversation",
    "first_message_id",
    "last_message_id",
)


def rollback_provenance(target: Revision) -> str:
    """The provenance of a rollback to `target`: `rolled_back_to`, and what `target` quotes."""
    try:
        source = json.loads(target.provenance_json)
    except ValueError:
        source = {}
    kept = {
        key: source[key] for key in QUOTED_PROVENANCE if isinstance(source, dict) and key in source
    }
    return json.dumps({"rolled_back_to": target.revision, **kept}, separators=(",", ":"))


def content_hash(content: str) -> str:
    """The sha256 of the content's UTF-8, in hex."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def prompt_file_path(agent_id: str, owner_id: str, resource_type: ResourceType) -> str:
    """Where a prompt file lives, relative to the data directory.

    The default owner's files are `memory/<agent>/USER.md` and `MEMORY.md`, as in Fermix; other
    owners of the agent get `memory/<agent>/owners/<owner>/`, so one owner's profile never
    overwrites another's. Identifiers become path components with `path_component`.
    """
    name = PROMPT_FILE_NAMES[resource_type]
    folder = f"memory/{path_component(agent_id)}"
    if owner_id != DEFAULT_OWNER_ID:
        folder += f"/owners/{path_component(owner_id)}"
    return f"{folder}/{name}"


@functools.lru_cache(maxsize=4096)  # every render names its owner's two files
def path_component(identifier: str) -> str:
    """An identifier as one path component that cannot climb, hide, or outgrow the filesystem.

    The identifier is percent-encoded (`..` -> `%2E.`, `/` -> `%2F`). An identifier of 256
    characters of a 4-byte script encodes to 3,072 bytes, past every filesystem's 255-byte name
    limit, so an encoding longer than MAX_COMPONENT_CHARS keeps a readable prefix and ends with
    `~` and a hash of the whole identifier. `~` is escaped in every other encoding, so a hashed
    name never equals the plain name of another identifier.
    """
    encoded = _percent_encoded(identifier)
    if len(encoded) <= MAX_COMPONENT_CHARS:
        return encoded
    digest = hashlib.sha256(identifier.encode("utf-8")).hexdigest()[:COMPONENT_HASH_CHARS]
    room = MAX_COMPONENT_CHARS - COMPONENT_HASH_CHARS - 1
    taken = 0
    for end in range(1, len(identifier) + 1):  # whole characters, never half an escape
        if len(_percent_encoded(identifier[:end])) > room:
            break
        taken = end
    return f"{_percent_encoded(identifier[:taken])}~{digest}"


def _percent_encoded(identifier: str) -> str:
    encoded = urllib.parse.quote(identifier, safe="-_@+=,").replace("~", "%7E")
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


def rollback_notice(
    key: ResourceKey, target: int, revision: int, *, changed: bool, rows: str | None = None
) -> str:
    """What to tell the user after a rollback; `rows`: what was done to the memory rows behind a
    prompt file (None: nothing, as for a revision that did not record its rows)."""
    name = key.resource_type.value
    if not changed:
        text = f"{name} already has the content of revision {target}; nothing changed."
    else:
        text = f"Rolled back {name} to the content of revision {target} (new revision {revision})."
    if rows is not None:
        text += " " + rows
    elif key.resource_type in PROMPT_FILE_NAMES:
        text += (
            " Memory rows are unchanged (the revision does not record the rows it showed): the "
            f"next change to this memory rebuilds {PROMPT_FILE_NAMES[key.resource_type]} from "
            "them and replaces this content."
        )
    return text
