"""What the MCP tools take: their arguments' types and bounds (as the model sees them in each
tool's schema), the words they accept (categories, roles, search modes), and what a server
started with `memoryd mcp --agent/--owner/--conversation/--trust` fills in (`Defaults`)."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

import memoryd_client as md
from memoryd.domain.conversation import MAX_IDENTIFIER_CHARS
from memoryd.domain.messages import MAX_SENDER_CHARS
from memoryd.domain.recall import MAX_LIMIT
from memoryd.domain.search_query import MAX_QUERY_CHARS

T = TypeVar("T")

# What one recorded message may hold: 256 KiB of UTF-8 (the server's default max_content_bytes)
# is at least this many characters.
MAX_TEXT_CHARS = 65_536
# Messages one record_turn may carry (the server's default max_messages_per_call).
MAX_TURN_MESSAGES = 100
# A conversation as the tools take it: CHANNEL:CHAT[:THREAD].
MAX_CONVERSATION_CHARS = 3 * MAX_IDENTIFIER_CHARS + 2

# The scope model, said once to the model (the server's instructions).
SCOPE_MODEL = (
    "Memory is kept per owner, the user it belongs to, and within an owner per conversation "
    "(CHANNEL:CHAT[:THREAD]). Pass owner and conversation with every call that takes them "
    "unless the server was started with them."
)
OwnerArg = Annotated[
    str,
    Field(
        max_length=MAX_IDENTIFIER_CHARS,
        description="The user the memory belongs to (as your adapter names users), e.g. "
        "'ada' or 'telegram:5551234'.",
    ),
]
ConversationArg = Annotated[
    str,
    Field(
        max_length=MAX_CONVERSATION_CHARS,
        description="The conversation, CHANNEL:CHAT or CHANNEL:CHAT:THREAD, e.g. "
        "'telegram:42'. It belongs to the owner.",
    ),
]
LimitArg = Annotated[int, Field(ge=1, le=MAX_LIMIT, description="How many hits at most.")]
QueryArg = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description="Words or a question; any text is searched as plain words and meaning.",
    ),
]
Category = Literal["identity", "preference", "interest", "goal", "context", "directive"]
CATEGORIES: dict[str, md.Category.ValueType] = {
    "identity": md.CATEGORY_IDENTITY,
    "preference": md.CATEGORY_PREFERENCE,
    "interest": md.CATEGORY_INTEREST,
    "goal": md.CATEGORY_GOAL,
    "context": md.CATEGORY_CONTEXT,
    "directive": md.CATEGORY_DIRECTIVE,
}
ROLES = {"user": md.ROLE_USER, "assistant": md.ROLE_ASSISTANT}
MODES = {
    "hybrid": md.SEARCH_MODE_HYBRID,
    "lexical": md.SEARCH_MODE_LEXICAL,
    "semantic": md.SEARCH_MODE_SEMANTIC,
}


class Said(BaseModel):
    """One message of a turn."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["user", "assistant"] = Field(
        description="user: what the user said; assistant: your answer."
    )
    text: str = Field(max_length=MAX_TEXT_CHARS, description="What was said.")
    sender: str = Field(
        default="",
        max_length=MAX_SENDER_CHARS,
        description="Who said it (a name); empty: the owner for user, 'assistant' for yours.",
    )
    id: str = Field(
        default="",
        max_length=MAX_IDENTIFIER_CHARS,
        description="Your id of the message: recording it again stores nothing twice.",
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Defaults:
    """What a tool call that names none works on (`memoryd mcp --agent/--owner/--conversation`),
    and the trust its writes carry (`--trust`)."""

    agent_id: str = ""
    owner_id: str = ""
    # CHANNEL:CHAT[:THREAD], or empty: then every conversation tool needs its argument.
    conversation: str = ""
    # compose_context's window when the call gives none (0: memoryd's own).
    context_window: int = 0
    # The trust of what the tools write. "guest" (the default over --listen): the model's
    # writes are a guest's, since what it writes may come from text it read (a recalled guest
    # message): no directive, and only rows written at guest trust change. "operator" (the
    # default over stdio, a desktop user's own assistant): the model writes as the operator.
    trust: Literal["operator", "guest"] = "operator"
    # Every call works on owner_id, whatever the model asks (`--pin-owner`): a desktop
    # assistant of one user, whose model must not read or write another owner's memory.
    pinned: bool = False

    @property
    def writes(self) -> md.Trust.ValueType:
        """The Trust value of every write."""
        return md.TRUST_OPERATOR if self.trust == "operator" else md.TRUST_GUEST

    def demanded(self, scopes: tuple[str, ...]) -> tuple[str, ...]:
        """Which of a tool's scope arguments (owner, conversation) it must be given: those
        the server has no default for."""
        defaults = {"owner": self.owner_id, "conversation": self.conversation}
        return tuple(name for name in scopes if not defaults[name])
