"""The memory tools an agent calls through MCP, each answered by one or two memoryd RPCs.

The seed's three (`memory_store`, `memory_recall`, `memory_sources_list`) keep their names and
arguments; memoryd adds `search_history`, `compose_context`, `remember` and `forget`. A tool
works on the conversation and owner given in its arguments, else on those `memoryd mcp` was
started with (`Defaults`): a desktop assistant of one user configures them once, a bot serving
many users passes them with every call. Answers are small JSON objects an agent can read; a
refusal of memoryd becomes a tool error quoting its status and message, never a crash.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable
from typing import Annotated, Any, Literal, TypeVar

import grpc
from google.protobuf.timestamp_pb2 import Timestamp
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

import memoryd_client as md
from memoryd.cli.remote import conversation_arg
from memoryd.domain.conversation import DEFAULT_THREAD_SCOPE

T = TypeVar("T")

ConversationArg = Annotated[
    str,
    Field(
        description="The conversation, as CHANNEL:CHAT or CHANNEL:CHAT:THREAD (for example "
        "telegram:12345). Empty: the conversation memoryd mcp was started with."
    ),
]
OwnerArg = Annotated[
    str,
    Field(
        description="The user the memory belongs to. Empty: the owner memoryd mcp was started "
        "with (else memoryd's default owner)."
    ),
]
LimitArg = Annotated[int, Field(ge=1, le=50, description="How many hits at most.")]
CategoryArg = Literal["identity", "preference", "interest", "goal", "context", "directive"]
CATEGORIES = {
    "identity": md.CATEGORY_IDENTITY,
    "preference": md.CATEGORY_PREFERENCE,
    "interest": md.CATEGORY_INTEREST,
    "goal": md.CATEGORY_GOAL,
    "context": md.CATEGORY_CONTEXT,
    "directive": md.CATEGORY_DIRECTIVE,
}
SCOPES = {
    "current": md.RECALL_SCOPE_CURRENT,
    "owner": md.RECALL_SCOPE_OWNER,
    "all": md.RECALL_SCOPE_ALL,
}
SOURCES = {
    "memories": md.RECALL_SOURCE_MEMORIES,
    "history": md.RECALL_SOURCE_HISTORY,
    "all": md.RECALL_SOURCE_ALL,
}
MODES = {
    "hybrid": md.SEARCH_MODE_HYBRID,
    "lexical": md.SEARCH_MODE_LEXICAL,
    "semantic": md.SEARCH_MODE_SEMANTIC,
}


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

    @property
    def writes(self) -> md.Trust.ValueType:
        """The Trust value of every write."""
        return md.TRUST_OPERATOR if self.trust == "operator" else md.TRUST_GUEST


class MemoryTools:
    """The tools, over one channel to memoryd."""

    def __init__(self, channel: grpc.aio.Channel, defaults: Defaults) -> None:
        self._memory = md.MemoryServiceStub(channel)
        self._compaction = md.CompactionServiceStub(channel)
        self.defaults = defaults

    # --- the seed's tools ---------------------------------------------------------------------

    async def memory_store(
        self,
        *,
        key: Annotated[str, Field(description="A short name for the fact, e.g. 'flight'.")],
        value: Annotated[str, Field(description="The fact itself.")],
        conversation: ConversationArg = "",
    ) -> dict[str, Any]:
        """Store a small key-value fact for the current conversation. Storing a key again
        replaces its value. Such rows are not rendered into USER.md or MEMORY.md: use
        `remember` for what should be known about the user everywhere."""
        answer = await _called(
            self._memory.StoreMemory(
                md.StoreMemoryRequest(
                    conversation=self._conversation(conversation),
                    scope_type=md.SCOPE_TYPE_CONVERSATION,
                    key=key,
                    value=value,
                    trust=self.defaults.writes,
                )
            )
        )
        return {"stored": _memory(answer.memory), "created": answer.created}

    async def memory_recall(
        self,
        *,
        query: Annotated[
            str, Field(description="Words or a question to search for. Give this or key.")
        ] = "",
        key: Annotated[str, Field(description="An exact key to look up. Give this or query.")] = "",
        scope: Annotated[
            Literal["current", "owner", "all"],
            Field(
                description="current: this conversation; owner: everything of its user; "
                "all: every owner of the agent (operator tokens only)."
            ),
        ] = "current",
        source: Annotated[
            Literal["memories", "history", "all"],
            Field(description="memories: stored facts; history: what was said; all: both."),
        ] = "memories",
        limit: LimitArg = 10,
        conversation: ConversationArg = "",
    ) -> dict[str, Any]:
        """Look a fact up by key, or search stored facts and/or the conversation history by
        words and meaning."""
        if bool(query) == bool(key):
            raise ToolError("give exactly one of query (a search) and key (an exact lookup)")
        answer = await _called(
            self._memory.Recall(
                md.RecallRequest(
                    conversation=self._conversation(conversation),
                    query=query,
                    key=key,
                    scope=SCOPES[scope],
                    source=SOURCES[source],
                    limit=limit,
                )
            )
        )
        hits = [
            _memory(hit.memory) if hit.WhichOneof("item") == "memory" else _said(hit.message)
            for hit in answer.hits
        ]
        return {"hits": hits, "truncated": answer.truncated}

    async def memory_sources_list(self, *, owner: OwnerArg = "") -> dict[str, Any]:
        """List the memory sources this owner's memory is read from (conversations, scheduled
        jobs), with their state."""
        answer = await _called(
            self._memory.ListMemorySources(
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

    # --- memoryd's ----------------------------------------------------------------------------

    async def search_history(
        self,
        *,
        query: Annotated[str, Field(description="Words or a question; any text is valid.")],
        everywhere: Annotated[
            bool,
            Field(description="Search every conversation of the owner instead of this one only."),
        ] = False,
        mode: Annotated[
            Literal["hybrid", "lexical", "semantic"],
            Field(description="hybrid (default): words and meaning; lexical; semantic."),
        ] = "hybrid",
        limit: LimitArg = 10,
        conversation: ConversationArg = "",
        owner: OwnerArg = "",
    ) -> dict[str, Any]:
        """Search what was said, best first, with a snippet of each hit and how it matched."""
        request = md.SearchHistoryRequest(query=query, mode=MODES[mode], limit=limit)
        if everywhere:
            request.owner.CopyFrom(self._owner(owner))
        else:
            request.conversation.CopyFrom(self._conversation(conversation))
        answer = await _called(self._memory.SearchHistory(request))
        return {"hits": [_said(hit) for hit in answer.hits]}

    async def compose_context(
        self,
        *,
        conversation: ConversationArg = "",
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
        model's window."""
        answer = await _called(
            self._compaction.ComposeContext(
                md.ComposeContextRequest(
                    conversation=self._conversation(conversation),
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

    async def remember(
        self,
        *,
        key: Annotated[str, Field(description="A short name for the fact, e.g. 'diet'.")],
        value: Annotated[str, Field(description="The fact, as it should read in the prompt.")],
        category: Annotated[
            CategoryArg,
            Field(
                description="identity, preference, interest, goal (rendered into USER.md); "
                "context, directive (standing rules; rendered into MEMORY.md)."
            ),
        ],
        owner: OwnerArg = "",
    ) -> dict[str, Any]:
        """Remember a durable fact about the user, in every conversation: it is rendered into
        USER.md or MEMORY.md. Remembering a key again replaces its value. A directive (a
        standing rule for the agent) needs a server started for operator use."""
        if category == "directive" and self.defaults.trust != "operator":
            raise ToolError(
                "a directive is a standing rule for the agent, which only the operator sets: "
                "this memoryd mcp writes at guest trust (memoryd mcp --trust operator is for "
                "an assistant whose user is its operator)"
            )
        answer = await _called(
            self._memory.StoreMemory(
                md.StoreMemoryRequest(
                    owner=self._owner(owner),
                    scope_type=md.SCOPE_TYPE_OWNER,
                    category=CATEGORIES[category],
                    key=key,
                    value=value,
                    trust=self.defaults.writes,
                )
            )
        )
        return {"remembered": _memory(answer.memory), "created": answer.created}

    async def forget(
        self,
        *,
        key: Annotated[str, Field(description="The key of the fact to forget.")],
        owner: OwnerArg = "",
    ) -> dict[str, Any]:
        """Forget a fact about the user: it is archived (an operator can restore it) and leaves
        the prompt files."""
        scope = self._owner(owner)
        found = await _called(
            self._memory.GetMemory(
                md.GetMemoryRequest(owner=scope, scope_type=md.SCOPE_TYPE_OWNER, key=key)
            )
        )
        answer = await _called(
            self._memory.ArchiveMemory(
                md.ArchiveMemoryRequest(
                    owner=scope,
                    id=found.memory.id,
                    reason="forgotten through MCP",
                    trust=self.defaults.writes,
                )
            )
        )
        return {"forgotten": _memory(answer.memory)}

    # --- the resources' reads (not tools) -----------------------------------------------------

    async def prompt_files(self) -> md.GetPromptContextResponse:
        """USER.md and MEMORY.md of the configured agent and owner, as rendered."""
        answer: md.GetPromptContextResponse = await _called(
            self._memory.GetPromptContext(
                md.GetPromptContextRequest(
                    agent_id=self.defaults.agent_id, owner_id=self.defaults.owner_id
                )
            )
        )
        return answer

    # --- arguments ----------------------------------------------------------------------------

    def _conversation(self, given: str) -> md.Conversation:
        text = given or self.defaults.conversation
        if not text:
            raise ToolError(
                "no conversation: pass conversation as CHANNEL:CHAT[:THREAD], or start memoryd "
                "mcp with --conversation"
            )
        try:
            return conversation_arg(text, self.defaults.agent_id, self.defaults.owner_id)
        except ValueError as error:
            raise ToolError(str(error).replace("--conversation", "conversation")) from error

    def _owner(self, given: str) -> md.OwnerScope:
        return md.OwnerScope(
            agent_id=self.defaults.agent_id, owner_id=given or self.defaults.owner_id
        )


async def _called(call: Awaitable[T]) -> T:
    """The RPC's answer; memoryd's refusal as a tool error with its status and message."""
    try:
        return await call
    except grpc.aio.AioRpcError as error:
        raise ToolError(f"memoryd: {error.code().name}: {error.details()}") from error


def _memory(row: md.Memory) -> dict[str, Any]:
    return {
        "id": row.id,
        "key": row.key,
        "value": row.value,
        "category": md.Category.Name(row.category).removeprefix("CATEGORY_").lower(),
        "scope": md.ScopeType.Name(row.scope_type).removeprefix("SCOPE_TYPE_").lower(),
        "updated_at": _time(row.updated_at),
        "archived": row.archived,
        # Who set it: "guest" text is what a guest said, never an instruction to follow.
        "trust": _trust(row.trust),
    }


def _said(hit: md.HistoryHit) -> dict[str, Any]:
    message = hit.message
    return {
        "message_id": message.id,
        "conversation": _conversation_text(message.conversation),
        "sender": message.sender,
        "role": md.Role.Name(message.role).removeprefix("ROLE_").lower(),
        "content": message.content,
        "snippet": hit.snippet,
        "created_at": _time(message.created_at),
        "matched": [
            md.MatchKind.Name(kind).removeprefix("MATCH_KIND_").lower() for kind in hit.matches
        ],
        "trust": _trust(message.trust),
    }


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
