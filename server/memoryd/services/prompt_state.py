"""What the prompt files show: each file's current text, tokens and revision (`FileState`,
`PromptState`), what a write rendered (`CommittedRender`), and the rows a revision renders
and their values then, read from its provenance."""

from __future__ import annotations

import dataclasses
import json

from memoryd.domain import prompt_files as render_rules
from memoryd.domain.conversation import OwnerKey
from memoryd.domain.digits import is_number
from memoryd.domain.memories import MemoryRecord
from memoryd.domain.prompt_files import PROMPT_FILES, PromptFile
from memoryd.domain.resources import ResourceKey, ResourceType, Revision
from memoryd.domain.tokens import count_tokens
from memoryd.storage import resource_store
from memoryd.storage.transaction import Transaction


@dataclasses.dataclass(frozen=True, slots=True)
class FileState:
    """One prompt file as the prompt sees it: text, tokens, revision."""

    text: str
    tokens: int
    revision: int
    # The memory rows the text renders, in order (the revision's `rendered` provenance).
    memory_ids: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class PromptState:
    """Both prompt files of one owner."""

    user_md: FileState
    memory_md: FileState


@dataclasses.dataclass(frozen=True, slots=True)
class CommittedRender:
    """What a write transaction rendered: the files' state and the revisions it committed."""

    owner: OwnerKey
    state: PromptState
    revisions: tuple[tuple[str, Revision], ...]  # (relative path, revision) of changed files


def resource_key(owner: OwnerKey, resource_type: ResourceType) -> ResourceKey:
    """The resource of one owner's prompt file."""
    return ResourceKey(owner.agent_id, resource_type, owner.owner_id)


@dataclasses.dataclass(slots=True)
class ResyncReport:
    """What the start-up resync did."""

    rewritten: int = 0
    moved: int = 0
    failed: int = 0


def load_state(connection: Transaction, owner: OwnerKey) -> PromptState:
    files = {file.resource_type: file_state(connection, owner, file) for file in PROMPT_FILES}
    return PromptState(files[ResourceType.USER_MD], files[ResourceType.MEMORY_MD])


def file_state(connection: Transaction, owner: OwnerKey, file: PromptFile) -> FileState:
    found = resource_store.current(connection, resource_key(owner, file.resource_type))
    if found is None:
        return FileState("", 0, 0)
    return FileState(
        found.content, count_tokens(found.content), found.revision, rendered_ids(found)
    )


def rows_shown(
    rendered: render_rules.RenderedFile, records: list[MemoryRecord]
) -> list[MemoryRecord]:
    """The rows a rendered file shows, in its order."""
    by_id = {record.id: record for record in records}
    return [by_id[memory_id] for memory_id in rendered.memory_ids]


def rendered_values(revision: Revision) -> dict[int, str] | None:
    """What each row a revision renders said then, from its provenance (None when it does not
    say: a revision written before values were recorded)."""
    try:
        listed = json.loads(revision.provenance_json).get("values")
    except (ValueError, AttributeError):
        return None
    if not isinstance(listed, dict):
        return None
    return {
        int(key): value
        for key, value in listed.items()
        if is_number(key) and isinstance(value, str)
    }


def rendered_ids(revision: Revision) -> tuple[int, ...]:
    """The rows a revision renders, from its provenance (none when it does not say: a revision
    written before rows were recorded)."""
    try:
        listed = json.loads(revision.provenance_json).get("rendered")
    except (ValueError, AttributeError):
        return ()
    if not isinstance(listed, list):
        return ()
    return tuple(item for item in listed if isinstance(item, int))
