"""The MCP tools of what was said: a turn recorded, history searched, and the context of the
next model call composed (memoryd.mcp_bridge.tools has the module's overview)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field

import memoryd_client as md
from memoryd.mcp_bridge import answers
from memoryd.mcp_bridge.scopes import ToolScope, called
from memoryd.mcp_bridge.vocabulary import (
    MAX_TURN_MESSAGES,
    MODES,
    ROLES,
    ConversationArg,
    LimitArg,
    OwnerArg,
    QueryArg,
    Said,
)

T = TypeVar("T")


class ConversationTools(ToolScope):
    """The tools of what was said, and the prompt files' reads (resources, not tools)."""

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
        answer = await called(self._api.conversations.CommitTurn(request))
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
        answer = await called(self._api.conversations.SearchHistory(request))
        hits = [answers.said(hit) for hit in answer.hits]
        return (
            {"hits": hits}
            | answers.left_out(answer.below_floor)
            | answers.unseen(answer.unembedded)
        )

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
        answer = await called(
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

    async def prompt_files(self) -> md.GetPromptContextResponse:
        """USER.md and MEMORY.md of the configured agent and owner, as rendered."""
        answer: md.GetPromptContextResponse = await called(
            self._api.context.GetPromptContext(
                md.GetPromptContextRequest(
                    agent_id=self.defaults.agent_id, owner_id=self.defaults.owner_id
                )
            )
        )
        return answer
