"""Conversation messages: what a new message must satisfy, and what a stored one carries."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import re

from memoryd.domain import json_text
from memoryd.domain.conversation import CONTROL_CHARACTERS, ConversationKey, check_identifier
from memoryd.domain.quoting import clipped
from memoryd.domain.tokens import count_tokens
from memoryd.errors import InvalidArgument, PermissionDenied, Reason

DEFAULT_KIND = "chat_message"
CHECKPOINT_KIND = "checkpoint_summary"
SERVER_KINDS = frozenset({CHECKPOINT_KIND})
KIND_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,63}")
MAX_SENDER_CHARS = 256


class Role(enum.Enum):
    """Who produced a message, in the chat-completions sense."""

    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"


class Trust(enum.Enum):
    """How far a message's author is trusted."""

    OPERATOR = "operator"
    GUEST = "guest"


def require_operator(trust: Trust, command: str) -> None:
    """State-changing chat commands are the operator's: a guest gets PERMISSION_DENIED."""
    if trust is Trust.GUEST:
        raise PermissionDenied(
            f"{command} is an operator's command; a guest may not run it",
            reason=Reason.OPERATOR_ONLY,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class MessageLimits:
    """The configured limits a new message is checked against."""

    max_content_bytes: int
    max_metadata_bytes: int
    max_messages_per_call: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SentMessage:
    """A message as a client sent it, before its limits are checked; trust None means the
    client did not say (the use case decides: operator, or the turn's speaker)."""

    sender: str
    role: Role
    kind: str
    content: str
    metadata_json: str
    client_message_id: str | None
    created_at: dt.datetime | None
    trust: Trust | None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class NewMessage:
    """A validated message, ready to store."""

    sender: str
    role: Role
    kind: str
    content: str
    metadata_json: str
    client_message_id: str | None
    created_at: dt.datetime | None
    trust: Trust
    # Tokens of the content, counted once here and stored with the row.
    tokens: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class StoredMessage:
    """A committed message row."""

    id: int
    key: ConversationKey
    sender: str
    role: Role
    kind: str
    content: str
    metadata_json: str
    client_message_id: str | None
    created_at: dt.datetime
    trust: Trust


def check_new_message(
    message: SentMessage, field: str, limits: MessageLimits, *, default_trust: Trust
) -> NewMessage:
    """Check one message as sent by a client; returns it with defaults filled in (its trust
    is `default_trust` when the client did not give one)."""
    if len(message.sender) > MAX_SENDER_CHARS:
        raise InvalidArgument(
            f"{field}.sender is {len(message.sender)} characters long; "
            f"the limit is {MAX_SENDER_CHARS}",
            reason=Reason.VALUE_TOO_LONG,
            field=f"{field}.sender",
        )
    if CONTROL_CHARACTERS.search(message.sender):
        raise InvalidArgument(
            f"{field}.sender must not contain control characters",
            reason=Reason.INVALID_IDENTIFIER,
            field=f"{field}.sender",
        )
    kind = check_kind(message.kind, f"{field}.kind")
    if kind in SERVER_KINDS:
        raise InvalidArgument(
            f"{field}.kind {clipped(kind)} is reserved for the server", field=f"{field}.kind"
        )
    size = len(message.content.encode("utf-8"))
    if size > limits.max_content_bytes:
        raise InvalidArgument(
            f"{field}.content is {size} bytes; the limit is {limits.max_content_bytes} "
            "(memoryd.history.max_content_bytes)",
            reason=Reason.VALUE_TOO_LONG,
            field=f"{field}.content",
        )
    client_id = check_identifier(message.client_message_id or "", f"{field}.client_message_id")
    return NewMessage(
        sender=message.sender,
        role=message.role,
        kind=kind,
        content=message.content,
        metadata_json=check_metadata(
            message.metadata_json, f"{field}.metadata", limits.max_metadata_bytes
        ),
        client_message_id=client_id or None,
        created_at=message.created_at,
        trust=message.trust or default_trust,
        tokens=count_tokens(message.content),
    )


def check_message_count(count: int, limits: MessageLimits) -> None:
    """An append carries at least one message and at most the configured number."""
    if count == 0:
        raise InvalidArgument("messages must contain at least one message", field="messages")
    if count > limits.max_messages_per_call:
        raise InvalidArgument(
            f"messages has {count} messages; the limit is {limits.max_messages_per_call} per call "
            "(memoryd.history.max_messages_per_call)",
            reason=Reason.VALUE_TOO_LONG,
            field="messages",
        )


def is_blank(content: str) -> bool:
    """Blank content (after trimming) is skipped rather than stored."""
    return content.strip() == ""


def check_kind(kind: str, field: str) -> str:
    """A kind is a short lowercase identifier; empty means chat_message."""
    if kind == "":
        return DEFAULT_KIND
    if not KIND_PATTERN.fullmatch(kind):
        raise InvalidArgument(
            f"{field} must be lowercase letters, digits and '_', starting with a letter, "
            f"at most 64 characters; got {clipped(kind)}",
            field=field,
        )
    return kind


def check_kinds(kinds: list[str], field: str) -> tuple[str, ...]:
    """A kind filter: each entry a valid kind; duplicates removed, order kept."""
    if "" in kinds:
        raise InvalidArgument(
            f"{field}[{kinds.index('')}] must not be empty",
            reason=Reason.BLANK,
            field=f"{field}[{kinds.index('')}]",
        )
    checked = [check_kind(kind, f"{field}[{index}]") for index, kind in enumerate(kinds)]
    return tuple(dict.fromkeys(checked))


def check_metadata(text: str, field: str, max_bytes: int) -> str:
    """Metadata is the text of a JSON object (memoryd.domain.json_text); empty means {}.

    Returned as given: the adapter's text is what is stored and returned.
    """
    if text == "":
        return "{}"
    json_text.parse_object(text, field, max_bytes, setting="memoryd.history.max_metadata_bytes")
    return text
