"""`connect` and `Conversation`: the channel every adapter opens, and one conversation's calls.

The channel sends a bearer token with every call when one is given, gives unary calls a default
deadline, and retries the calls the contract marks idempotent (idempotency_level NO_SIDE_EFFECTS
or IDEMPOTENT) through the gRPC service config, on UNAVAILABLE and on a CANCELLED that the client
did not ask for (a server that stops cancels the calls it had not started yet: grpc/grpc#41785).
An AppendMessages whose every message carries a client_message_id is retried the same way (the
server skips what it stored, and says so: APPEND_OUTCOME_DUPLICATE). Every other write is tried
again only on a CANCELLED that came before the server's response headers: memoryd sends those
before a stop could cut such a write, so the call never ran (the server's
memoryd.api.commitment).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import Any

import grpc
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import FileDescriptor

from memoryd_client.stubs import Stubs
from memoryd_client.v1 import compaction_service_pb2 as v1_compaction_pb
from memoryd_client.v1 import memory_service_pb2 as v1_memory_pb
from memoryd_client.v2 import (
    admin_service_pb2,
    overview_service_pb2,
    resource_service_pb2,
    review_service_pb2,
)
from memoryd_client.v2 import context_service_pb2 as context_pb
from memoryd_client.v2 import conversation_service_pb2 as conversation_pb
from memoryd_client.v2 import memory_service_pb2 as memory_pb
from memoryd_client.v2 import records_pb2 as records_pb

DEFAULT_ADDRESS = "127.0.0.1:50051"
DEFAULT_TIMEOUT_SECONDS = 30.0
RETRY_ATTEMPTS = 4
RETRY_FIRST_DELAY_SECONDS = 0.1
RETRY_MAX_DELAY_SECONDS = 1.0
# Statuses after which a call the server may not have run is tried again. A stopping server
# answers CANCELLED for calls it had accepted but not started (grpc/grpc#41785); a CANCELLED the
# caller asked for (its own cancel or deadline) ends the call as always.
RETRYABLE_CODES = ("UNAVAILABLE", "CANCELLED")
# The one status after which any call is tried again, whatever it writes: a CANCELLED that
# came before the server's response headers. memoryd sends those before a stop could cut a call
# that is not safe to repeat, and gRPC never tries a call again once its headers came (gRFC A6),
# so such a call is one the server never ran.
NOT_STARTED_CODES = ("CANCELLED",)
APPEND_METHOD = "/memoryd.v2.ConversationService/AppendMessages"
# memoryd.v1's path of it, still served (a memoryd.v1 stub on this channel is retried the same way).
APPEND_METHODS = (APPEND_METHOD, "/memoryd.v1.MemoryService/AppendMessages")
# Every service's file: memoryd.v2's, then memoryd.v1's.
_FILES: tuple[FileDescriptor, ...] = (
    conversation_pb.DESCRIPTOR,
    memory_pb.DESCRIPTOR,
    context_pb.DESCRIPTOR,
    resource_service_pb2.DESCRIPTOR,
    review_service_pb2.DESCRIPTOR,
    overview_service_pb2.DESCRIPTOR,
    admin_service_pb2.DESCRIPTOR,
    v1_memory_pb.DESCRIPTOR,
    v1_compaction_pb.DESCRIPTOR,
)
_IDEMPOTENT = (
    descriptor_pb2.MethodOptions.NO_SIDE_EFFECTS,
    descriptor_pb2.MethodOptions.IDEMPOTENT,
)


def _unary_methods() -> list[tuple[str, str, bool]]:
    """(service, method, whether the contract marks it idempotent) of every unary call."""
    found = []
    for file in _FILES:
        for service in file.services_by_name.values():
            for method in service.methods:
                if method.client_streaming or method.server_streaming:
                    continue
                options = descriptor_pb2.MethodOptions.FromString(
                    method.GetOptions().SerializeToString()
                )
                idempotent = options.idempotency_level in _IDEMPOTENT
                found.append((service.full_name, method.name, idempotent))
    return sorted(found)


def idempotent_methods() -> list[tuple[str, str]]:
    """(service, method) of every unary call the contract marks idempotent."""
    return [(service, method) for service, method, idempotent in _unary_methods() if idempotent]


def _policy(codes: Sequence[str]) -> dict[str, Any]:
    return {
        "maxAttempts": RETRY_ATTEMPTS,
        "initialBackoff": f"{RETRY_FIRST_DELAY_SECONDS}s",
        "maxBackoff": f"{RETRY_MAX_DELAY_SECONDS:g}s",
        "backoffMultiplier": 2,
        "retryableStatusCodes": list(codes),
    }


def service_config() -> str:
    """The gRPC service config: idempotent calls retried on UNAVAILABLE or CANCELLED, every
    other unary call on a CANCELLED that came before the server's headers (one it never ran),
    with a growing delay."""
    methods = _unary_methods()
    return json.dumps(
        {
            "methodConfig": [
                {
                    "name": [
                        {"service": service, "method": method}
                        for service, method, idempotent in methods
                        if idempotent
                    ],
                    "retryPolicy": _policy(RETRYABLE_CODES),
                },
                {
                    "name": [
                        {"service": service, "method": method}
                        for service, method, idempotent in methods
                        if not idempotent
                    ],
                    "retryPolicy": _policy(NOT_STARTED_CODES),
                },
            ]
        }
    )


def _details(details: grpc.aio.ClientCallDetails, metadata: Any, timeout: float | None) -> Any:
    return grpc.aio.ClientCallDetails(
        method=details.method,
        timeout=timeout,
        metadata=metadata,
        credentials=details.credentials,
        wait_for_ready=details.wait_for_ready,
    )


def _with_token(details: grpc.aio.ClientCallDetails, token: str | None) -> Any:
    if not token:
        return details.metadata
    metadata = grpc.aio.Metadata(*(details.metadata or ()))
    metadata.add("authorization", f"Bearer {token}")
    return metadata


class _UnaryDefaults(grpc.aio.UnaryUnaryClientInterceptor):
    def __init__(self, token: str | None, timeout: float | None) -> None:
        self._token = token
        self._timeout = timeout

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        timeout = details.timeout if details.timeout is not None else self._timeout
        return await continuation(
            _details(details, _with_token(details, self._token), timeout), request
        )


def keyed_append(method: str, request: Any) -> bool:
    """Whether a call is an AppendMessages that is safe to send again: every message carries a
    client_message_id, so the server stores each once. A request sent as raw bytes is not read,
    so it is never retried."""
    return (
        method in APPEND_METHODS
        and isinstance(
            request, (conversation_pb.AppendMessagesRequest, v1_memory_pb.AppendMessagesRequest)
        )
        and bool(request.messages)
        and all(message.client_message_id for message in request.messages)
    )


def retry_delay(attempt: int) -> float:
    """The wait before try `attempt + 1` (the service config's growing backoff)."""
    return float(min(RETRY_FIRST_DELAY_SECONDS * 2 ** (attempt - 1), RETRY_MAX_DELAY_SECONDS))


class _RetryKeyedAppends(grpc.aio.UnaryUnaryClientInterceptor):
    """Keyed appends (`keyed_append`) tried again as the service config tries idempotent calls,
    within the call's one deadline."""

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        method = details.method.decode() if isinstance(details.method, bytes) else details.method
        if not keyed_append(method, request):
            return await continuation(details, request)
        deadline = None if details.timeout is None else time.monotonic() + details.timeout
        attempt = 1
        while True:
            call = await continuation(details, request)
            code = await call.code()
            if code.name not in RETRYABLE_CODES or attempt >= RETRY_ATTEMPTS:
                return call
            delay = retry_delay(attempt)
            if deadline is not None and deadline - time.monotonic() <= delay:
                return call
            await asyncio.sleep(delay)
            attempt += 1
            if deadline is not None:
                details = _details(details, details.metadata, deadline - time.monotonic())


class _StreamToken(
    grpc.aio.UnaryStreamClientInterceptor,
    grpc.aio.StreamUnaryClientInterceptor,
    grpc.aio.StreamStreamClientInterceptor,
):
    def __init__(self, token: str) -> None:
        self._token = token

    def _call(self, details: Any) -> Any:
        return _details(details, _with_token(details, self._token), details.timeout)

    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(self._call(details), request)

    async def intercept_stream_unary(self, continuation: Any, details: Any, requests: Any) -> Any:
        return await continuation(self._call(details), requests)

    async def intercept_stream_stream(self, continuation: Any, details: Any, requests: Any) -> Any:
        return await continuation(self._call(details), requests)


def connect(
    address: str = DEFAULT_ADDRESS,
    *,
    token: str | None = None,
    timeout: float | None = DEFAULT_TIMEOUT_SECONDS,
    credentials: grpc.ChannelCredentials | None = None,
    options: Sequence[tuple[str, Any]] = (),
) -> grpc.aio.Channel:
    """An asyncio channel to memoryd (use `async with`).

    `token` is sent as `authorization: Bearer <token>`; `timeout` is the deadline of unary calls
    that set none (None: no default); `credentials` secure the channel (None: plain text, for
    loopback and tests); `options` are added to memoryd's own channel options.
    """
    interceptors: list[Any] = [_UnaryDefaults(token, timeout), _RetryKeyedAppends()]
    if token:
        interceptors.append(_StreamToken(token))
    channel_options = [
        ("grpc.service_config", service_config()),
        ("grpc.enable_retries", 1),
        *options,
    ]
    if credentials is None:
        return grpc.aio.insecure_channel(
            address, options=channel_options, interceptors=interceptors
        )
    return grpc.aio.secure_channel(
        address, credentials, options=channel_options, interceptors=interceptors
    )


class _Requests:
    """The requests of one conversation's calls, its key filled in (shared by the asyncio and
    the blocking helper)."""

    def __init__(self, key: records_pb.Conversation) -> None:
        self.key = key

    def _append(
        self, messages: Sequence[conversation_pb.NewMessage]
    ) -> conversation_pb.AppendMessagesRequest:
        return conversation_pb.AppendMessagesRequest(conversation=self.key, messages=messages)

    def _commit_turn(
        self, messages: Sequence[conversation_pb.NewMessage]
    ) -> conversation_pb.CommitTurnRequest:
        return conversation_pb.CommitTurnRequest(conversation=self.key, messages=messages)

    def _list(self, page_size: int) -> conversation_pb.ListMessagesRequest:
        return conversation_pb.ListMessagesRequest(conversation=self.key, page_size=page_size)

    def _search(self, query: str) -> conversation_pb.SearchHistoryRequest:
        return conversation_pb.SearchHistoryRequest(conversation=self.key, query=query)

    def _store(
        self, category: records_pb.Category.ValueType, value: str, key: str, fields: Any
    ) -> memory_pb.StoreMemoryRequest:
        return memory_pb.StoreMemoryRequest(
            conversation=self.key, category=category, key=key, value=value, **fields
        )

    def _recall(
        self, query: str, scope: memory_pb.RecallScope.ValueType, fields: Any
    ) -> memory_pb.RecallRequest:
        return memory_pb.RecallRequest(conversation=self.key, query=query, scope=scope, **fields)

    def _compose(self, context_window: int) -> context_pb.ComposeContextRequest:
        return context_pb.ComposeContextRequest(
            conversation=self.key, context_window=context_window
        )

    def _prompt_context(self) -> context_pb.GetPromptContextRequest:
        return context_pb.GetPromptContextRequest(
            agent_id=self.key.agent_id, owner_id=self.key.owner_id
        )


class Conversation(_Requests):
    """One conversation's calls over an asyncio channel (`connect`), with its key filled in."""

    def __init__(self, channel: grpc.aio.Channel, key: records_pb.Conversation) -> None:
        super().__init__(key)
        self.stubs = Stubs(channel)

    async def append(
        self, *messages: conversation_pb.NewMessage
    ) -> conversation_pb.AppendMessagesResponse:
        """Store messages (all valid ones, or none)."""
        response: conversation_pb.AppendMessagesResponse = (
            await self.stubs.conversations.AppendMessages(self._append(messages))
        )
        return response

    async def commit_turn(
        self, *messages: conversation_pb.NewMessage
    ) -> conversation_pb.CommitTurnResponse:
        """Store one turn's messages and mark the conversation for review."""
        response: conversation_pb.CommitTurnResponse = await self.stubs.conversations.CommitTurn(
            self._commit_turn(messages)
        )
        return response

    async def list(self, page_size: int = 50) -> conversation_pb.ListMessagesResponse:
        """The newest page of the current window, oldest first."""
        response: conversation_pb.ListMessagesResponse = (
            await self.stubs.conversations.ListMessages(self._list(page_size))
        )
        return response

    async def search(self, query: str) -> conversation_pb.SearchHistoryResponse:
        """Messages of this conversation matching `query` (plain words, never syntax)."""
        response: conversation_pb.SearchHistoryResponse = (
            await self.stubs.conversations.SearchHistory(self._search(query))
        )
        return response

    async def store(
        self, category: records_pb.Category.ValueType, value: str, key: str = "", **fields: Any
    ) -> memory_pb.StoreMemoryResponse:
        """Keep a fact learnt in this conversation."""
        response: memory_pb.StoreMemoryResponse = await self.stubs.memory.StoreMemory(
            self._store(category, value, key, fields)
        )
        return response

    async def recall(
        self,
        query: str = "",
        scope: memory_pb.RecallScope.ValueType = memory_pb.RECALL_SCOPE_CURRENT,
        **fields: Any,
    ) -> memory_pb.RecallResponse:
        """What is known that matches `query`."""
        response: memory_pb.RecallResponse = await self.stubs.memory.Recall(
            self._recall(query, scope, fields)
        )
        return response

    async def compose(self, context_window: int) -> context_pb.ComposeContextResponse:
        """The context of the next model call, for a model of `context_window` tokens."""
        response: context_pb.ComposeContextResponse = await self.stubs.context.ComposeContext(
            self._compose(context_window)
        )
        return response

    async def prompt_context(self) -> context_pb.GetPromptContextResponse:
        """The owner's USER.md and MEMORY.md."""
        response: context_pb.GetPromptContextResponse = await self.stubs.context.GetPromptContext(
            self._prompt_context()
        )
        return response


def user(sender: str, content: str, **fields: Any) -> conversation_pb.NewMessage:
    """A user message from `sender`."""
    return conversation_pb.NewMessage(
        role=records_pb.ROLE_USER, sender=sender, content=content, **fields
    )


def assistant(sender: str, content: str, **fields: Any) -> conversation_pb.NewMessage:
    """An assistant message from `sender`."""
    return conversation_pb.NewMessage(
        role=records_pb.ROLE_ASSISTANT, sender=sender, content=content, **fields
    )
