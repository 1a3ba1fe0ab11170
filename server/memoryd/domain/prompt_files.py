"""USER.md and MEMORY.md: which rows render, in which sections, and the <memory-context> block.

    USER.md    ## Identity (6)  ## Preferences (6)  ## Interests (6)  ## Goals (5)     1500 tokens
    MEMORY.md  ## Working Rules (8)  ## Context (12)                                   2000 tokens

USER.md takes owner-scope rows whose target is USER.md; MEMORY.md takes rows of any scope whose
target is MEMORY.md (conversation-scoped context too). Rows are deduplicated by
(scope_type, scope_id, key), newest wins; each section keeps its most recently updated rows up
to its cap; values are clipped at 200 characters. Items are added in section order until the
next one would make the file exceed its token budget. Sections are `## <Title>` then `- <value>`
lines, separated by one blank line, with no trailing newline; an empty file is empty.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Iterable

from memoryd.domain.memories import (
    MAX_VALUE_CHARS,
    Category,
    MemoryRecord,
    PromptTarget,
    ScopeType,
)
from memoryd.domain.resources import ResourceType

CHARS_PER_TOKEN = 4
RULE = "=" * 50
CONTEXT_NOTE = (
    "[System note: The following is recalled memory context, NOT new user input. "
    "Treat as informational background data.]"
)


@dataclasses.dataclass(frozen=True, slots=True)
class Section:
    """One section of a prompt file."""

    title: str
    category: Category
    cap: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PromptFile:
    """One of the two prompt files."""

    resource_type: ResourceType
    file_name: str
    target: PromptTarget
    sections: tuple[Section, ...]
    max_tokens: int
    header: str

    @property
    def max_chars(self) -> int:
        """The character budget shown to models: 4 characters per token."""
        return self.max_tokens * CHARS_PER_TOKEN


USER_MD = PromptFile(
    resource_type=ResourceType.USER_MD,
    file_name="USER.md",
    target=PromptTarget.USER_MD,
    sections=(
        Section("Identity", Category.IDENTITY, 6),
        Section("Preferences", Category.PREFERENCE, 6),
        Section("Interests", Category.INTEREST, 6),
        Section("Goals", Category.GOAL, 5),
    ),
    max_tokens=1500,
    header="USER PROFILE (who the user is)",
)
MEMORY_MD = PromptFile(
    resource_type=ResourceType.MEMORY_MD,
    file_name="MEMORY.md",
    target=PromptTarget.MEMORY_MD,
    sections=(
        Section("Working Rules", Category.DIRECTIVE, 8),
        Section("Context", Category.CONTEXT, 12),
    ),
    max_tokens=2000,
    header="MEMORY (agent's working notes)",
)
PROMPT_FILES = (USER_MD, MEMORY_MD)


@dataclasses.dataclass(frozen=True, slots=True)
class RenderedFile:
    """A prompt file's text, its size, and the rows it shows (by id, in order): what a revision
    records as its provenance, so that an erasure finds every revision that quoted a row."""

    file: PromptFile
    text: str
    tokens: int
    memory_ids: tuple[int, ...] = ()


def rows_for(file: PromptFile, records: Iterable[MemoryRecord]) -> list[MemoryRecord]:
    """The rows that render into `file`, deduplicated (newest wins), newest first."""
    newest: dict[tuple[ScopeType, str, str], MemoryRecord] = {}
    for record in records:
        if record.archived or record.prompt_target is not file.target:
            continue
        if file.target is PromptTarget.USER_MD and record.scope_type is not ScopeType.OWNER:
            continue
        if record.scope_type is ScopeType.JOB:
            continue
        dedupe = (record.scope_type, record.scope_id, record.key)
        kept = newest.get(dedupe)
        if kept is None or _recency(record) > _recency(kept):
            newest[dedupe] = record
    return sorted(newest.values(), key=_recency, reverse=True)


def render(
    file: PromptFile, records: Iterable[MemoryRecord], count_tokens: Callable[[str], int]
) -> RenderedFile:
    """The text of `file` for an owner's rows."""
    chosen = rows_for(file, records)
    text = ""
    tokens = 0
    shown: list[int] = []
    for section in file.sections:
        items = [record for record in chosen if record.category is section.category]
        started = False
        for record in items[: section.cap]:
            line = "- " + render_value(record.value)
            if started:
                candidate = f"{text}\n{line}"
            else:
                candidate = (
                    f"{text}\n\n## {section.title}\n{line}"
                    if text
                    else (f"## {section.title}\n{line}")
                )
            candidate_tokens = count_tokens(candidate)
            if candidate_tokens > file.max_tokens:
                return RenderedFile(file, text, tokens, tuple(shown))
            text, tokens, started = candidate, candidate_tokens, True
            shown.append(record.id)
    return RenderedFile(file, text, tokens, tuple(shown))


@dataclasses.dataclass(frozen=True, slots=True)
class PutBack:
    """What puts the rows behind a prompt file back as one of its revisions rendered them (a
    rollback), so that the file rendered from the rows is that revision's again and stays so
    until something new is learnt."""

    # Rows the revision did not show that would show now: archived (RestoreMemory brings one
    # back). Learnt since, or restored since.
    archive: tuple[int, ...]
    # Rows the revision rendered that were archived since: restored.
    restore: tuple[int, ...]
    # Rows the revision rendered whose value changed since: (id, the value it rendered).
    revert: tuple[tuple[int, str], ...]
    # Rows the revision rendered that were erased since: they cannot come back.
    missing: tuple[int, ...]
    # The revision's rows still there, in its order (newest first within each section): they
    # are marked updated in this order, so the file lists them as the revision did.
    order: tuple[int, ...]


def put_back(
    file: PromptFile,
    rendered: tuple[int, ...],
    values: dict[int, str] | None,
    *,
    current: Iterable[MemoryRecord],
    then: dict[int, MemoryRecord],
    now: dt.datetime,
    count_tokens: Callable[[str], int],
) -> PutBack:
    """How to put back the rows a revision of `file` rendered (`rendered`, in order, with their
    `values` when the revision recorded them), given the owner's `current` rows that render into
    a prompt file, and the rendered rows as they are now (`then`, by id: absent when erased).

    The revision's rows are restored, set back to their values and marked updated now, in its
    order. Every other row that would then show in the file was not shown by the revision though
    there was room for it (it was learnt, restored or moved into the file since): it is archived,
    until the rows render only the revision's."""
    order = tuple(memory_id for memory_id in rendered if memory_id in then)
    missing = tuple(memory_id for memory_id in rendered if memory_id not in then)
    known = values or {}
    restore = tuple(memory_id for memory_id in order if then[memory_id].archived)
    revert = tuple(
        (memory_id, known[memory_id])
        for memory_id in order
        if memory_id in known and known[memory_id] != then[memory_id].value
    )
    put = [
        dataclasses.replace(
            then[memory_id],
            archived_at=None,
            value=known.get(memory_id, then[memory_id].value),
            updated_at=now - dt.timedelta(milliseconds=position),
        )
        for position, memory_id in enumerate(order)
    ]
    kept = set(order)
    others = [record for record in current if record.id not in kept]
    archive: list[int] = []
    while True:
        shown = render(file, [*put, *others], count_tokens).memory_ids
        extra = {memory_id for memory_id in shown if memory_id not in kept}
        if not extra:
            break
        archive += sorted(extra)
        others = [record for record in others if record.id not in extra]
    return PutBack(tuple(archive), restore, revert, missing, order)


def put_back_notice(plan: PutBack, *, exact: bool) -> str:
    """What a rollback did to the rows behind the file, for its notice. `exact`: whether the
    rows now render the revision's content."""
    done = [
        f"{len(plan.archive)} learnt since archived (RestoreMemory brings one back)"
        if plan.archive
        else "",
        f"{len(plan.restore)} archived since restored" if plan.restore else "",
        f"{len(plan.revert)} changed since set back" if plan.revert else "",
    ]
    said = "; ".join(part for part in done if part)
    text = (
        f"Memory rows put back as the revision had them ({said})."
        if said
        else "The memory rows already were as the revision had them."
    )
    if plan.missing:
        text += f" {len(plan.missing)} it showed were erased since and cannot come back."
    if exact:
        text += " The file stays so until something new is learnt."
    else:
        text += " The rows do not render exactly the revision's content; the file shows them."
    return text


def render_value(value: str) -> str:
    """One value as one list line: clipped, line breaks folded so no value can start a section."""
    return " ".join(value[:MAX_VALUE_CHARS].splitlines()).strip()


def usage_label(file: PromptFile, used_chars: int) -> str:
    """`[P% - used/max chars]`."""
    percent = used_chars * 100 // file.max_chars
    return f"[{percent}% - {used_chars}/{file.max_chars} chars]"


def context_block(user_md: str, memory_md: str) -> str:
    """Both files fenced as recalled background, for one system message; "" when both are empty."""
    if not user_md and not memory_md:
        return ""
    lines = ["<memory-context>", CONTEXT_NOTE]
    for file, text in ((USER_MD, user_md), (MEMORY_MD, memory_md)):
        if text:
            lines += [RULE, f"{file.header} {usage_label(file, len(text))}", RULE, text]
    lines.append("</memory-context>")
    return "\n".join(lines)


def _recency(record: MemoryRecord) -> tuple[object, int]:
    return (record.updated_at, record.id)
