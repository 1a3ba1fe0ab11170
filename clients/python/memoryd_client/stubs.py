"""`Stubs` and `SyncStubs`: the stub of every memoryd.v2 service on one channel, each named after
its resource."""

from __future__ import annotations

from typing import Any

import grpc

from memoryd_client.v2 import admin_service_pb2_grpc as admin_grpc
from memoryd_client.v2 import context_service_pb2_grpc as context_grpc
from memoryd_client.v2 import conversation_service_pb2_grpc as conversation_grpc
from memoryd_client.v2 import memory_service_pb2_grpc as memory_grpc
from memoryd_client.v2 import overview_service_pb2_grpc as overview_grpc
from memoryd_client.v2 import resource_service_pb2_grpc as resource_grpc
from memoryd_client.v2 import review_service_pb2_grpc as review_grpc


def _attach(stubs: Any, channel: Any) -> None:
    stubs.conversations = conversation_grpc.ConversationServiceStub(channel)
    stubs.memory = memory_grpc.MemoryServiceStub(channel)
    stubs.context = context_grpc.ContextServiceStub(channel)
    stubs.resources = resource_grpc.ResourceServiceStub(channel)
    stubs.reviews = review_grpc.ReviewServiceStub(channel)
    stubs.overview = overview_grpc.OverviewServiceStub(channel)
    stubs.admin = admin_grpc.AdminServiceStub(channel)


class Stubs:
    """Every service of memoryd.v2 on an asyncio channel (`connect`):

    - `conversations`: ConversationService, what was said (append, list, search, clear, purge);
    - `memory`: MemoryService, what is known (store, recall, update, archive, jobs);
    - `context`: ContextService, what the next model call gets (compose, compact, prompt files);
    - `resources`: ResourceService, the prompt files' revisions;
    - `reviews`: ReviewService, the background reviewer;
    - `overview`: OverviewService, owners and activity;
    - `admin`: AdminService, the operator's (a token with role admin).
    """

    conversations: conversation_grpc.ConversationServiceAsyncStub
    memory: memory_grpc.MemoryServiceAsyncStub
    context: context_grpc.ContextServiceAsyncStub
    resources: resource_grpc.ResourceServiceAsyncStub
    reviews: review_grpc.ReviewServiceAsyncStub
    overview: overview_grpc.OverviewServiceAsyncStub
    admin: admin_grpc.AdminServiceAsyncStub

    def __init__(self, channel: grpc.aio.Channel) -> None:
        _attach(self, channel)


class SyncStubs:
    """The same stubs as `Stubs`, on a blocking channel (`connect_sync`)."""

    conversations: conversation_grpc.ConversationServiceStub
    memory: memory_grpc.MemoryServiceStub
    context: context_grpc.ContextServiceStub
    resources: resource_grpc.ResourceServiceStub
    reviews: review_grpc.ReviewServiceStub
    overview: overview_grpc.OverviewServiceStub
    admin: admin_grpc.AdminServiceStub

    def __init__(self, channel: grpc.Channel) -> None:
        _attach(self, channel)
