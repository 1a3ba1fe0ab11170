"""The synchronous client, for scripts and notebooks: `connect_sync` and
`SyncConversationClient`, the twins of `connect` and `ConversationClient` without asyncio.

    with md.connect_sync("127.0.0.1:50051") as channel:
        chat = md.SyncConversationClient(channel, md.Conversation(channel="cli", chat_id="1"))
        chat.append(md.user("ada", "hello"))

The channel behaves as the asyncio one does: the bearer token on every call, a default deadline
for unary calls that set none, the idempotent calls retried on UNAVAILABLE or CANCELLED (the same
service config), and appends whose every message has a client_message_id retried likewise.
Errors are `grpc.RpcError`s that are also `grpc.Call`s (`.code()`, `.details()`), and
`error_details` reads them.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Sequence
from typing import Any

import grpc

from memoryd_client.client import (
    DEFAULT_ADDRESS,
    DEFAULT_TIMEOUT_SECONDS,
    RETRY_ATTEMPTS,
    RETRYABLE_CODES,
    _Requests,
    keyed_append,
    retry_delay,
    service_config,
)
from memoryd_client.stubs import SyncStubs
from memoryd_client.v2 import context_service_pb2 as context_pb
from memoryd_client.v2 import conversation_service_pb2 as conversation_pb
from memoryd_client.v2 import memory_service_pb2 as memory_pb
from memoryd_client.v2 import records_pb2 as records_pb


class _Defaults(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """The token on every call; the default deadline on unary calls without one."""

    def __init__(self, token: str | None, timeout: float | None) -> None:
        self._token = token
        self._timeout = timeout

    def _details(self, details: Any, *, unary: bool) -> Any:
        metadata = list(details.metadata or ())
        if self._token:
            metadata.append(("authorization", f"Bearer {self._token}"))
        timeout = details.timeout
        if unary and timeout is None:
            timeout = self._timeout
        return _CallDetails(
            details.method,
            timeout,
            metadata,
            details.credentials,
            details.wait_for_ready,
            details.compression,
        )

    def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: Any, request: Any
    ) -> Any:
        return continuation(self._details(details, unary=True), request)

    def intercept_unary_stream(
        self, continuation: Callable[..., Any], details: Any, request: Any
    ) -> Any:
        return continuation(self._details(details, unary=False), request)

    def intercept_stream_unary(
        self, continuation: Callable[..., Any], details: Any, requests: Any
    ) -> Any:
        return continuation(self._details(details, unary=False), requests)

    def intercept_stream_stream(
        self, continuation: Callable[..., Any], details: Any, requests: Any
    ) -> Any:
        return continuation(self._details(details, unary=False), requests)


class _CallDetails(
    collections.namedtuple(
        "_CallDetails",
        ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression"),
    ),
    grpc.ClientCallDetails,
):
    """grpc.ClientCallDetails with the token and the deadline filled in."""


class _RetryKeyedAppends(grpc.UnaryUnaryClientInterceptor):
    """Keyed appends (memoryd_client.client.keyed_append) tried again as the service config tries
    idempotent calls, within the call's one deadline."""

    def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: Any, request: Any
    ) -> Any:
        if not keyed_append(details.method, request):
            return continuation(details, request)
        deadline = None if details.timeout is None else time.monotonic() + details.timeout
        attempt = 1
        while True:
            outcome = continuation(details, request)
            code = outcome.code()
            if code is None or code.name not in RETRYABLE_CODES or attempt >= RETRY_ATTEMPTS:
                return outcome
            delay = retry_delay(attempt)
            if deadline is not None and deadline - time.monotonic() <= delay:
                return outcome
            time.sleep(delay)
            attempt += 1
            if deadline is not None:
                details = _CallDetails(
                    details.method,
                    deadline - time.monotonic(),
                    details.metadata,
                    details.credentials,
                    details.wait_for_ready,
                    details.compression,
                )


def connect_sync(
    address: str = DEFAULT_ADDRESS,
    *,
    token: str | None = None,
    timeout: float | None = DEFAULT_TIMEOUT_SECONDS,
    credentials: grpc.ChannelCredentials | None = None,
    options: Sequence[tuple[str, Any]] = (),
) -> grpc.Channel:
    """A synchronous channel to memoryd (use `with`); the arguments are `connect`'s."""
    channel_options = [
        ("grpc.service_config", service_config()),
        ("grpc.enable_retries", 1),
        *options,
    ]
    channel = (
        grpc.insecure_channel(address, options=channel_options)
        if credentials is None
        else grpc.secure_channel(address, credentials, options=channel_options)
    )
    return grpc.intercept_channel(channel, _Defaults(token, timeout), _RetryKeyedAppends())


class SyncConversation(_Requests):
    """One conversation's calls over a synchronous channel (`connect_sync`), its key filled in."""

    def __init__(self, channel: grpc.Channel, key: records_pb.Conversation) -> None:
        super().__init__(key)
        self.stubs = SyncStubs(channel)

    def append(
        self, *messages: conversation_pb.NewMessage
    ) -> conversation_pb.AppendMessagesResponse:
        """Store messages (all valid ones, or none)."""
        response: conversation_pb.AppendMessagesResponse = self.stubs.conversations.AppendMessages(
            self._append(messages)
        )
        return response

    def commit_turn(
        self, *messages: conversation_pb.NewMessage
    ) -> conversation_pb.CommitTurnResponse:
        """Store one turn's messages and mark the conversation for review."""
        response: conversation_pb.CommitTurnResponse = self.stubs.conversations.CommitTurn(
            self._commit_turn(messages)
        )
        return response

    def list(self, page_size: int = 50) -> conversation_pb.ListMessagesResponse:
        """The newest page of the current window, oldest first."""
        response: conversation_pb.ListMessagesResponse = self.stubs.conversations.ListMessages(
            self._list(page_size)
        )
        return response

    def search(self, query: str) -> conversation_pb.SearchHistoryResponse:
        """Messages of this conversation matching `query` (plain words, never syntax)."""
        response: conversation_pb.SearchHistoryResponse = self.stubs.conversations.SearchHistory(
            self._search(query)
        )
        return response

    def store(
        self, category: records_pb.Category.ValueType, value: str, key: str = "", **fields: Any
    ) -> memory_pb.StoreMemoryResponse:
        """Keep a fact learnt in this conversation."""
        response: memory_pb.StoreMemoryResponse = self.stubs.memory.StoreMemory(
            self._store(category, value, key, fields)
        )
        return response

    def recall(
        self,
        query: str = "",
        scope: memory_pb.RecallScope.ValueType = memory_pb.RECALL_SCOPE_CURRENT,
        **fields: Any,
    ) -> memory_pb.RecallResponse:
        """What is known that matches `query`."""
        response: memory_pb.RecallResponse = self.stubs.memory.Recall(
            self._recall(query, scope, fields)
        )
        return response

    def compose(self, context_window: int) -> context_pb.ComposeContextResponse:
        """The context of the next model call, for a model of `context_window` tokens."""
        response: context_pb.ComposeContextResponse = self.stubs.context.ComposeContext(
            self._compose(context_window)
        )
        return response

    def prompt_context(self) -> context_pb.GetPromptContextResponse:
        """The owner's USER.md and MEMORY.md."""
        response: context_pb.GetPromptContextResponse = self.stubs.context.GetPromptContext(
            self._prompt_context()
        )
        return response
