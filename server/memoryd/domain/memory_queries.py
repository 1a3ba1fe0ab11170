"""Descriptions of memory reads and writes, shared by the api, the use cases and storage:
which rows a read may see, how a row is named, what a recall or a listing returns."""

from __future__ import annotations

import dataclasses

from memoryd.domain.conversation import OwnerKey
from memoryd.domain.memories import Category, MemoryRecord, ScopeType, SourceInfo
from memoryd.domain.quoting import clipped, shortened


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


@dataclasses.dataclass(frozen=True, slots=True)
class SourceRow:
    """A memory source with its status and times."""

    info: SourceInfo
    status: str
    created_at: str
    updated_at: str
