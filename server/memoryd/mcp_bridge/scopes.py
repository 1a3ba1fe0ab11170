"""What every MCP tool shares: the channel's stubs, the server's defaults, and how a tool call's
owner and conversation are read (the defaults fill in; a pinned owner is the only one)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

import grpc
from mcp.server.mcpserver.exceptions import ToolError

import memoryd_client as md
from memoryd.domain.conversation import split_conversation_text
from memoryd.errors import InvalidArgument
from memoryd.mcp_bridge.vocabulary import Defaults

T = TypeVar("T")


class ToolScope:
    """The stubs and the defaults of a group of tools, and the scopes their calls name."""

    def __init__(self, channel: grpc.aio.Channel, defaults: Defaults) -> None:
        self._api = md.Stubs(channel)
        self.defaults = defaults

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


async def called(call: Awaitable[T]) -> T:
    """The RPC's answer; memoryd's refusal as a tool error with its status and message."""
    try:
        return await call
    except grpc.aio.AioRpcError as error:
        raise ToolError(f"memoryd: {error.code().name}: {error.details()}") from error
