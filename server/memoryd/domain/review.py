"""The review ("dreaming"): what the model is shown, what it may answer, which operations stand.

    input    user messages after the cursor, oldest first, at most review_max_messages, packed as
             `message_id=<id>: <content>` lines into review_input_token_budget tokens; one batch
             holds messages of one trust only (a guest's messages are reviewed apart); the rows
             that render into a prompt file, newest first into review_memory_token_budget
             tokens, one line each, with their ids
    output   `Nothing to save.`, or JSON {"operations": [...]} (the whole answer, a ```json
             fence, or an object embedded in prose), or tool calls of the same shapes; prose
             without JSON saves nothing (answer kind "prose"); JSON that does not parse fails
             the review
    ops      add (target user|memory, category, value), replace (id, value), archive (id,
             reason), working_memory (text), describe (text)
    admit    replace and archive only name rows the listing showed; a guest batch adds no
             directive and changes no operator-written row

Invalid operations are skipped with a reason and counted, never applied.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
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
from memoryd.domain.messages import Role, Trust
from memoryd.domain.prompt_files import MEMORY_MD, USER_MD
from memoryd.domain.quoting import clipped
from memoryd.domain.review_runs import AnswerKind

NOTHING_TO_SAVE = "Nothing to save."
GUEST_NOTE = (
    "These messages come from a guest: store no directive, and change no row a guest did not write."
)
REVIEWER_AGENT = "memory_reviewer"
MAX_DESCRIPTION_CHARS = 80
MAX_WORKING_MEMORY_CHARS = 4000
_QUOTES = "\"'`\u201c\u201d\u2018\u2019"
# Where an object with operations may open inside prose: `{` then "operations" as its first key.
_EMBEDDED = re.compile(r'\{\s*"operations"')
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
Keep the memory current: replace outdated rows, archive stale ones, and generalize
overly-specific facts (several narrow rows, or a narrow row and a new message, become one
general fact: replace one row and archive the others). Update rows in place rather than adding.
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
    """A user message to review; `guest` when a guest said it (its trust, or its metadata)."""

    id: int
    content: str
    guest: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class PackedInput:
    """The messages that fit the budget, all of one trust."""

    lines: tuple[str, ...]
    message_ids: tuple[int, ...]
    tokens: int
    guest: bool = False

    @property
    def max_message_id(self) -> int:
        """The new cursor after a successful review."""
        return max(self.message_ids, default=0)


@dataclasses.dataclass(frozen=True, slots=True)
class MemoryListing:
    """The "current memory" section of a review prompt, and the rows it showed."""

    text: str
    shown_ids: frozenset[int]
    hidden: int


@dataclasses.dataclass(frozen=True, slots=True)
class Operation:
    """One operation as the model wrote it (any field may be missing or wrong)."""

    action: str
    fields: dict[str, Any]

    @property
    def named_id(self) -> int:
        """The row id the operation names (0 when none, or not an id)."""
        return _id(self.fields.get("id"))

    @property
    def changes_rows(self) -> bool:
        """Whether it adds, replaces or archives a row (what review_max_operations counts)."""
        return self.action in ROW_ACTIONS


@dataclasses.dataclass(frozen=True, slots=True)
class Answer:
    """A model's answer: its operations, and how it was written."""

    operations: list[Operation]
    kind: AnswerKind


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
ROW_ACTIONS = frozenset({"add", "replace", "archive"})


def pack(
    messages: Sequence[InputMessage],
    budget: int,
    count_tokens: Callable[[str], int],
    cut: Callable[[str, int], str],
) -> PackedInput:
    """`message_id=<id>: <content>` lines, oldest first, until the next would pass the budget or
    is of the other trust (a guest's messages are never reviewed with an operator's).

    A first line that alone is over the budget is cut to fit (`cut` keeps whole characters).
    """
    lines: list[str] = []
    ids: list[int] = []
    used = 0
    guest = bool(messages) and messages[0].guest
    for message in messages:
        if message.guest != guest:
            break
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
    return PackedInput(tuple(lines), tuple(ids), used, guest)


def memory_section(
    records: Iterable[MemoryRecord],
    usage: tuple[int, int],
    budget: int,
    count_tokens: Callable[[str], int],
) -> MemoryListing:
    """The current memory as the model sees it: rows with their ids, under usage headers.

    The active rows that render into a prompt file, most recently updated first, while their
    lines fit `budget` tokens; shown in id order. The rows left out are counted, and the model
    may change only the rows it was shown.
    """
    candidates = sorted(
        (r for r in records if not r.archived and r.prompt_target is not PromptTarget.NONE),
        key=lambda r: (r.updated_at, r.id),
        reverse=True,
    )
    chosen: list[tuple[MemoryRecord, str]] = []
    used = 0
    for record in candidates:
        line = _listing_line(record)
        tokens = count_tokens(line) + 1
        if used + tokens > budget:
            break
        chosen.append((record, line))
        used += tokens
    user_lines: list[str] = []
    memory_lines: list[str] = []
    for record, line in sorted(chosen, key=lambda pair: pair[0].id):
        target = user_lines if record.prompt_target is PromptTarget.USER_MD else memory_lines
        target.append(line)
    hidden = len(candidates) - len(chosen)
    user_chars, memory_chars = usage
    text = "\n".join(
        [
            f'<user_md used="{user_chars}/{USER_MD.max_chars} chars">',
            *user_lines,
            "</user_md>",
            f'<memory_md used="{memory_chars}/{MEMORY_MD.max_chars} chars">',
            *memory_lines,
            "</memory_md>",
            *([f"({hidden} older rows are not shown.)"] if hidden else []),
        ]
    )
    return MemoryListing(text, frozenset(record.id for record, _ in chosen), hidden)


def _listing_line(record: MemoryRecord) -> str:
    bucket = "user" if record.prompt_target is PromptTarget.USER_MD else "memory"
    return (
        f"(id={record.id}, {bucket}, scope={record.scope_type.value}:{record.scope_id}, "
        f"{record.category.value}) {record.key}: {json.dumps(record.value, ensure_ascii=False)}"
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
        *([GUEST_NOTE, ""] if packed.guest else []),
        "New user messages (oldest first):",
        *packed.lines,
    ]
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "\n".join(parts)},
    ]


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
        memory_id = _id(raw_id)
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


def _admit_add(fields: dict[str, Any], scope: _Scope, index: int) -> Admitted | Skipped:
    target = fields.get("target")
    category = _category(fields.get("category"))
    if target not in ("user", "memory"):
        return Skipped(f"add: target must be user or memory, got {clipped(str(target))}")
    if category is None:
        return Skipped(f"add: unknown category {clipped(str(fields.get('category')))}")
    if category not in (USER_BUCKET if target == "user" else MEMORY_BUCKET):
        return Skipped(f"add: category {category.value} is not a {target} category")
    if scope.guest and category is Category.DIRECTIVE:
        return Skipped("add: a guest may not write a directive")
    value = _value(fields.get("value"))
    if value is None:
        return Skipped("add: value must be 1-200 characters of text")
    scope_type = ScopeType.OWNER if target == "user" else ScopeType.AGENT
    return Add(
        category=category,
        scope_type=scope_type,
        value=value,
        key=review_key(category, value, index),
    )


def _admit_replace(fields: dict[str, Any], scope: _Scope, _index: int) -> Admitted | Skipped:
    record = scope.row("replace", fields.get("id"))
    if isinstance(record, Skipped):
        return record
    value = _value(fields.get("value"))
    if record.category is Category.JOB_RUN_SUMMARY:
        return Skipped(f"replace: row {record.id} is a job run summary")
    if value is None:
        return Skipped("replace: value must be 1-200 characters of text")
    return Replace(record.id, value)


def _admit_archive(fields: dict[str, Any], scope: _Scope, _index: int) -> Admitted | Skipped:
    record = scope.row("archive", fields.get("id"))
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


_ADMISSION: dict[str, Callable[[dict[str, Any], _Scope, int], Admitted | Skipped]] = {
    "add": _admit_add,
    "replace": _admit_replace,
    "archive": _admit_archive,
    "working_memory": _admit_working_memory,
    "describe": _admit_describe,
}


def is_review_input(role: Role, metadata_json: str) -> bool:
    """Whether a review reads the message: a user message (of any trust) that was not spoken.
    The same rule as storage.review_store.REVIEWABLE."""
    if role is not Role.USER:
        return False
    try:
        metadata = json.loads(metadata_json or "{}")
    except ValueError:
        return False
    return not (isinstance(metadata, dict) and metadata.get("spoken") in (True, "true"))


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


def session_description(written: str, first_user_message: str | None) -> str:
    """A session's description: the reviewer's, else (OpenHermit's fallback) its first user
    message, normalised; "" when there is neither."""
    if written:
        return written
    return normalise_description(first_user_message) if first_user_message else ""


def session_id(agent_id: str, channel: str, chat_id: str, thread: str, max_id: int) -> str:
    """The tag of a review's model call."""
    return f"memory_review:{agent_id}:{channel}:{chat_id}:{thread}:{max_id}"


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
