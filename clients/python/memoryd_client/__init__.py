"""Python client for memoryd: the generated memoryd.v1 messages and stubs, and `connect`.

    import memoryd_client as md

    async with md.connect("127.0.0.1:50051") as channel:
        memory = md.MemoryServiceStub(channel)
        await memory.AppendMessages(md.AppendMessagesRequest(
            conversation=md.Conversation(channel="telegram", chat_id="42"),
            messages=[md.NewMessage(role=md.ROLE_USER, sender="ada", content="hello")],
        ))

The modules generated from protos/ live in memoryd_client.v1 (regenerate with `make protos`).
"""

from __future__ import annotations

import grpc

from memoryd_client.v1.compaction_service_pb2_grpc import CompactionServiceStub
from memoryd_client.v1.memory_service_pb2 import (
    APPEND_OUTCOME_DUPLICATE,
    APPEND_OUTCOME_SKIPPED_BLANK,
    APPEND_OUTCOME_STORED,
    APPEND_OUTCOME_UNSPECIFIED,
    MATCH_KIND_SUBSTRING,
    MATCH_KIND_UNSPECIFIED,
    MATCH_KIND_WORD,
    AppendMessagesRequest,
    AppendMessagesResponse,
    AppendOutcome,
    AppendResult,
    ClearConversationRequest,
    ClearConversationResponse,
    GetConversationRequest,
    GetConversationResponse,
    HistoryHit,
    ListMessagesRequest,
    ListMessagesResponse,
    MatchKind,
    NewMessage,
    PurgeConversationRequest,
    PurgeConversationResponse,
    SearchHistoryRequest,
    SearchHistoryResponse,
)
from memoryd_client.v1.memory_service_pb2_grpc import MemoryServiceStub
from memoryd_client.v1.resources_pb2 import (
    ROLE_ASSISTANT,
    ROLE_SYSTEM,
    ROLE_TOOL,
    ROLE_UNSPECIFIED,
    ROLE_USER,
    TRUST_GUEST,
    TRUST_OPERATOR,
    TRUST_UNSPECIFIED,
    AgentScope,
    Conversation,
    Message,
    OwnerScope,
    Role,
    Trust,
)

DEFAULT_ADDRESS = "127.0.0.1:50051"


def connect(address: str = DEFAULT_ADDRESS) -> grpc.aio.Channel:
    """An asyncio channel to a memoryd server without TLS (use `async with`)."""
    return grpc.aio.insecure_channel(address)


__all__ = [
    "APPEND_OUTCOME_DUPLICATE",
    "APPEND_OUTCOME_SKIPPED_BLANK",
    "APPEND_OUTCOME_STORED",
    "APPEND_OUTCOME_UNSPECIFIED",
    "DEFAULT_ADDRESS",
    "MATCH_KIND_SUBSTRING",
    "MATCH_KIND_UNSPECIFIED",
    "MATCH_KIND_WORD",
    "ROLE_ASSISTANT",
    "ROLE_SYSTEM",
    "ROLE_TOOL",
    "ROLE_UNSPECIFIED",
    "ROLE_USER",
    "TRUST_GUEST",
    "TRUST_OPERATOR",
    "TRUST_UNSPECIFIED",
    "AgentScope",
    "AppendMessagesRequest",
    "AppendMessagesResponse",
    "AppendOutcome",
    "AppendResult",
    "ClearConversationRequest",
    "ClearConversationResponse",
    "CompactionServiceStub",
    "Conversation",
    "GetConversationRequest",
    "GetConversationResponse",
    "HistoryHit",
    "ListMessagesRequest",
    "ListMessagesResponse",
    "MatchKind",
    "MemoryServiceStub",
    "Message",
    "NewMessage",
    "OwnerScope",
    "PurgeConversationRequest",
    "PurgeConversationResponse",
    "Role",
    "SearchHistoryRequest",
    "SearchHistoryResponse",
    "Trust",
    "connect",
]
