"""Conversation identity: the key every message, window and (later) review state hangs on.

A conversation is (agent_id, owner_id, channel, chat_id, thread_scope). Identifiers are taken
as given: never trimmed or case-folded, because " telegram" and "telegram" silently becoming one
conversation (or two) is worse than refusing the first.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import re

from memoryd.domain.quoting import clipped, shortened
from memoryd.errors import InvalidArgument, Reason

DEFAULT_AGENT_ID = "main"
DEFAULT_OWNER_ID = "default"
DEFAULT_THREAD_SCOPE = "root"
MAX_IDENTIFIER_CHARS = 256
# Unicode category Cc is exactly these two ranges; one regex scan beats a per-character lookup.
CONTROL_CHARACTERS = re.compile("[\x00-\x1f\x7f-\x9f]")


@dataclasses.dataclass(frozen=True, slots=True)
class ConversationKey:
    """A validated conversation identity, defaults filled in."""

    agent_id: str
    owner_id: str
    channel: str
    chat_id: str
    thread_scope: str

    @property
    def scope_id(self) -> str:
        """The conversation scope id of memory rows: `<channel>:<chat_id>:<thread_scope>`.

        `%` and `:` are percent-escaped in chat_id and thread_scope (the channel has no `:`), so
        two conversations never share one: Matrix's (matrix, "!room:example.org", root) is
        `matrix:!room%3Aexample.org:root`, and (matrix, "!room", "example.org:root") is
        `matrix:!room:example.org%3Aroot`. Ids without either character read as in Fermix.
        """
        return f"{self.channel}:{scope_part(self.chat_id)}:{scope_part(self.thread_scope)}"

    def as_row(self) -> tuple[str, str, str, str, str]:
        """The key columns, in table order."""
        return (self.agent_id, self.owner_id, self.channel, self.chat_id, self.thread_scope)

    def describe(self) -> str:
        """A short human-readable name, for messages (long identifiers shortened)."""
        return (
            f"{shortened(self.scope_id)} (agent {shortened(self.agent_id)}, "
            f"owner {shortened(self.owner_id)})"
        )


def scope_part(text: str) -> str:
    """An identifier as one ':'-separated part of a scope id: `%` and `:` percent-escaped."""
    if "%" in text or ":" in text:
        return text.replace("%", "%25").replace(":", "%3A")
    return text


@dataclasses.dataclass(frozen=True, slots=True)
class OwnerKey:
    """Every conversation of one owner with one agent."""

    agent_id: str
    owner_id: str


@dataclasses.dataclass(frozen=True, slots=True)
class AgentKey:
    """Every conversation of one agent."""

    agent_id: str


HistoryScope = ConversationKey | OwnerKey | AgentKey


def agent_or_default(agent_id: str) -> str:
    """An agent_id as every reader of a request takes it: empty means the default agent. The
    guard (memoryd.api.auth) and every key below read it with this one function."""
    return agent_id or DEFAULT_AGENT_ID


@functools.lru_cache(maxsize=4096)  # adapters name the same few conversations over and over
def conversation_key(
    *,
    agent_id: str,
    owner_id: str,
    channel: str,
    chat_id: str,
    thread_scope: str,
    field: str = "conversation",
) -> ConversationKey:
    """Validate a conversation as sent by a client and fill in the defaults."""
    channel = check_identifier(channel, f"{field}.channel", required=True)
    if ":" in channel:
        raise InvalidArgument(
            f"{field}.channel must not contain ':', got {clipped(channel)}",
            field=f"{field}.channel",
        )
    return ConversationKey(
        agent_id=agent_or_default(check_identifier(agent_id, f"{field}.agent_id")),
        owner_id=check_identifier(owner_id, f"{field}.owner_id") or DEFAULT_OWNER_ID,
        channel=channel,
        chat_id=check_identifier(chat_id, f"{field}.chat_id", required=True),
        thread_scope=check_identifier(thread_scope, f"{field}.thread_scope")
        or DEFAULT_THREAD_SCOPE,
    )


def split_conversation_text(text: str, field: str) -> tuple[str, str, str]:
    """A conversation written as people type it, `CHANNEL:CHAT[:THREAD]` (the command line's
    --conversation, MCP's conversation argument): (channel, chat_id, thread_scope), the thread
    empty for the root. Split at the first two colons only, so a thread may hold colons."""
    parts = text.split(":", 2)
    if len(parts) < 2 or not all(parts):
        raise InvalidArgument(f"{field} must be CHANNEL:CHAT[:THREAD], got {text!r}", field=field)
    return parts[0], parts[1], parts[2] if len(parts) == 3 else ""


def owner_key(*, agent_id: str, owner_id: str, field: str = "owner") -> OwnerKey:
    """Validate an owner scope and fill in the defaults."""
    return OwnerKey(
        agent_id=agent_or_default(check_identifier(agent_id, f"{field}.agent_id")),
        owner_id=check_identifier(owner_id, f"{field}.owner_id") or DEFAULT_OWNER_ID,
    )


def agent_key(*, agent_id: str, field: str = "agent") -> AgentKey:
    """Validate an agent scope and fill in the default."""
    return AgentKey(agent_id=agent_or_default(check_identifier(agent_id, f"{field}.agent_id")))


def check_identifier(value: str, field: str, *, required: bool = False) -> str:
    """Return `value` if it is a usable identifier; "" is allowed unless `required`."""
    if value == "":
        if required:
            raise InvalidArgument(f"{field} is required", reason=Reason.REQUIRED, field=field)
        return value
    if len(value) > MAX_IDENTIFIER_CHARS:  # first: nothing longer is ever quoted back
        raise InvalidArgument(
            f"{field} is {len(value)} characters long; the limit is {MAX_IDENTIFIER_CHARS}",
            reason=Reason.VALUE_TOO_LONG,
            field=field,
        )
    if value.strip() == "":
        raise InvalidArgument(f"{field} must not be blank", reason=Reason.BLANK, field=field)
    if value != value.strip():
        raise InvalidArgument(
            f"{field} must not start or end with whitespace, got {clipped(value)}",
            reason=Reason.INVALID_IDENTIFIER,
            field=field,
        )
    if CONTROL_CHARACTERS.search(value):
        raise InvalidArgument(
            f"{field} must not contain control characters",
            reason=Reason.INVALID_IDENTIFIER,
            field=field,
        )
    return value


@functools.lru_cache(maxsize=4096)
def search_scope_tokens(key: ConversationKey) -> str:
    """The words that tag a conversation's messages in the word index, one per scope.

    A search restricted to a conversation, an owner or an agent adds one of these words to the
    full-text query, so the index itself narrows the candidates instead of a join filtering every
    match. Tokens are digits after a letter: the porter tokenizer leaves them unchanged. A hash
    collision could only add candidates, which the key columns then filter out, never lose one.
    """
    return " ".join(
        (
            conversation_scope_token(key),
            owner_scope_token(OwnerKey(key.agent_id, key.owner_id)),
            agent_scope_token(AgentKey(key.agent_id)),
        )
    )


def conversation_scope_token(key: ConversationKey) -> str:
    """The word index token of one conversation."""
    return "c" + _digest(*key.as_row())


def owner_scope_token(key: OwnerKey) -> str:
    """The word index token of one owner of one agent."""
    return "o" + _digest(key.agent_id, key.owner_id)


def agent_scope_token(key: AgentKey) -> str:
    """The word index token of one agent."""
    return "a" + _digest(key.agent_id)


def scope_token(scope: HistoryScope) -> str:
    """The word index token of any history scope."""
    if isinstance(scope, ConversationKey):
        return conversation_scope_token(scope)
    if isinstance(scope, OwnerKey):
        return owner_scope_token(scope)
    return agent_scope_token(scope)


def _digest(*parts: str) -> str:
    material = "\x00".join(parts).encode("utf-8")
    return str(int.from_bytes(hashlib.blake2b(material, digest_size=8).digest(), "big"))
