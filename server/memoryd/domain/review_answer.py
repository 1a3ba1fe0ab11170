"""What a review's model may answer, read: `Nothing to save.`, JSON {"operations": [...]} (the
whole answer, a ```json fence, or an object embedded in prose), or tool calls of the same
shapes. Prose without JSON saves nothing (answer kind "prose"); JSON that does not parse fails
the review, so a cut-off answer is retried rather than read as "nothing to save".
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
from collections.abc import Sequence
from typing import Any

from memoryd.domain.digits import is_number
from memoryd.domain.memories import (
    MAX_VALUE_CHARS,
    Category,
)
from memoryd.domain.review_prompt import NOTHING_TO_SAVE
from memoryd.domain.review_runs import AnswerKind

# Where an object with operations may open inside prose: `{` then "operations" as its first key.
_EMBEDDED = re.compile(r'\{\s*"operations"')
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


class ReviewAction(enum.StrEnum):
    """The operations a review answer may hold (an answer's `action`, or its tool's)."""

    ADD = "add"
    REPLACE = "replace"
    ARCHIVE = "archive"
    WORKING_MEMORY = "working_memory"
    DESCRIBE = "describe"


# The review's tools (memoryd.domain.review_prompt.TOOLS) and the operation each one is.
TOOL_ACTIONS = {
    "memory_add": ReviewAction.ADD,
    "memory_replace": ReviewAction.REPLACE,
    "memory_archive": ReviewAction.ARCHIVE,
    "working_memory_update": ReviewAction.WORKING_MEMORY,
    "session_description_update": ReviewAction.DESCRIBE,
}


class ReviewOutputError(Exception):
    """The model's answer could not be read (broken JSON): the review fails."""


@dataclasses.dataclass(frozen=True, slots=True)
class Operation:
    """One operation as the model wrote it (any field may be missing or wrong)."""

    action: str
    fields: dict[str, Any]

    @property
    def named_id(self) -> int:
        """The row id the operation names (0 when none, or not an id)."""
        return id_of(self.fields.get("id"))

    @property
    def changes_rows(self) -> bool:
        """Whether it adds, replaces or archives a row (what review_max_operations counts)."""
        return self.action in ROW_ACTIONS


@dataclasses.dataclass(frozen=True, slots=True)
class Answer:
    """A model's answer: its operations, and how it was written."""

    operations: list[Operation]
    kind: AnswerKind


ROW_ACTIONS = frozenset({ReviewAction.ADD, ReviewAction.REPLACE, ReviewAction.ARCHIVE})


def parse_answer(text: str, tool_calls: Sequence[tuple[str, str]]) -> Answer:
    """The operations of a model's answer; raises ReviewOutputError for JSON that is broken.

    JSON is the whole answer, a fenced block, or an object with "operations" inside prose. An
    answer that opens as JSON (or a fence, or names "operations") but does not parse fails the
    review, so a cut-off answer is retried rather than read as "nothing to save". Other text
    ("Nothing new {really}.") is prose: nothing is saved.
    """
    operations = [_tool_operation(name, arguments) for name, arguments in tool_calls]
    stripped = text.strip()
    if not stripped or stripped == NOTHING_TO_SAVE:
        return Answer(operations, AnswerKind.OPERATIONS if operations else AnswerKind.NOTHING)
    document = _json_document(stripped)
    if document is None:
        return Answer(operations, AnswerKind.OPERATIONS if operations else AnswerKind.PROSE)
    raw = document.get("operations") if isinstance(document, dict) else document
    if not isinstance(raw, list):
        message = 'the answer\'s JSON has no "operations" list'
        raise ReviewOutputError(message)
    for item in raw:
        if isinstance(item, dict):
            operations.append(Operation(str(item.get("action", "")), item))
        else:
            operations.append(Operation("", {}))
    return Answer(operations, AnswerKind.OPERATIONS)


def _json_document(text: str) -> object | None:
    """The JSON the answer holds, None for prose; raises ReviewOutputError when it is broken."""
    fenced = _FENCE.search(text)
    if fenced:
        return _loads(fenced.group(1).strip())
    if text[0] in "{[":
        return _loads(text)
    decoder = json.JSONDecoder()
    for found in _EMBEDDED.finditer(text):
        try:
            document, _ = decoder.raw_decode(text, found.start())
        except ValueError:
            continue
        if isinstance(document, dict):
            return document
    if '"operations"' in text:
        message = 'the answer names "operations" but holds no JSON object that parses'
        raise ReviewOutputError(message)
    return None


def _loads(document: str) -> object:
    try:
        return json.loads(document)
    except ValueError as error:
        message = f"the answer's JSON is broken: {error}"
        raise ReviewOutputError(message) from None


def _tool_operation(name: str, arguments: str) -> Operation:
    action = TOOL_ACTIONS.get(name, name)
    try:
        fields = json.loads(arguments or "{}")
    except ValueError:
        return Operation(f"invalid arguments for {name}", {})
    return Operation(action, fields if isinstance(fields, dict) else {})


def category_of(name: object) -> Category | None:
    if not isinstance(name, str):
        return None
    try:
        return Category(name.strip().lower())
    except ValueError:
        return None


def value_of(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    trimmed = value.strip()
    return trimmed if 0 < len(trimmed) <= MAX_VALUE_CHARS else None


def id_of(value: object) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, str) and is_number(value.strip()):
        return int(value.strip())
    return 0
