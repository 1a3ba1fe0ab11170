"""The review ("dreaming"): what the model is shown, what it may answer, which operations stand.

    input    user messages after the cursor, oldest first, at most review_max_messages, packed as
             `message_id=<id>: <content>` lines into review_input_token_budget tokens; the rows
             that render into a prompt file, one line each, with their ids
    output   `Nothing to save.`, or JSON {"operations": [...]} (also inside a ```json fence),
             or tool calls of the same shapes; prose without JSON saves nothing; broken JSON
             fails the review
    ops      add (target user|memory, category, value), replace (id, value), archive (id,
             reason), working_memory (text), describe (text)

Invalid operations are skipped and counted, never applied.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from memoryd.domain.memories import (
    MAX_VALUE_CHARS,
    MEMORY_BUCKET,
    USER_BUCKET,
    Category,
    MemoryRecord,
    PromptTarget,
    ScopeType,
)
from memoryd.domain.prompt_files import MEMORY_MD, USER_MD
from memoryd.domain.quoting import clipped

NOTHING_TO_SAVE = "Nothing to save."
REVIEWER_AGENT = "memory_reviewer"
MAX_DESCRIPTION_CHARS = 80
MAX_WORKING_MEMORY_CHARS = 4000
_QUOTES = "\"'`\u201c\u201d\u2018\u2019"
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)

SYSTEM_PROMPT = """\
You maintain the long-term memory of an assistant: durable facts about its user and their work.
You are shown the user's new messages and the memory as it stands, each row with its id.

Store only durable facts the user stated about themselves or their work: identity, preferences,
interests, goals (target "user"); context about their work and standing rules they set for the
assistant (target "memory", categories "context" and "directive").
Never store the assistant's own behaviour, its refusals, one-shot answers or task progress,
public knowledge, or secrets (passwords, keys, tokens, card or account numbers).
Never store street addresses or coordinates; a city or region may be stored.
When a message refines or contradicts a row, the latest statement wins: replace that row by id,
or archive it by id with a reason. Never add a duplicate of an existing row.
Write each value as a short declarative fact about the user or their work (at most 200
characters), not as an instruction to yourself.

Answer with exactly "Nothing to save." when nothing qualifies. Otherwise answer with JSON only:
{"operations": [
  {"action": "add", "target": "user", "category": "preference", "value": "..."},
  {"action": "replace", "id": 12, "value": "..."},
  {"action": "archive", "id": 7, "reason": "..."},
  {"action": "working_memory", "text": "what this conversation is about right now"},
  {"action": "describe", "text": "a short title for the conversation"}
]}
User categories: identity, preference, interest, goal. Memory categories: context, directive."""

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "memory_add",
            "description": "Store a new durable fact.",
            "parameters": {
                "type": "object",
                "properties": {
                    "target": {"type": "string", "enum": ["user", "memory"]},
                    "category": {"type": "string"},
                    "value": {"type": "string"},
                },
                "required": ["target", "category", "value"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "memory_replace",
            "description": "Replace the value of an existing row.",
            "parameters": {
                "type": "object",
                "properties": {"id": {"type": "integer"}, "value": {"type": "string"}},
                "required": ["id", "value"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "memory_archive",
            "description": "Archive a row that is no longer true.",
            "parameters": {
                "type": "object",
                "properties": {"id": {"type": "integer"}, "reason": {"type": "string"}},
                "required": ["id"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "working_memory_update",
            "description": "Replace this conversation's working memory.",
            "parameters": {
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "session_description_update",
            "description": "Set this conversation's short description.",
            "parameters": {
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            },
        },
    },
]
TOOL_ACTIONS = {
    "memory_add": "add",
    "memory_replace": "replace",
    "memory_archive": "archive",
    "working_memory_update": "working_memory",
    "session_description_update": "describe",
}


class ReviewOutputError(Exception):
    """The model's answer could not be read (broken JSON): the review fails."""


@dataclasses.dataclass(frozen=True, slots=True)
class InputMessage:
    """A user message to review."""

    id: int
    content: str


@dataclasses.dataclass(frozen=True, slots=True)
class PackedInput:
    """The messages that fit the budget."""

    lines: tuple[str, ...]
    message_ids: tuple[int, ...]
    tokens: int

    @property
    def max_message_id(self) -> int:
        """The new cursor after a successful review."""
        return max(self.message_ids, default=0)


@dataclasses.dataclass(frozen=True, slots=True)
class Operation:
    """One operation as the model wrote it (any field may be missing or wrong)."""

    action: str
    fields: dict[str, Any]


@dataclasses.dataclass(frozen=True, slots=True)
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


def pack(
    messages: Sequence[InputMessage],
    budget: int,
    count_tokens: Callable[[str], int],
    cut: Callable[[str, int], str],
) -> PackedInput:
    """`message_id=<id>: <content>` lines, oldest first, until the next would pass the budget.

    A first line that alone is over the budget is cut to fit (`cut` keeps whole characters).
    """
    lines: list[str] = []
    ids: list[int] = []
    used = 0
    for message in messages:
        line = f"message_id={message.id}: {message.content}"
        tokens = count_tokens(line) + (1 if lines else 0)  # the newline between lines
        if used + tokens > budget:
            if not lines:
                line = cut(line, budget)
                lines.append(line)
                ids.append(message.id)
                used = count_tokens(line)
            break
        lines.append(line)
        ids.append(message.id)
        used += tokens
    return PackedInput(tuple(lines), tuple(ids), used)


def memory_section(records: Iterable[MemoryRecord], user_chars: int, memory_chars: int) -> str:
    """The current memory as the model sees it, rows with their ids, under usage headers."""
    user_lines: list[str] = []
    memory_lines: list[str] = []
    for record in sorted(records, key=lambda r: r.id):
        if record.archived or record.prompt_target is PromptTarget.NONE:
            continue
        bucket = "user" if record.prompt_target is PromptTarget.USER_MD else "memory"
        line = (
            f"(id={record.id}, {bucket}, scope={record.scope_type.value}:{record.scope_id}, "
            f"{record.category.value}) {record.key}: {json.dumps(record.value, ensure_ascii=False)}"
        )
        (user_lines if bucket == "user" else memory_lines).append(line)
    return "\n".join(
        [
            f'<user_md used="{user_chars}/{USER_MD.max_chars} chars">',
            *user_lines,
            "</user_md>",
            f'<memory_md used="{memory_chars}/{MEMORY_MD.max_chars} chars">',
            *memory_lines,
            "</memory_md>",
        ]
    )


def prompt(
    packed: PackedInput, memory: str, working_memory: str, description: str
) -> list[dict[str, Any]]:
    """The chat messages of one review call."""
    parts = [
        "Current memory:",
        memory,
        "",
        f"Conversation description: {description or '(none)'}",
        f"Working memory: {working_memory or '(none)'}",
        "",
        "New user messages (oldest first):",
        *packed.lines,
    ]
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "\n".join(parts)},
    ]


def parse_answer(text: str, tool_calls: Sequence[tuple[str, str]]) -> list[Operation]:
    """The operations of a model's answer; raises ReviewOutputError for broken JSON."""
    operations = [_tool_operation(name, arguments) for name, arguments in tool_calls]
    stripped = text.strip()
    if not stripped or stripped == NOTHING_TO_SAVE:
        return operations
    document = _json_document(stripped)
    if document is None:
        return operations  # prose without JSON: nothing to save
    try:
        parsed = json.loads(document)
    except ValueError as error:
        message = f"the answer's JSON is broken: {error}"
        raise ReviewOutputError(message) from None
    raw = parsed.get("operations") if isinstance(parsed, dict) else parsed
    if not isinstance(raw, list):
        message = 'the answer\'s JSON has no "operations" list'
        raise ReviewOutputError(message)
    for item in raw:
        if isinstance(item, dict):
            operations.append(Operation(str(item.get("action", "")), item))
        else:
            operations.append(Operation("", {}))
    return operations


def admit(operation: Operation, owned: dict[int, MemoryRecord], index: int) -> Admitted | str:
    """The operation as it will be applied, or the reason it is skipped.

    `owned` holds the active rows of the review's agent and owner: replace and archive must name
    one of them (never another owner's row, never an archived one).
    """
    admit_one = _ADMISSION.get(operation.action)
    if admit_one is None:
        return f"unknown action {clipped(str(operation.action))}"
    return admit_one(operation.fields, owned, index)


def _admit_add(
    fields: dict[str, Any], _owned: dict[int, MemoryRecord], index: int
) -> Admitted | str:
    target = fields.get("target")
    category = _category(fields.get("category"))
    if target not in ("user", "memory"):
        return f"add: target must be user or memory, got {clipped(str(target))}"
    if category is None:
        return f"add: unknown category {clipped(str(fields.get('category')))}"
    if category not in (USER_BUCKET if target == "user" else MEMORY_BUCKET):
        return f"add: category {category.value} is not a {target} category"
    value = _value(fields.get("value"))
    if value is None:
        return "add: value must be 1-200 characters of text"
    scope = ScopeType.OWNER if target == "user" else ScopeType.AGENT
    return Add(category, scope, value, review_key(category, value, index))


def _admit_replace(
    fields: dict[str, Any], owned: dict[int, MemoryRecord], _index: int
) -> Admitted | str:
    record = owned.get(_id(fields.get("id")))
    value = _value(fields.get("value"))
    if record is None:
        return f"replace: no active row {clipped(str(fields.get('id')))} of this owner"
    if record.category is Category.JOB_RUN_SUMMARY:
        return f"replace: row {record.id} is a job run summary"
    if value is None:
        return "replace: value must be 1-200 characters of text"
    return Replace(record.id, value)


def _admit_archive(
    fields: dict[str, Any], owned: dict[int, MemoryRecord], _index: int
) -> Admitted | str:
    record = owned.get(_id(fields.get("id")))
    if record is None:
        return f"archive: no active row {clipped(str(fields.get('id')))} of this owner"
    reason = fields.get("reason")
    return Archive(record.id, (reason.strip()[:1024] or None) if isinstance(reason, str) else None)


def _admit_working_memory(
    fields: dict[str, Any], _owned: dict[int, MemoryRecord], _index: int
) -> Admitted | str:
    text = fields.get("text")
    if not isinstance(text, str):
        return "working_memory: text must be a string"
    return SetWorkingMemory(text.strip()[:MAX_WORKING_MEMORY_CHARS])


def _admit_describe(
    fields: dict[str, Any], _owned: dict[int, MemoryRecord], _index: int
) -> Admitted | str:
    text = fields.get("text")
    description = normalise_description(text) if isinstance(text, str) else ""
    if not description:
        return "describe: text must be non-blank text"
    return SetDescription(description)


_ADMISSION: dict[str, Callable[[dict[str, Any], dict[int, MemoryRecord], int], Admitted | str]] = {
    "add": _admit_add,
    "replace": _admit_replace,
    "archive": _admit_archive,
    "working_memory": _admit_working_memory,
    "describe": _admit_describe,
}


def review_key(category: Category, value: str, index: int) -> str:
    """`review_<category>_<12 hex of sha256(value)>_<n>`: the same answer gives the same keys."""
    digest = hashlib.sha256(value.encode("utf-8")).hexdigest()[:12]
    return f"review_{category.value}_{digest}_{index}"


def normalise_description(text: str) -> str:
    """OpenHermit's description: one line, no quotes or leading markdown, at most 80 characters."""
    collapsed = " ".join(text.split())
    collapsed = collapsed.strip(_QUOTES).lstrip("#*- ").strip().strip(_QUOTES).strip()
    if len(collapsed) > MAX_DESCRIPTION_CHARS:
        return collapsed[: MAX_DESCRIPTION_CHARS - 3].rstrip() + "..."
    return collapsed


def session_id(agent_id: str, channel: str, chat_id: str, thread: str, max_id: int) -> str:
    """The tag of a review's model call."""
    return f"memory_review:{agent_id}:{channel}:{chat_id}:{thread}:{max_id}"


def _json_document(text: str) -> str | None:
    fenced = _FENCE.search(text)
    if fenced:
        return fenced.group(1).strip()
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start < 0:
        return None
    end = max(text.rfind("}"), text.rfind("]"))
    return text[start : end + 1] if end > start else text[start:]


def _tool_operation(name: str, arguments: str) -> Operation:
    action = TOOL_ACTIONS.get(name, name)
    try:
        fields = json.loads(arguments or "{}")
    except ValueError:
        return Operation(f"invalid arguments for {name}", {})
    return Operation(action, fields if isinstance(fields, dict) else {})


def _category(name: object) -> Category | None:
    if not isinstance(name, str):
        return None
    try:
        return Category(name.strip().lower())
    except ValueError:
        return None


def _value(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    trimmed = value.strip()
    return trimmed if 0 < len(trimmed) <= MAX_VALUE_CHARS else None


def _id(value: object) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return 0
