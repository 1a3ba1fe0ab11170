"""Small helpers for calling the real server through the generated client."""

from __future__ import annotations

import grpc
import pytest

import memoryd_client as md


def user(content: str, **fields: object) -> md.NewMessage:
    """A user message."""
    fields.setdefault("sender", "ada")
    return md.NewMessage(role=md.ROLE_USER, content=content, **fields)  # type: ignore[arg-type]


def assistant(content: str, **fields: object) -> md.NewMessage:
    """An assistant message."""
    fields.setdefault("sender", "assistant")
    return md.NewMessage(role=md.ROLE_ASSISTANT, content=content, **fields)  # type: ignore[arg-type]


async def append(
    memory: md.MemoryServiceStub, conversation: md.Conversation, *messages: md.NewMessage
) -> md.AppendMessagesResponse:
    """Append messages and return the response."""
    return await memory.AppendMessages(
        md.AppendMessagesRequest(conversation=conversation, messages=list(messages))
    )


async def rpc_error(call: object) -> grpc.aio.AioRpcError:
    """Await a call that must fail, and return its error."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call  # type: ignore[misc]
    return caught.value
