"""Descriptions of memory reads and writes, shared by the api, the use cases and storage:
which rows a read may see, how a row is named, what a recall or a listing returns.

A guest reads only what GetPromptContext and ComposeContext would give it: of the memory rows,
the notes of its own conversation (conversation scope, rendered into no prompt file). The
owner's profile, the agent's notes and a conversation's context rows all render into USER.md
or MEMORY.md, which a guest never receives, so no read returns them to a guest either.
"""

from __future__ import annotations

import dataclasses

from memoryd.domain.conversation import OwnerKey
from memoryd.domain.fusion import NO_SCORES, MatchKind, Scores
from memoryd.domain.jobs import JobStatus
from memoryd.domain.memories import Caller, Category, MemoryRecord, PromptTarget, ScopeType
from memoryd.domain.memory_sources import SourceInfo
from memoryd.domain.quoting import clipped, shortened
from memoryd.errors import PermissionDenied

GUEST_READS_ONE_CONVERSATION = (
    "a guest reads the notes of its own conversation only: name the conversation (as the "
    "caller), without a job or another scope_type"
)


@dataclasses.dataclass(frozen=True, slots=True)
class Locator:
    """A row named by id, or by scope and key, always within one agent and owner."""

    id: int = 0
    scope_type: ScopeType | None = None
    scope_id: str = ""
    key: str = ""

    def describe(self) -> str:
        """How the row was named, for messages."""
        if self.id:
            return f"memory {self.id}"
        scope = self.scope_type.value if self.scope_type else "?"
        return f"memory {clipped(self.key)} in {scope} scope {shortened(self.scope_id)}"


@dataclasses.dataclass(frozen=True, slots=True)
class Visible:
    """Which rows of one agent and owner a read may see."""

    owner: OwnerKey
    # (scope_type, scope_id) pairs, or a scope type with any id (scope_id None). Empty: all
    # scopes except jobs.
    scopes: tuple[tuple[ScopeType, str | None], ...] = ()
    archived: bool | None = False  # None: both
    # Recall: leave out rows whose memory source is paused or deleted.
    active_sources: bool = False
    # Only rows that render into no prompt file (what a guest may read).
    unrendered_only: bool = False


def guest_visibility(
    caller: Caller, scope_type: ScopeType | None, *, archived: bool | None, active_sources: bool
) -> Visible:
    """What a guest's read sees: the notes of the caller's conversation (PERMISSION_DENIED
    without a conversation caller, inside a job, or for another scope type)."""
    conversation = caller.conversation
    if (
        conversation is None
        or caller.job_id is not None
        or scope_type
        not in (
            None,
            ScopeType.CONVERSATION,
        )
    ):
        raise PermissionDenied(GUEST_READS_ONE_CONVERSATION)
    return Visible(
        caller.owner,
        ((ScopeType.CONVERSATION, conversation.scope_id),),
        archived,
        active_sources=active_sources,
        unrendered_only=True,
    )


def visible_to_guest(record: MemoryRecord, caller: Caller) -> bool:
    """Whether a guest in `caller`'s conversation may read `record`."""
    return (
        caller.conversation is not None
        and caller.job_id is None
        and record.scope_type is ScopeType.CONVERSATION
        and record.scope_id == caller.conversation.scope_id
        and record.prompt_target is PromptTarget.NONE
    )


@dataclasses.dataclass(frozen=True, slots=True)
class ListFilter:
    """ListMemories' filters."""

    categories: tuple[Category, ...] = ()
    key_prefix: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class RankedMemory:
    """A recalled row: its bm25 rank (word match) or matching-word count (substring)."""

    record: MemoryRecord
    rank: float
    word_match: bool
    # False for a row only the meaning ranking found.
    lexical: bool = True
    semantic: bool = False
    scores: Scores = NO_SCORES

    @property
    def matches(self) -> tuple[MatchKind, ...]:
        """Every way the row matched, the lexical way first."""
        found = []
        if self.lexical:
            found.append(MatchKind.WORD if self.word_match else MatchKind.SUBSTRING)
        if self.semantic:
            found.append(MatchKind.SEMANTIC)
        return tuple(found) or (MatchKind.NEIGHBOUR,)


@dataclasses.dataclass(frozen=True, slots=True)
class SourceRow:
    """A memory source with its status and times."""

    info: SourceInfo
    status: JobStatus
    created_at: str
    updated_at: str
