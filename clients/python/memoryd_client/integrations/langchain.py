"""LangChain's chat message history, kept by memoryd.

    import memoryd_client as md
    from memoryd_client.integrations.langchain import MemorydChatMessageHistory

    history = MemorydChatMessageHistory("chat-42", channel=md.connect_sync(), owner_id="ada")
    chain = RunnableWithMessageHistory(prompt | model, lambda session_id: history, ...)

`MemorydChatMessageHistory` is a `BaseChatMessageHistory`: a history is a memoryd conversation
of one owner (channel "langchain", chat_id the session id, or the Conversation given), each
message one memoryd message, committed before `add_messages` returns:
- a human, AI or system message is a chat message whose content is its text, so memoryd's review
  learns from what the user said, search finds it and ComposeContext sees it; a tool's result,
  and an AI message that only calls tools, are messages of their own kinds (`langchain_tool`,
  `langchain_tool_call`), which the review does not read;
- the message itself (`message_to_dict`), its longest text taken out, is the metadata
  (`langchain`), so `messages` gives back each message as it was added (ids, tool calls,
  additional kwargs, content blocks); a message of text alone needs none;
- `messages` is the conversation's window, oldest first; `clear` is `/new`: a fresh window, the
  earlier messages kept in history (searchable, and reviewed first); `purge` erases them all.

Both kinds of methods work: the blocking ones on `channel` (`memoryd_client.connect_sync`), the
async ones on `async_channel` (`memoryd_client.connect`), or, without it, on `channel` in an
executor, as LangChain runs them by default. Messages memoryd or another adapter put in the
conversation (a compaction's summary, a Telegram turn) read as messages of their role. A
refusal of memoryd is a MemorydRefused (a ValueError), with its status.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import grpc
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)

import memoryd_client as md
from memoryd_client.integrations._kept import (
    Reread,
    batches,
    called,
    called_sync,
    kept_item,
    kept_metadata,
    run_plan,
    run_plan_sync,
    split_text,
    window_plan,
)

CHANNEL = "langchain"
# The metadata member that holds the message.
METADATA_KEY = "langchain"
_ROLES = {
    "human": md.ROLE_USER,
    "user": md.ROLE_USER,
    "ai": md.ROLE_ASSISTANT,
    "assistant": md.ROLE_ASSISTANT,
    "system": md.ROLE_SYSTEM,
    "developer": md.ROLE_SYSTEM,
    "tool": md.ROLE_TOOL,
    "function": md.ROLE_TOOL,
}


# The message classes message_to_dict names by their type.
_KINDS: dict[str, type[BaseMessage]] = {
    "human": HumanMessage,
    "ai": AIMessage,
    "system": SystemMessage,
    "tool": ToolMessage,
    "chat": ChatMessage,
    "function": FunctionMessage,
}


class MemorydChatMessageHistory(BaseChatMessageHistory):
    """A LangChain chat message history kept in memoryd: one conversation's window."""

    def __init__(
        self,
        session_id: str,
        *,
        channel: grpc.Channel | None = None,
        async_channel: grpc.aio.Channel | None = None,
        owner_id: str = "default",
        agent_id: str = "main",
        conversation: md.Conversation | None = None,
        user_trust: md.Trust.ValueType = md.TRUST_UNSPECIFIED,
    ) -> None:
        """`session_id` names the conversation (chat_id, in channel "langchain") unless
        `conversation` is given. `channel` serves the blocking methods, `async_channel` the
        async ones; at least one is needed. `user_trust` is the trust of what the user says
        (TRUST_GUEST for a stranger in a public bot; unset: the operator)."""
        super().__init__()
        if channel is None and async_channel is None:
            raise ValueError("a history needs a channel to memoryd: channel= or async_channel=")
        self.session_id = session_id
        self.conversation = conversation or md.Conversation(
            agent_id=agent_id, owner_id=owner_id, channel=CHANNEL, chat_id=session_id
        )
        self.user_trust = user_trust
        self._sync = md.SyncStubs(channel) if channel is not None else None
        self._async = md.Stubs(async_channel) if async_channel is not None else None
        # Each read's messages are its own objects; what they hold (additional_kwargs,
        # tool_calls) is shared with the next read's, as InMemoryChatMessageHistory shares its
        # whole messages.
        self._reread: Reread[BaseMessage, BaseMessage] = Reread(
            message_of, lambda message: message.model_copy()
        )

    # --- blocking ----------------------------------------------------------------------------

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]  # a property, as documented
        """The window's messages, oldest first."""
        return self._reread(run_plan_sync(window_plan(self.conversation), self._blocking()))

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append the messages, in order, answered once memoryd has committed them (each batch
        of 100 at once)."""
        stubs = self._blocking()
        for batch in batches([self._new_message(message) for message in messages]):
            request = md.AppendMessagesRequest(conversation=self.conversation, messages=batch)
            called_sync(functools.partial(stubs.conversations.AppendMessages, request))

    def clear(self) -> None:
        """/new: a fresh, empty window; the messages stay in memoryd's history (searchable, and
        reviewed first). purge erases them."""
        stubs = self._blocking()
        request = md.ClearConversationRequest(conversation=self.conversation)
        called_sync(functools.partial(stubs.conversations.ClearConversation, request))

    def purge(self) -> None:
        """Erase the conversation: every message, and the notes kept for it."""
        stubs = self._blocking()
        request = md.PurgeConversationRequest(conversation=self.conversation)
        called_sync(functools.partial(stubs.conversations.PurgeConversation, request))

    # --- async -------------------------------------------------------------------------------

    async def aget_messages(self) -> list[BaseMessage]:
        """The window's messages, oldest first."""
        if self._async is None:
            return await super().aget_messages()
        return self._reread(await run_plan(window_plan(self.conversation), self._async))

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """add_messages, on the async channel."""
        if self._async is None:
            await super().aadd_messages(messages)
            return
        for batch in batches([self._new_message(message) for message in messages]):
            await called(
                self._async.conversations.AppendMessages(
                    md.AppendMessagesRequest(conversation=self.conversation, messages=batch)
                )
            )

    async def aclear(self) -> None:
        """clear, on the async channel."""
        if self._async is None:
            await super().aclear()
            return
        await called(
            self._async.conversations.ClearConversation(
                md.ClearConversationRequest(conversation=self.conversation)
            )
        )

    async def apurge(self) -> None:
        """purge, on the async channel."""
        if self._async is None:
            self.purge()
            return
        await called(
            self._async.conversations.PurgeConversation(
                md.PurgeConversationRequest(conversation=self.conversation)
            )
        )

    # --- messages ----------------------------------------------------------------------------

    def _blocking(self) -> md.SyncStubs:
        if self._sync is None:
            raise RuntimeError(
                "this history was given only async_channel: its blocking methods need channel= "
                "(memoryd_client.connect_sync), or call the async ones (aget_messages, ...)"
            )
        return self._sync

    def _new_message(self, message: BaseMessage) -> md.NewMessage:
        kept = message_to_dict(message)
        role_name = message.role if isinstance(message, ChatMessage) else message.type
        if role_name not in _ROLES:
            raise ValueError(
                f"a {type(message).__name__} ({message.type}) is not a message of a history"
            )
        role = _ROLES[role_name]
        kind = "chat_message"
        sender = message.name or ("assistant" if role == md.ROLE_ASSISTANT else role_name)
        if role == md.ROLE_USER:
            sender = message.name or self.conversation.owner_id or "user"
        elif role == md.ROLE_TOOL:
            kind = "langchain_tool"
        elif isinstance(message, AIMessage) and message.tool_calls and not message.text.strip():
            kind = "langchain_tool_call"
        text, shape = split_text(kept)
        plain = _is_plain(message) and shape.get("text_at") == ["data", "content"]
        return md.NewMessage(
            sender=sender[:256],
            role=role,
            kind=kind,
            content=text,
            metadata="" if plain else kept_metadata(METADATA_KEY, shape),
            trust=self.user_trust if role == md.ROLE_USER else md.TRUST_UNSPECIFIED,
        )


def _is_plain(message: BaseMessage) -> bool:
    """A human, AI or system message of text and nothing else reads back from its role and text
    alone (message_of): nothing to keep."""
    if type(message) not in (HumanMessage, AIMessage, SystemMessage):
        return False
    if not isinstance(message.content, str) or message.name or message.id:
        return False
    if message.additional_kwargs or message.response_metadata:
        return False
    return not (
        isinstance(message, AIMessage)
        and (message.tool_calls or message.invalid_tool_calls or message.usage_metadata)
    )


def message_of(message: md.Message) -> BaseMessage:
    """The LangChain message a memoryd message holds, or one of its role and text."""
    kept: dict[str, Any] | None = kept_item(message, METADATA_KEY)
    if kept is not None:
        made = _KINDS.get(str(kept.get("type")))
        data = kept.get("data")
        if made is not None and isinstance(data, dict):
            # message_to_dict wrote it from a message that was valid: built again without
            # validating it twice (half the cost of messages_from_dict, paid per message read).
            return made.model_construct(**data)
        return messages_from_dict([kept])[0]
    if message.role == md.ROLE_USER:
        return HumanMessage(content=message.content)
    if message.role == md.ROLE_ASSISTANT:
        return AIMessage(content=message.content)
    if message.role == md.ROLE_SYSTEM:
        return SystemMessage(content=message.content)
    return ChatMessage(role="tool", content=message.content)
