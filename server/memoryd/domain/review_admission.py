"""Which operations of a review's answer stand, and as what.

    ops      add (target user|memory, category, value), replace (id, value), archive (id,
             reason), working_memory (text), describe (text)
    admit    replace and archive only name rows the listing showed; a guest batch adds no
             directive and changes no operator-written row

Invalid operations are skipped with a reason and counted, never applied. Also the session
description's rule (OpenHermit's): one line, at most 80 characters, and its fallback.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from memoryd.domain.memories import (
    MAX_VALUE_CHARS,
    MEMORY_BUCKET,
    USER_BUCKET,
    Category,
    MemoryRecord,
    ScopeType,
    fact_key,
)
from memoryd.domain.messages import Trust
from memoryd.domain.quoting import clipped
from memoryd.domain.review_answer import (
    Answer,
    Operation,
    ReviewAction,
    category_of,
    id_of,
    value_of,
)
from memoryd.domain.review_prompt import PackedInput
from memoryd.domain.review_runs import AnswerKind, ReviewStatus, SkippedOperation

MAX_DESCRIPTION_CHARS = 80
MAX_WORKING_MEMORY_CHARS = 4000
_QUOTES = "\"'`\u201c\u201d\u2018\u2019"


@dataclasses.dataclass(frozen=True, slots=True)
class Skipped:
    """Admission's refusal: the operation is not applied, for this reason."""

    reason: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Add:
    """An admitted add."""

    category: Category
    scope_type: ScopeType
    value: str
    key: str


@dataclasses.dataclass(frozen=True, slots=True)
class Replace:
    """An admitted replace."""

    id: int
    value: str


@dataclasses.dataclass(frozen=True, slots=True)
class Archive:
    """An admitted archive."""

    id: int
    reason: str | None


@dataclasses.dataclass(frozen=True, slots=True)
class SetWorkingMemory:
    """Replace the conversation's working memory."""

    text: str


@dataclasses.dataclass(frozen=True, slots=True)
class SetDescription:
    """Set the conversation's description."""

    text: str


Admitted = Add | Replace | Archive | SetWorkingMemory | SetDescription


def admit(
    operation: Operation,
    shown: Mapping[int, MemoryRecord | None],
    index: int,
    *,
    guest: bool = False,
) -> Admitted | Skipped:
    """The operation as it will be applied, or why it is skipped.

    `shown` maps each row id the review prompt listed to the row as it stands now (None when it
    is no longer an active row of the owner): replace and archive may name only those rows. A
    guest batch (`guest`) may add no directive and change no row an operator wrote.
    """
    admit_one = _ADMISSION.get(operation.action)
    if admit_one is None:
        return Skipped(f"unknown action {clipped(str(operation.action))}")
    return admit_one(operation.fields, _Scope(shown, guest), index)


@dataclasses.dataclass(frozen=True, slots=True)
class _Scope:
    shown: Mapping[int, MemoryRecord | None]
    guest: bool

    def row(self, action: str, raw_id: object) -> MemoryRecord | Skipped:
        """The shown, active row an operation names, or why it may not touch it."""
        memory_id = id_of(raw_id)
        if memory_id not in self.shown:
            named = str(memory_id) if memory_id > 0 else clipped(str(raw_id))
            return Skipped(f"{action}: row {named} was not in the memory shown to the review")
        record = self.shown[memory_id]
        if record is None:
            return Skipped(f"{action}: row {memory_id} is no longer an active row of this owner")
        if self.guest and record.trust is not Trust.GUEST:
            return Skipped(
                f"{action}: row {memory_id} was written by an operator; a guest may not change it"
            )
        return record


def _admit_add(fields: dict[str, Any], scope: _Scope, _index: int) -> Admitted | Skipped:
    target = fields.get("target")
    category = category_of(fields.get("category"))
    if target not in ("user", "memory"):
        return Skipped(f"add: target must be user or memory, got {clipped(str(target))}")
    if category is None:
        return Skipped(f"add: unknown category {clipped(str(fields.get('category')))}")
    if category not in (USER_BUCKET if target == "user" else MEMORY_BUCKET):
        return Skipped(f"add: category {category.value} is not a {target} category")
    if scope.guest and category is Category.DIRECTIVE:
        return Skipped("add: a guest may not write a directive")
    value = value_of(fields.get("value"))
    if value is None:
        return Skipped(_bad_value("add", fields.get("value")))
    scope_type = ScopeType.OWNER if target == "user" else ScopeType.AGENT
    return Add(
        category=category,
        scope_type=scope_type,
        value=value,
        key=fact_key(value),
    )


def _admit_replace(fields: dict[str, Any], scope: _Scope, _index: int) -> Admitted | Skipped:
    record = scope.row(ReviewAction.REPLACE, fields.get("id"))
    if isinstance(record, Skipped):
        return record
    value = value_of(fields.get("value"))
    if record.category is Category.JOB_RUN_SUMMARY:
        return Skipped(f"replace: row {record.id} is a job run summary")
    if value is None:
        return Skipped(_bad_value("replace", fields.get("value")))
    return Replace(record.id, value)


def _admit_archive(fields: dict[str, Any], scope: _Scope, _index: int) -> Admitted | Skipped:
    record = scope.row(ReviewAction.ARCHIVE, fields.get("id"))
    if isinstance(record, Skipped):
        return record
    reason = fields.get("reason")
    return Archive(record.id, (reason.strip()[:1024] or None) if isinstance(reason, str) else None)


def _admit_working_memory(
    fields: dict[str, Any], _scope: _Scope, _index: int
) -> Admitted | Skipped:
    text = fields.get("text")
    if not isinstance(text, str):
        return Skipped("working_memory: text must be a string")
    return SetWorkingMemory(text.strip()[:MAX_WORKING_MEMORY_CHARS])


def _admit_describe(fields: dict[str, Any], _scope: _Scope, _index: int) -> Admitted | Skipped:
    text = fields.get("text")
    description = normalise_description(text) if isinstance(text, str) else ""
    if not description:
        return Skipped("describe: text must be non-blank text")
    return SetDescription(description)


def _bad_value(action: str, value: object) -> str:
    if isinstance(value, str) and len(value.strip()) > MAX_VALUE_CHARS:
        return (
            f"{action}: the value is {len(value.strip())} characters, over the limit of "
            f"{MAX_VALUE_CHARS}, and was neither split into sentences nor shortened by the model"
        )
    return f"{action}: value must be 1-{MAX_VALUE_CHARS} characters of text"


_ADMISSION: dict[str, Callable[[dict[str, Any], _Scope, int], Admitted | Skipped]] = {
    ReviewAction.ADD: _admit_add,
    ReviewAction.REPLACE: _admit_replace,
    ReviewAction.ARCHIVE: _admit_archive,
    ReviewAction.WORKING_MEMORY: _admit_working_memory,
    ReviewAction.DESCRIBE: _admit_describe,
}


def normalise_description(text: str) -> str:
    """OpenHermit's description: one line, no quotes or leading markdown, at most 80 characters."""
    collapsed = " ".join(text.split())
    collapsed = collapsed.strip(_QUOTES).lstrip("#*- ").strip().strip(_QUOTES).strip()
    if len(collapsed) > MAX_DESCRIPTION_CHARS:
        return collapsed[: MAX_DESCRIPTION_CHARS - 3].rstrip() + "..."
    return collapsed


def session_description(written: str, first_user_message: str | None) -> str:
    """A session's description: the reviewer's, else (OpenHermit's fallback) its first user
    message, normalised; "" when there is neither."""
    if written:
        return written
    return normalise_description(first_user_message) if first_user_message else ""


def refused(
    operation: Operation,
    index: int,
    refusal: Skipped,
    packed: PackedInput,
) -> SkippedOperation:
    """The record of an operation admission refused: for an add or replace, with the value it
    would have written and the message it came from (the one it names, or the batch's only
    one)."""
    value = operation.fields.get("value")
    facts = (ReviewAction.ADD, ReviewAction.REPLACE)
    if operation.action not in facts or not isinstance(value, str):
        return SkippedOperation(index, operation.action, refusal.reason)
    named = id_of(operation.fields.get("message_id"))
    sole = packed.message_ids[0] if len(packed.message_ids) == 1 else 0
    source = named if named in packed.message_ids else sole
    return SkippedOperation(index, operation.action, refusal.reason, value.strip(), source)


def status_of(answer: Answer) -> ReviewStatus:
    """What a review that applied `answer` ended with."""
    if answer.kind is AnswerKind.PROSE:
        return ReviewStatus.NOTHING_TO_SAVE_PROSE
    return ReviewStatus.OK if answer.operations else ReviewStatus.NOTHING_TO_SAVE
