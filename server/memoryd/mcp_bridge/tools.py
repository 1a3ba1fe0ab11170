"""The memory tools an agent calls through MCP, each answered by one or two memoryd RPCs.

One scope model, memoryd's own: an `owner` (the user the memory belongs to) of this server's
agent, and a `conversation` (CHANNEL:CHAT[:THREAD], as the adapter stores it) of that owner.
Every tool that reads or writes takes both (those that need them); an argument given wins,
else the one `memoryd mcp` was started with (`--owner`, `--conversation`); with neither, a
tool that needs it refuses (memoryd.mcp_bridge.arguments requires it in the schema too).

- `remember`: a durable fact about the user or their work, in USER.md or MEMORY.md;
  `note`: a detail of this conversation only, in no prompt file;
- `recall`: search what is known (facts and notes), `search_history`: what was said,
  `list_memories`: everything known about the user, with ids;
- `forget`: archive a fact by id or key (an operator can restore it);
- `record_turn`: what was said, so that memoryd learns from it (the review) and can search it;
- `compose_context`: what the next model call gets; `memory_sources_list`.

Every fact and message returned says its trust, and every search hit its scores and how it
matched; a search whose hits found by meaning alone were too far from the query says how many
it left out, and returns nothing rather than padding. Writes carry the server's `--trust`
(memoryd.cli.mcp_command). Answers are small JSON objects; a refusal of memoryd becomes a tool
error quoting its status and message.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Awaitable
from typing import Annotated, Any, Literal, TypeVar

import grpc
from google.protobuf.timestamp_pb2 import Timestamp
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, ConfigDict, Field

import memoryd_client as md
from memoryd.domain.conversation import (
    DEFAULT_THREAD_SCOPE,
    MAX_IDENTIFIER_CHARS,
    split_conversation_text,
)
from memoryd.domain.memories import MAX_KEY_CHARS, MAX_VALUE_CHARS
from memoryd.domain.messages import MAX_SENDER_CHARS
from memoryd.domain.recall import MAX_LIMIT
from memoryd.domain.search_query import MAX_QUERY_CHARS
from memoryd.errors import InvalidArgument

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


class MemoryTools:
    """The tools, over one channel to memoryd."""

    def __init__(self, channel: grpc.aio.Channel, defaults: Defaults) -> None:
        self._api = md.Stubs(channel)
        self.defaults = defaults

    # --- what is known ----------------------------------------------------------------------------

    async def remember(
        self,
        *,
        fact: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_VALUE_CHARS,
                description="The fact, as it should read in the prompt, e.g. 'Is vegetarian'.",
            ),
        ],
        category: Annotated[
            Category,
            Field(
                description="About the user: identity, preference, interest, goal (USER.md). "
                "About their work: context; directive, a standing rule for you (MEMORY.md)."
            ),
        ],
        key: Annotated[
            str,
            Field(
                max_length=MAX_KEY_CHARS,
                description="A short stable name, e.g. 'diet': remembering the same key again "
                "replaces the fact. Empty: a key made from the fact.",
            ),
        ] = "",
        owner: OwnerArg = "",
        conversation: Annotated[
            str,
            Field(
                max_length=MAX_CONVERSATION_CHARS,
                description="The conversation it was learnt in (kept as its source), "
                "CHANNEL:CHAT[:THREAD]. Optional.",
            ),
        ] = "",
    ) -> dict[str, Any]:
        """Remember a durable fact about the user or their work: it reaches every
        conversation of this owner (rendered into USER.md or MEMORY.md). Use it for what stays
        true (a name, a diet, a goal); use note for details of this conversation only. A
        directive needs a server started for operator use."""
        if category == "directive" and self.defaults.trust != "operator":
            raise ToolError(
                "a directive is a standing rule for the agent, which only the operator sets: "
                "this memoryd mcp writes at guest trust (memoryd mcp --trust operator is for "
                "an assistant whose user is its operator)"
            )
        request = md.StoreMemoryRequest(
            category=CATEGORIES[category],
            key=key or _key_of(category, fact),
            value=fact,
            trust=self.defaults.writes,
        )
        if conversation or (self.defaults.conversation and not owner):
            request.conversation.CopyFrom(self._conversation(conversation, owner))
        else:
            request.owner.CopyFrom(self._owner(owner))
        answer = await _called(self._api.memory.StoreMemory(request))
        return {"remembered": _memory(answer.memory), "created": answer.created}

    async def note(
        self,
        *,
        text: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_VALUE_CHARS,
                description="The note, e.g. 'Flight LH 123 on Monday'.",
            ),
        ],
        key: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_KEY_CHARS,
                description="A short name for it, e.g. 'flight': a note of the same key "
                "replaces it.",
            ),
        ],
        conversation: ConversationArg = "",
        owner: OwnerArg = "",
    ) -> dict[str, Any]:
        """Keep a note for this conversation only (a booking number, today's plan): recall
        finds it in this conversation; it is not part of the user's profile."""
        answer = await _called(
            self._api.memory.StoreMemory(
                md.StoreMemoryRequest(
                    conversation=self._conversation(conversation, owner),
                    scope_type=md.SCOPE_TYPE_CONVERSATION,
                    key=key,
                    value=text,
                    trust=self.defaults.writes,
                )
            )
        )
        return {"noted": _memory(answer.memory), "created": answer.created}

    async def recall(
        self,
        *,
        query: QueryArg,
        scope: Annotated[
            Literal["owner", "conversation"],
            Field(
                description="owner (the default): everything known about the owner, facts and "
                "the notes of every conversation; conversation: this conversation's notes only."
            ),
        ] = "owner",
        limit: LimitArg = 10,
        owner: OwnerArg = "",
        conversation: ConversationArg = "",
    ) -> dict[str, Any]:
        """Search what is known about the owner (remembered facts and notes) by words and
        meaning, best first, each hit with its relevance (0 to 1) and how it matched. No hits
        means nothing known matches: say so rather than guess."""
        answer = await _called(
            self._api.memory.Recall(
                md.RecallRequest(
                    conversation=self._conversation(conversation, owner),
                    query=query,
                    scope=md.RECALL_SCOPE_ALL if scope == "owner" else md.RECALL_SCOPE_CURRENT,
                    source=md.RECALL_SOURCE_MEMORIES,
                    limit=limit,
                )
            )
        )
        hits = [_memory(hit.memory) | _relevance(hit) for hit in answer.hits]
        return {"hits": hits} | _left_out(answer.below_floor) | _unseen(answer.unembedded)

    async def list_memories(
        self,
        *,
        category: Annotated[
            Category | None,
            Field(description="Only facts of this category. Empty: every fact and note."),
        ] = None,
        limit: Annotated[
            int, Field(ge=1, le=MAX_LIMIT, description="How many at most, newest first.")
        ] = 50,
        owner: OwnerArg = "",
    ) -> dict[str, Any]:
        """List everything known about the owner, newest first, with the id of each (for
        forget)."""
        request = md.ListMemoriesRequest(owner=self._owner(owner), page_size=limit)
        if category is not None:
            request.categories.append(CATEGORIES[category])
        answer = await _called(self._api.memory.ListMemories(request))
        return {
            "memories": [_memory(item.memory) for item in answer.memories],
            "more": bool(answer.next_page_token),
        }

    async def forget(
        self,
        *,
        id: Annotated[
            int, Field(ge=0, description="The id of the fact or note (from recall or list).")
        ] = 0,
        key: Annotated[
            str, Field(max_length=MAX_KEY_CHARS, description="Or its key, when there is no id.")
        ] = "",
        owner: OwnerArg = "",
    ) -> dict[str, Any]:
        """Forget a fact or note when the user asks you to: it is archived (an operator can
        restore it) and leaves the prompt. Give its id, or its key."""
        scope = self._owner(owner)
        if bool(id) == bool(key):
            raise ToolError("give exactly one of id and key")
        if not id:
            id = await self._id_of(scope, key)
        answer = await _called(
            self._api.memory.ArchiveMemory(
                md.ArchiveMemoryRequest(
                    owner=scope,
                    id=id,
                    reason="forgotten through MCP",
                    trust=self.defaults.writes,
                )
            )
        )
        return {"forgotten": _memory(answer.memory)}

    async def memory_sources_list(self, *, owner: OwnerArg = "") -> dict[str, Any]:
        """List the memory sources the owner's memory is read from (conversations, scheduled
        jobs), with their state."""
        answer = await _called(
            self._api.memory.ListMemorySources(
                md.ListMemorySourcesRequest(owner=self._owner(owner), page_size=100)
            )
        )
        return {
            "sources": [
                {
                    "id": source.id,
                    "name": source.name,
                    "description": source.description,
                    "type": md.SourceType.Name(source.type).removeprefix("SOURCE_TYPE_").lower(),
                    "state": md.SourceState.Name(source.state)
                    .removeprefix("SOURCE_STATE_")
                    .lower(),
                    "scope": source.memory_scope,
                }
                for source in answer.sources
            ],
            "more": bool(answer.next_page_token),
        }

    # --- what was said ----------------------------------------------------------------------------

    async def record_turn(
        self,
        *,
        messages: Annotated[
            list[Said],
            Field(
                min_length=1,
                max_length=MAX_TURN_MESSAGES,
                description="The turn's messages, oldest first: the user's, then yours.",
            ),
        ],
        conversation: ConversationArg = "",
        owner: OwnerArg = "",
    ) -> dict[str, Any]:
        """Record what was said in a turn (the user's message and your answer), so that
        memoryd learns durable facts from it in the background (they then reach USER.md) and
        can search it later. Call it once a turn; a message recorded again with the same id is
        stored once."""
        key = self._conversation(conversation, owner)
        request = md.CommitTurnRequest(conversation=key, trust=self.defaults.writes)
        for said in messages:
            sender = said.sender or (
                (key.owner_id or "user") if said.role == "user" else "assistant"
            )
            request.messages.add(
                role=ROLES[said.role],
                sender=sender,
                content=said.text,
                client_message_id=said.id,
            )
        answer = await _called(self._api.conversations.CommitTurn(request))
        return {
            "recorded": [
                {
                    "id": result.id,
                    "outcome": md.AppendOutcome.Name(result.outcome)
                    .removeprefix("APPEND_OUTCOME_")
                    .lower(),
                }
                for result in answer.results
            ],
            "review_pending": answer.review_pending,
        }

    async def search_history(
        self,
        *,
        query: QueryArg,
        everywhere: Annotated[
            bool,
            Field(description="Search every conversation of the owner instead of this one."),
        ] = False,
        mode: Annotated[
            Literal["hybrid", "lexical", "semantic"],
            Field(description="hybrid (default): words and meaning; lexical; semantic."),
        ] = "hybrid",
        limit: LimitArg = 10,
        conversation: ConversationArg = "",
        owner: OwnerArg = "",
    ) -> dict[str, Any]:
        """Search what was said, best first, with a snippet of each hit, its relevance (0 to 1)
        and how it matched. No hits means nothing said matches."""
        request = md.SearchHistoryRequest(query=query, mode=MODES[mode], limit=limit)
        if everywhere:
            request.owner.CopyFrom(self._owner(owner))
        else:
            request.conversation.CopyFrom(self._conversation(conversation, owner))
        answer = await _called(self._api.conversations.SearchHistory(request))
        hits = [_said(hit) for hit in answer.hits]
        return {"hits": hits} | _left_out(answer.below_floor) | _unseen(answer.unembedded)

    async def compose_context(
        self,
        *,
        conversation: ConversationArg = "",
        owner: OwnerArg = "",
        context_window: Annotated[
            int,
            Field(
                ge=0,
                description="The model's context window in tokens. 0: what memoryd knows (the "
                "last CommitTurn's, or its model provider's), else memoryd mcp's --context-window.",
            ),
        ] = 0,
    ) -> dict[str, Any]:
        """The context memoryd would give the next model call of a conversation: the prompt
        files, recalled facts, checkpoint summaries and the recent messages, within the
        model's window (the memory alone in a conversation where nothing was said yet)."""
        answer = await _called(
            self._api.context.ComposeContext(
                md.ComposeContextRequest(
                    conversation=self._conversation(conversation, owner),
                    context_window=context_window or self.defaults.context_window,
                )
            )
        )
        return {
            "parts": [
                {
                    "kind": md.ContextPartKind.Name(part.kind)
                    .removeprefix("CONTEXT_PART_KIND_")
                    .lower(),
                    "role": md.Role.Name(part.role).removeprefix("ROLE_").lower(),
                    "content": part.content,
                    "tokens": part.tokens,
                }
                for part in answer.parts
            ],
            "total_tokens": answer.total_tokens,
            "limit_tokens": answer.limit_tokens,
            "omitted_messages": answer.omitted_messages,
        }

    # --- the resources' reads (not tools) -----------------------------------------------------

    async def prompt_files(self) -> md.GetPromptContextResponse:
        """USER.md and MEMORY.md of the configured agent and owner, as rendered."""
        answer: md.GetPromptContextResponse = await _called(
            self._api.context.GetPromptContext(
                md.GetPromptContextRequest(
                    agent_id=self.defaults.agent_id, owner_id=self.defaults.owner_id
                )
            )
        )
        return answer

    # --- arguments ----------------------------------------------------------------------------

    def _conversation(self, given: str, owner: str) -> md.Conversation:
        text = given or self.defaults.conversation
        if not text:
            raise ToolError(
                "conversation is required: CHANNEL:CHAT[:THREAD] (or start memoryd mcp with "
                "--conversation)"
            )
        try:
            channel, chat_id, thread_scope = split_conversation_text(text, "conversation")
        except InvalidArgument as error:
            raise ToolError(error.message) from error
        return md.Conversation(
            agent_id=self.defaults.agent_id,
            owner_id=self._owner_id(owner),
            channel=channel,
            chat_id=chat_id,
            thread_scope=thread_scope,
        )

    def _owner(self, given: str) -> md.OwnerScope:
        owner = self._owner_id(given)
        if not owner:
            raise ToolError("owner is required: the user the memory belongs to")
        return md.OwnerScope(agent_id=self.defaults.agent_id, owner_id=owner)

    def _owner_id(self, given: str) -> str:
        """The owner a call works on: the one given, else the default; only the pinned one
        when the server is pinned (another is refused, never quietly replaced)."""
        pinned = self.defaults.owner_id
        if self.defaults.pinned and given and given != pinned:
            raise ToolError(f"this memory serves the owner {pinned!r} only")
        return given or pinned

    async def _id_of(self, scope: md.OwnerScope, key: str) -> int:
        """The id of the owner's active row of `key` (in any scope)."""
        listed = await _called(
            self._api.memory.ListMemories(
                md.ListMemoriesRequest(owner=scope, key_prefix=key, page_size=MAX_LIMIT)
            )
        )
        found = [item.memory for item in listed.memories if item.memory.key == key]
        if not found:
            raise ToolError(f"nothing of the owner is remembered under the key {key!r}")
        if len(found) > 1:
            ids = ", ".join(str(row.id) for row in found)
            raise ToolError(f"several rows have the key {key!r} (ids {ids}): give the id")
        return found[0].id


async def _called(call: Awaitable[T]) -> T:
    """The RPC's answer; memoryd's refusal as a tool error with its status and message."""
    try:
        return await call
    except grpc.aio.AioRpcError as error:
        raise ToolError(f"memoryd: {error.code().name}: {error.details()}") from error


def _key_of(category: str, fact: str) -> str:
    """A key for a fact remembered without one: the same fact, the same key."""
    return f"{category}_{hashlib.sha256(fact.strip().lower().encode()).hexdigest()[:12]}"


def _memory(row: md.Memory) -> dict[str, Any]:
    return {
        "id": row.id,
        "owner": row.owner_id,
        "key": row.key,
        "value": row.value,
        "category": md.Category.Name(row.category).removeprefix("CATEGORY_").lower(),
        "scope": md.ScopeType.Name(row.scope_type).removeprefix("SCOPE_TYPE_").lower(),
        "updated_at": _time(row.updated_at),
        "archived": row.archived,
        # Who set it: "guest" text is what a guest said, never an instruction to follow.
        "trust": _trust(row.trust),
    }


def _relevance(hit: md.RecallHit | md.HistoryHit) -> dict[str, Any]:
    """How well a search hit matches and how: its relevance (0 to 1, every hit at least the
    server's floor), the share of the query's words it holds, the similarity of meaning, the
    fused score it was ordered by, and each way it matched."""
    return {
        "relevance": round(hit.scores.relevance, 3),
        "words_held": round(hit.scores.coverage, 3),
        "similarity": round(hit.scores.similarity, 4),
        "score": round(hit.scores.fused, 4),
        "matched": [
            md.MatchKind.Name(kind).removeprefix("MATCH_KIND_").lower() for kind in hit.matches
        ],
    }


def _left_out(below_floor: int) -> dict[str, Any]:
    """What a search says of the hits its relevance floor left out."""
    if not below_floor:
        return {}
    return {
        "left_out": below_floor,
        "left_out_why": "too weak a match to be an answer: few of the query's words, and too "
        "far from it in meaning",
    }


def _unseen(unembedded: int) -> dict[str, Any]:
    """What a search says of what its meaning ranking could not see yet."""
    if not unembedded:
        return {}
    return {
        "not_yet_searchable_by_meaning": unembedded,
        "not_yet_searchable_by_meaning_why": "no vector yet (still being embedded): found by "
        "their words only; ask again later for matches by meaning",
    }


def _said(hit: md.HistoryHit) -> dict[str, Any]:
    message = hit.message
    return {
        "message_id": message.id,
        "owner": message.conversation.owner_id,
        "conversation": _conversation_text(message.conversation),
        "sender": message.sender,
        "role": md.Role.Name(message.role).removeprefix("ROLE_").lower(),
        "content": message.content,
        "snippet": hit.snippet,
        "created_at": _time(message.created_at),
        "trust": _trust(message.trust),
    } | _relevance(hit)


def _trust(value: md.Trust.ValueType) -> str:
    """A Trust as the tools say it (unset is operator, as memoryd reads it)."""
    return "guest" if value == md.TRUST_GUEST else "operator"


def _conversation_text(key: md.Conversation) -> str:
    """CHANNEL:CHAT[:THREAD], as the tools take it (the thread root is CHANNEL:CHAT)."""
    parts = [key.channel, key.chat_id]
    if key.thread_scope not in ("", DEFAULT_THREAD_SCOPE):
        parts.append(key.thread_scope)
    return ":".join(parts)


def _time(stamp: Timestamp) -> str:
    return stamp.ToJsonString() if stamp.seconds or stamp.nanos else ""
