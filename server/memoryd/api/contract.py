"""The contract served: memoryd.v2's services, each with its servicer, and memoryd.v1's paths
routed to them. Every other place that needs the services or their RPCs reads them here: the
server registers them, HTTP/JSON serves their unary RPCs, health and reflection name them, the
guard and the commitment rule read their descriptors, and the docs are printed from them.

memoryd.v1 (one MemoryService of 41 RPCs and a CompactionService of 4) stays served until its
traffic is zero: each of its paths runs the memoryd.v2 handler of the same name, with the same
access, bounds and statuses, on requests parsed as memoryd.v2's messages (which are wire- and
JSON-identical to memoryd.v1's: tests/surfaces/test_contract_v2.py checks field for field). Its
calls are logged and counted under their own path, so operators see v1 traffic fall.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from types import ModuleType
from typing import Any, TypeVar

from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor

from memoryd.api.admin_rpcs import AdminServicer
from memoryd.api.context_rpcs import ContextServicer
from memoryd.api.conversation_rpcs import ConversationServicer
from memoryd.api.memory_rpcs import MemoryServicer
from memoryd.api.overview_rpcs import OverviewServicer
from memoryd.api.resource_rpcs import ResourceServicer
from memoryd.api.review_rpcs import ReviewServicer
from memoryd.services.use_cases import Services
from memoryd_client.v1 import compaction_service_pb2 as v1_compaction_pb
from memoryd_client.v1 import memory_service_pb2 as v1_memory_pb
from memoryd_client.v2 import (
    admin_service_pb2,
    admin_service_pb2_grpc,
    context_service_pb2,
    context_service_pb2_grpc,
    conversation_service_pb2,
    conversation_service_pb2_grpc,
    memory_service_pb2,
    memory_service_pb2_grpc,
    overview_service_pb2,
    overview_service_pb2_grpc,
    resource_service_pb2,
    resource_service_pb2_grpc,
    review_service_pb2,
    review_service_pb2_grpc,
)

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, slots=True)
class Service:
    """One service of memoryd.v2: its generated modules and the servicer that answers it."""

    messages: ModuleType
    stubs: ModuleType
    servicer: Callable[[Services], object]

    @property
    def descriptor(self) -> ServiceDescriptor:
        """The service's descriptor (each *_service.proto holds one service)."""
        (service,) = self.messages.DESCRIPTOR.services_by_name.values()
        found: ServiceDescriptor = service
        return found

    @property
    def name(self) -> str:
        """Its full name: memoryd.v2.ConversationService."""
        return str(self.descriptor.full_name)

    def register(self, servicer: object, server: Any) -> None:
        """Register `servicer` with `server` through the generated add_*_to_server."""
        getattr(self.stubs, f"add_{self.descriptor.name}Servicer_to_server")(servicer, server)


# memoryd.v2, in the contract's order (docs/api.md follows it).
SERVICES: tuple[Service, ...] = (
    Service(conversation_service_pb2, conversation_service_pb2_grpc, ConversationServicer),
    Service(memory_service_pb2, memory_service_pb2_grpc, MemoryServicer),
    Service(context_service_pb2, context_service_pb2_grpc, ContextServicer),
    Service(resource_service_pb2, resource_service_pb2_grpc, ResourceServicer),
    Service(review_service_pb2, review_service_pb2_grpc, ReviewServicer),
    Service(overview_service_pb2, overview_service_pb2_grpc, OverviewServicer),
    Service(admin_service_pb2, admin_service_pb2_grpc, AdminServicer),
)

# memoryd.v1's services, served through SERVICES' handlers (routes) until their traffic is zero.
LEGACY: tuple[ServiceDescriptor, ...] = (
    v1_memory_pb.DESCRIPTOR.services_by_name["MemoryService"],
    v1_compaction_pb.DESCRIPTOR.services_by_name["CompactionService"],
)


def path(method: MethodDescriptor) -> str:
    """A method's path on the wire: /memoryd.v2.ConversationService/AppendMessages."""
    return f"/{method.containing_service.full_name}/{method.name}"


def methods() -> Iterator[MethodDescriptor]:
    """Every RPC of memoryd.v2, in the contract's order."""
    for service in SERVICES:
        yield from service.descriptor.methods


def legacy_methods() -> Iterator[MethodDescriptor]:
    """Every RPC of memoryd.v1."""
    for service in LEGACY:
        yield from service.methods


def routes() -> dict[str, str]:
    """Each memoryd.v1 path -> the memoryd.v2 path that answers it (the RPC of the same name)."""
    current = {method.name: path(method) for method in methods()}
    return {path(method): current[method.name] for method in legacy_methods()}


def routed(by_path: Mapping[str, T]) -> dict[str, T]:
    """`by_path` (keyed by memoryd.v2 paths) with each memoryd.v1 path given the value of the
    path it is routed to: what v1 is held to is v2's, decided once."""
    found = dict(by_path)
    for legacy, current in routes().items():
        if current in by_path:
            found[legacy] = by_path[current]
    return found


def service_names() -> tuple[str, ...]:
    """Every service memoryd serves of its own: memoryd.v2's, then memoryd.v1's."""
    return (*(service.name for service in SERVICES), *(s.full_name for s in LEGACY))
