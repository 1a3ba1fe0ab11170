"""LlamaIndex's long-term memory, kept by memoryd: a memory block of `Memory`.

    import memoryd_client as md
    from llama_index.core.memory import Memory
    from memoryd_client.integrations.llama_index import MemorydMemoryBlock

    block = MemorydMemoryBlock(channel=md.connect_sync(), owner_id="ada")
    memory = Memory.from_defaults(session_id="chat-42", memory_blocks=[block])

`MemorydMemoryBlock` is a `BaseMemoryBlock[str]` of one owner:
- its content (`aget`), which `Memory` puts in the system message of each call, is what memoryd
  knows of the owner: the prompt files (USER.md, MEMORY.md: the facts memoryd's review learnt and
  the rows written to them) and the owner's facts and notes that match the latest user message
  (Recall), best first, each said once;
- what `Memory` flushes from its short-term queue (`aput`) is recorded in memoryd as the
  conversation (channel "llama-index", chat the session id), committed before it returns, so
  memoryd's review learns the user's durable facts from it, as LlamaIndex's own fact-extraction
  block would, and search finds it. Each message's text is the content; the message itself,
  its longest text taken out, the metadata (`llama_index`).

`atruncate` drops the matching facts first, then the prompt files. The block works on a blocking
channel (`memoryd_client.connect_sync`): `Memory` runs its blocks from whichever event loop
called it, the synchronous `get` and `put` on a loop of their own, so the calls go to a thread.
A refusal of memoryd is a MemorydRefused (a ValueError) with its status.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import grpc
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import Field
from llama_index.core.memory.memory import BaseMemoryBlock

import memoryd_client as md
from memoryd_client.integrations._kept import (
    batches,
    called_sync,
    kept_metadata,
    search_query,
    split_text,
)

CHANNEL = "llama-index"
# The metadata member that holds the message.
METADATA_KEY = "llama_index"
# The two sections of the content, separated so that atruncate can drop the second.
SECTIONS = "\n\n"
_ROLES = {
    "system": md.ROLE_SYSTEM,
    "developer": md.ROLE_SYSTEM,
    "user": md.ROLE_USER,
    "assistant": md.ROLE_ASSISTANT,
    "chatbot": md.ROLE_ASSISTANT,
    "model": md.ROLE_ASSISTANT,
    "function": md.ROLE_TOOL,
    "tool": md.ROLE_TOOL,
}


class MemorydMemoryBlock(BaseMemoryBlock[str]):
    """What memoryd knows of one owner, as a block of LlamaIndex's Memory; what Memory flushes
    from its short-term queue, recorded in memoryd for its review to learn from."""

    name: str = Field(default="memoryd", description="The name of the memory block.")
    channel: Any = Field(description="A blocking channel to memoryd (connect_sync).", exclude=True)
    owner_id: str = Field(default="default", description="The owner whose memory this is.")
    agent_id: str = Field(default="main", description="The agent the owner talks to.")
    chat_id: str | None = Field(
        default=None, description="The conversation flushed messages go to (default: the session)."
    )
    recall_limit: int = Field(default=10, description="How many matching facts, at most.")
    user_trust: int = Field(
        default=md.TRUST_UNSPECIFIED, description="The trust of what the user says."
    )

    def model_post_init(self, context: Any, /) -> None:  # noqa: ARG002 - pydantic's signature
        """Check the channel once, and keep its stubs."""
        if not isinstance(self.channel, grpc.Channel):
            raise TypeError("channel must be a blocking channel to memoryd (connect_sync)")
        self._stubs = md.SyncStubs(self.channel)

    @property
    def owner(self) -> md.OwnerScope:
        """The agent and owner of the block."""
        return md.OwnerScope(agent_id=self.agent_id, owner_id=self.owner_id)

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        said = block_kwargs.get("input")
        query = said.content if isinstance(said, ChatMessage) else said
        if not query:
            users = [m for m in messages or [] if m.role == "user" and (m.content or "").strip()]
            query = users[-1].content if users else ""
        return await asyncio.to_thread(self._known, str(query or ""))

    async def _aput(self, messages: list[ChatMessage]) -> None:
        if messages:
            await asyncio.to_thread(self._record, messages)

    async def atruncate(self, content: str, tokens_to_truncate: int) -> str | None:  # noqa: ARG002
        """The matching facts go first, then the prompt files (whatever the tokens asked)."""
        sections = content.split(SECTIONS + "Facts that match")
        return sections[0] if len(sections) > 1 else None

    # --- blocking ----------------------------------------------------------------------------

    def _known(self, query: str) -> str:
        request = md.GetPromptContextRequest(agent_id=self.agent_id, owner_id=self.owner_id)
        files = called_sync(functools.partial(self._stubs.context.GetPromptContext, request))
        known = [text.strip() for text in (files.user_md, files.memory_md) if text.strip()]
        shown = SECTIONS.join(known)
        if query.strip():
            recall = md.RecallRequest(
                owner=self.owner,
                query=search_query(query),
                scope=md.RECALL_SCOPE_ALL,
                source=md.RECALL_SOURCE_MEMORIES,
                limit=self.recall_limit,
            )
            found = called_sync(functools.partial(self._stubs.memory.Recall, recall))
            facts = [hit.memory.value for hit in found.hits if hit.memory.value not in shown]
            if facts:
                lines = "\n".join(f"- {fact}" for fact in dict.fromkeys(facts))
                known.append(f"Facts that match the user's last message:\n{lines}")
        return SECTIONS.join(known)

    def _record(self, messages: list[ChatMessage]) -> None:
        session = messages[0].additional_kwargs.get("session_id")
        conversation = md.Conversation(
            agent_id=self.agent_id,
            owner_id=self.owner_id,
            channel=CHANNEL,
            chat_id=self.chat_id or str(session or "default"),
        )
        for batch in batches([self._new_message(message) for message in messages]):
            request = md.AppendMessagesRequest(conversation=conversation, messages=batch)
            called_sync(functools.partial(self._stubs.conversations.AppendMessages, request))

    def _new_message(self, message: ChatMessage) -> md.NewMessage:
        role = _ROLES.get(str(message.role.value), md.ROLE_ASSISTANT)
        kept = message.model_dump(mode="json")
        kept["content"] = message.content or ""
        if not _has_non_text_blocks(message):
            kept.pop("blocks", None)  # its text is the content
        text, shape = split_text(kept)
        calls_tools = role == md.ROLE_ASSISTANT and message.additional_kwargs.get("tool_calls")
        kind = "chat_message"
        if role == md.ROLE_TOOL:
            kind = "llama_index_tool"
        elif calls_tools and not (message.content or "").strip():
            kind = "llama_index_tool_call"
        sender = {md.ROLE_USER: self.owner_id, md.ROLE_TOOL: "tool"}.get(
            role, str(message.role.value)
        )
        return md.NewMessage(
            sender=sender[:256] or "user",
            role=role,
            kind=kind,
            content=text,
            metadata=kept_metadata(METADATA_KEY, shape),
            trust=self.user_trust if role == md.ROLE_USER else md.TRUST_UNSPECIFIED,  # type: ignore[arg-type]
        )


def _has_non_text_blocks(message: ChatMessage) -> bool:
    return any(getattr(block, "block_type", "text") != "text" for block in message.blocks)
