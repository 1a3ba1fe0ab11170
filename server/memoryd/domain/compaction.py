"""Compaction and context composition: the reference's compactor and PromptComposer, as rules.

budget      trunc(0.5 x context window); the trigger and the composed context's limit are
            threshold x context window
selection   the session's leading system messages are protected; walking newest first, the
            newest message is always kept and older ones while the kept total stays within
            budget/2; a tool result stays with its call; everything older (since the last
            checkpoint) is summarised, together with the previous checkpoint's summary
summary     at most max(budget/4, 64) tokens; each message as `[YYYY-MM-DD HH:MM role] text`
compose     the memory block, working memory, recent agent-scope entries and the latest
            checkpoint summary, then the window's messages oldest first; the oldest are left
            out of the answer (never out of history) when the total would pass the limit
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

from memoryd.domain.answers import LIST_BUDGET_BYTES, text_bytes
from memoryd.domain.messages import Role
from memoryd.domain.timestamps import from_text
from memoryd.errors import InvalidArgument

COMPACTOR = "compactor"  # the checkpoint message's sender, and the agent its model calls are for
PREFLIGHT_NOTICE = "Trimmed older conversation history to stay within the context window."
CHANGED = "Conversation changed while compacting; run /compact again."
CHECKPOINT_HEADER = "Conversation checkpoint summary:\n"
WORKING_MEMORY_HEADER = "Session-local working memory (read-only context):\n"
DESCRIPTION_LABEL = "Session description: "
RECENT_ENTRIES_HEADER = "Recent long-term memory entries (read-only context):\n"
RECALLED_HEADER = (
    "Recalled from long-term memory and from earlier in this conversation, as relevant to the "
    "newest message (background, may be outdated):\n"
)
MIN_SUMMARY_TOKENS = 64
# What a part's fields other than its texts take in an answer, at most.
BLOCK_OVERHEAD_BYTES = 16
MESSAGE_OVERHEAD_BYTES = 48

SUMMARY_SYSTEM_PROMPT = """\
You compact a conversation so that an assistant can continue it within its context window. \
Write a summary of the messages you are given, in plain text, in at most {tokens} tokens.

Rules:
- Later messages supersede earlier ones: keep only the latest state of anything that changed.
- Keep decisions, durable facts and the active context (what is being worked on, open tasks).
- Never carry forward a question that was answered later.
- Say each item once.
- When a previous summary is given, fold it in: the result replaces it."""


class Outcome(enum.Enum):
    """What a compaction (or a pre-flight check) did."""

    COMPACTED = "compacted"
    NOTHING_TO_COMPACT = "nothing_to_compact"
    CONVERSATION_CHANGED = "conversation_changed"
    FAILED = "failed"
    SKIPPED = "skipped"


def compacted_text(before: int, after: int) -> str:
    """/compact's answer when it compacted."""
    return f"Compacted: {before:,} -> {after:,} tokens."


def nothing_text(tokens: int) -> str:
    """/compact's answer when nothing is older than what the budget keeps."""
    return f"Nothing to compact ({tokens:,} tokens)."


def failed_text(reason: str) -> str:
    """/compact's answer when the model call failed."""
    return f"Compaction failed: {reason}"


def budget(context_window: int) -> int:
    """What the kept messages and the summary share: trunc(0.5 x context window)."""
    return int(0.5 * context_window)


def limit(threshold: float, context_window: int) -> int:
    """threshold x context window, rounded down: the most a composed context may take."""
    return math.floor(round(threshold * context_window, 6))


def trigger(threshold: float, context_window: int) -> int:
    """threshold x context window, rounded up: a peak that reaches it triggers compaction."""
    return math.ceil(round(threshold * context_window, 6))


def summary_budget(total_budget: int) -> int:
    """The summary's tokens: max(budget/4, 64)."""
    return max(total_budget // 4, MIN_SUMMARY_TOKENS)


class WindowMessage(NamedTuple):
    """A message as compaction and composition see it (a named tuple: a composition reads
    hundreds of them per call)."""

    id: int
    role: Role
    kind: str
    sender: str
    content: str
    metadata_json: str
    tokens: int
    # As stored: ISO 8601 in UTC (parsed only for a summary line, off the hot path).
    created_at: str
    # Its size in an answer: content, metadata, sender and kind in UTF-8, plus field overhead.
    answer_bytes: int


@dataclasses.dataclass(frozen=True, slots=True)
class Selection:
    """What a compaction keeps and what it summarises (each oldest first)."""

    protected: tuple[WindowMessage, ...]
    summarized: tuple[WindowMessage, ...]
    kept: tuple[WindowMessage, ...]


def select(
    protected: Sequence[WindowMessage], candidates: Sequence[WindowMessage], total_budget: int
) -> Selection:
    """The reference's selection over the window's messages after the protected ones."""
    half = total_budget / 2
    kept_count = 0
    kept_tokens = 0
    for message in reversed(candidates):
        if kept_count and kept_tokens + message.tokens > half:
            break
        kept_count += 1
        kept_tokens += message.tokens
    start = len(candidates) - kept_count
    # A tool result stays with the call that asked for it: never start the kept part at one.
    while 0 < start < len(candidates) and candidates[start].role is Role.TOOL:
        start -= 1
    return Selection(tuple(protected), tuple(candidates[:start]), tuple(candidates[start:]))


def summary_line(message: WindowMessage) -> str:
    """`[YYYY-MM-DD HH:MM role] content`."""
    return (
        f"[{from_text(message.created_at):%Y-%m-%d %H:%M} {message.role.value}] {message.content}"
    )


def summary_prompt(
    previous_summary: str | None, messages: Sequence[WindowMessage], tokens: int
) -> list[dict[str, str]]:
    """The chat messages of the summary call."""
    parts = []
    if previous_summary:
        parts.append(f"Previous summary:\n{previous_summary}")
    parts.append("Messages (oldest first):\n" + "\n".join(summary_line(m) for m in messages))
    return [
        {"role": "system", "content": SUMMARY_SYSTEM_PROMPT.format(tokens=tokens)},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


class PartKind(enum.Enum):
    """What a part of the composed context is."""

    MEMORY_CONTEXT = "memory_context"
    WORKING_MEMORY = "working_memory"
    RECENT_ENTRIES = "recent_entries"
    CHECKPOINT_SUMMARY = "checkpoint_summary"
    MESSAGE = "message"
    RECALLED = "recalled"


@dataclasses.dataclass(frozen=True, slots=True)
class Part:
    """A system block of the composed context."""

    kind: PartKind
    role: Role
    content: str
    tokens: int


def block(kind: PartKind, text: str, count_tokens: Callable[[str], int]) -> Part | None:
    """A system block, or None when it would be empty."""
    if not text:
        return None
    return Part(kind, Role.SYSTEM, text, count_tokens(text))


def working_memory_text(working_memory: str, description: str = "") -> str:
    """The working-memory block's text: the session's description, then its working memory
    ("" when it has neither)."""
    lines = [f"{DESCRIPTION_LABEL}{description}"] if description.strip() else []
    if working_memory.strip():
        lines.append(working_memory)
    return WORKING_MEMORY_HEADER + "\n\n".join(lines) if lines else ""


def recent_entries_text(entries: Sequence[tuple[str, str]]) -> str:
    """The recent long-term entries block: each entry as `## <key>\\n<content>`."""
    if not entries:
        return ""
    return RECENT_ENTRIES_HEADER + "\n\n".join(f"## {key}\n{value}" for key, value in entries)


def recalled_part(
    lines: Sequence[str], budget: int, count_tokens: Callable[[str], int]
) -> Part | None:
    """The Recalled block: as many of `lines` (best first) as fit in `budget` tokens with the
    header, or None when not one fits."""
    kept: list[str] = []
    text = ""
    for line in lines:
        candidate = RECALLED_HEADER + "\n".join([*kept, line])
        if count_tokens(candidate) > budget:
            continue
        kept.append(line)
        text = candidate
    return Part(PartKind.RECALLED, Role.SYSTEM, text, count_tokens(text)) if kept else None


def checkpoint_text(summary: str) -> str:
    """The checkpoint block's text."""
    return f"{CHECKPOINT_HEADER}{summary}"


@dataclasses.dataclass(frozen=True, slots=True)
class Composition:
    """The composed context: the system blocks, then the messages (the session's leading system
    messages first), and what it left out."""

    blocks: tuple[Part, ...]
    messages: tuple[WindowMessage, ...]
    total_tokens: int
    omitted_messages: int
    omitted_tokens: int


def compose(
    blocks: Sequence[Part],
    protected: Sequence[WindowMessage],
    window: Sequence[WindowMessage],
    *,
    limit_tokens: int,
    older_omitted: tuple[int, int] = (0, 0),
    max_messages: int | None = None,
) -> Composition:
    """Blocks, then the protected messages, then as many of the window's newest messages as fit
    in `limit_tokens` (and in one answer), oldest first.

    `window` holds the newest messages the caller read, oldest first; `older_omitted` counts
    (messages, tokens) older than those, which are left out too. A window that would start at a
    tool result without its call leaves that result out as well. `max_messages` caps the
    window's messages (memoryd.history.max_conversation_history).
    """
    used = sum(part.tokens for part in blocks) + sum(message.tokens for message in protected)
    if used > limit_tokens:
        raise InvalidArgument(
            f"the context limit is {limit_tokens:,} tokens (threshold x context_window), but the "
            f"system blocks and the session's leading system messages alone take {used:,}; "
            "give a larger context_window"
        )
    room_bytes = (
        LIST_BUDGET_BYTES
        - sum(text_bytes(part.content) + BLOCK_OVERHEAD_BYTES for part in blocks)
        - sum(message.answer_bytes for message in protected)
    )
    cap = len(window) if max_messages is None else min(max_messages, len(window))
    start = len(window)
    while len(window) - start < cap:
        message = window[start - 1]
        if used + message.tokens > limit_tokens or message.answer_bytes > room_bytes:
            break
        used += message.tokens
        room_bytes -= message.answer_bytes
        start -= 1
    while start < len(window) and window[start].role is Role.TOOL:
        used -= window[start].tokens
        start += 1
    left_out = window[:start]
    return Composition(
        blocks=tuple(blocks),
        messages=(*protected, *window[start:]),
        total_tokens=used,
        omitted_messages=older_omitted[0] + len(left_out),
        omitted_tokens=older_omitted[1] + sum(message.tokens for message in left_out),
    )


def skip_reason(
    *,
    enabled: bool,
    peak_prompt_tokens: int | None,
    trigger_tokens: int,
    omitted_messages: int,
    backoff_until: dt.datetime | None,
    now: dt.datetime,
) -> str | None:
    """Why an automatic compaction (Preflight, after a turn) does not run now; None: it runs.
    Two things trigger one: the last peak reached the trigger, or the composed context leaves
    messages of the window out (they would otherwise be neither shown nor summarised)."""
    if not enabled:
        return "automatic compaction is disabled (memoryd.compaction.enabled)"
    if not omitted_messages:
        if peak_prompt_tokens is None:
            return "no prompt tokens recorded yet: CommitTurn reports the first measurement"
        if peak_prompt_tokens < trigger_tokens:
            return (
                f"the last peak of {peak_prompt_tokens:,} prompt tokens is under the trigger of "
                f"{trigger_tokens:,}, and the composed context leaves no message out"
            )
    if backoff_until is not None and now < backoff_until:
        return f"a compaction failed; automatic compaction waits until {backoff_until.isoformat()}"
    return None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CompactResult:
    """What one compaction did."""

    outcome: Outcome
    message: str
    tokens_before: int = 0
    tokens_after: int = 0
    checkpoint_id: int = 0


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PreflightResult:
    """What the pre-flight check did."""

    outcome: Outcome
    notice: str
    reason: str
    peak_prompt_tokens: int
    trigger_tokens: int
    tokens_before: int = 0
    tokens_after: int = 0


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointInfo:
    """The latest checkpoint of a session."""

    message: WindowMessage
    first_message_id: int
    last_message_id: int
    revision: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CompactionDescription:
    """GetCompactionState's answer."""

    enabled: bool
    threshold: float
    context_window: int
    budget_tokens: int
    trigger_tokens: int
    peak_prompt_tokens: int
    checkpoint: CheckpointInfo | None
    window_start_id: int
    backoff_until: dt.datetime | None
    last_error: str


def covers(message: WindowMessage) -> tuple[int, int]:
    """The first and last message ids a checkpoint summary covers (its metadata's)."""
    details = json.loads(message.metadata_json or "{}")
    return int(details.get("first_message_id", 0)), int(details.get("last_message_id", 0))


def covered_from(previous: WindowMessage | None) -> int:
    """Where the messages a new summary covers start: the previous checkpoint's first, if any."""
    return covers(previous)[0] if previous is not None else 0


def window_tokens(*groups: list[WindowMessage] | tuple[WindowMessage, ...]) -> int:
    """The tokens of every message of these groups."""
    return sum(message.tokens for group in groups for message in group)
