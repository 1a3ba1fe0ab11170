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

from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

import memoryd_client as md
from memoryd.domain.memories import MAX_KEY_CHARS, MAX_VALUE_CHARS
from memoryd.domain.recall import MAX_LIMIT
from memoryd.mcp_bridge import answers
from memoryd.mcp_bridge.scopes import ToolScope, called
from memoryd.mcp_bridge.vocabulary import (
    CATEGORIES,
    MAX_CONVERSATION_CHARS,
    Category,
    ConversationArg,
    LimitArg,
    OwnerArg,
    QueryArg,
)

T = TypeVar("T")


class MemoryTools(ToolScope):
    """The tools of what is known: facts and notes, stored, recalled, listed and forgotten."""

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
            key=key or answers.key_of(category, fact),
            value=fact,
            trust=self.defaults.writes,
        )
        if conversation or (self.defaults.conversation and not owner):
            request.conversation.CopyFrom(self._conversation(conversation, owner))
        else:
            request.owner.CopyFrom(self._owner(owner))
        answer = await called(self._api.memory.StoreMemory(request))
        return {"remembered": answers.memory(answer.memory), "created": answer.created}

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
        answer = await called(
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
        return {"noted": answers.memory(answer.memory), "created": answer.created}

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
        answer = await called(
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
        hits = [answers.memory(hit.memory) | answers.relevance(hit) for hit in answer.hits]
        return (
            {"hits": hits}
            | answers.left_out(answer.below_floor)
            | answers.unseen(answer.unembedded)
        )

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
        answer = await called(self._api.memory.ListMemories(request))
        return {
            "memories": [answers.memory(item.memory) for item in answer.memories],
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
        answer = await called(
            self._api.memory.ArchiveMemory(
                md.ArchiveMemoryRequest(
                    owner=scope,
                    id=id,
                    reason="forgotten through MCP",
                    trust=self.defaults.writes,
                )
            )
        )
        return {"forgotten": answers.memory(answer.memory)}

    async def memory_sources_list(self, *, owner: OwnerArg = "") -> dict[str, Any]:
        """List the memory sources the owner's memory is read from (conversations, scheduled
        jobs), with their state."""
        answer = await called(
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

    async def _id_of(self, scope: md.OwnerScope, key: str) -> int:
        """The id of the owner's active row of `key` (in any scope)."""
        listed = await called(
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
