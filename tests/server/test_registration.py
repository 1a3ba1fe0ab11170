"""How memoryd's handlers are registered with grpc.aio (memoryd.api.registration): one generic
handler finds every path, and no method is registered one by one, whose pending requests
grpc.aio's server would pass to `asyncio.wait` on every call it accepts."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

import memoryd_client as md
from memoryd.api import contract
from memoryd.api.registration import Paths, add_services
from tests.helpers import user


class RecordingServer:
    """What add_services asks of a grpc.aio server, recorded."""

    def __init__(self) -> None:
        self.generic: list[Any] = []
        self.registered: list[str] = []

    def add_generic_rpc_handlers(self, handlers: tuple[Any, ...]) -> None:
        self.generic.extend(handlers)

    def add_registered_method_handlers(self, service: str, _handlers: object) -> None:
        self.registered.append(service)


class Details(grpc.HandlerCallDetails):
    def __init__(self, method: str) -> None:
        self.method = method
        self.invocation_metadata = ()


def generated_base(service: contract.Service) -> object:
    """The generated servicer of `service` (each method answers UNIMPLEMENTED)."""
    return getattr(service.stubs, f"{service.descriptor.name}Servicer")()


def test_one_generic_handler_finds_every_path_and_no_method_is_registered() -> None:
    server = RecordingServer()
    every = add_services(
        server,  # type: ignore[arg-type]
        ((service.register, generated_base(service)) for service in contract.SERVICES),
        routes=contract.routes(),
    )
    assert server.registered == []
    assert len(server.generic) == 1
    paths = server.generic[0]
    assert isinstance(paths, Paths)
    v2 = {
        f"/{service.name}/{method}"
        for service in contract.SERVICES
        for method in service.descriptor.methods_by_name
    }
    assert v2 | set(contract.routes()) == set(every)
    for path, handler in every.items():
        assert paths.service(Details(path)) is handler
    assert paths.service(Details("/memoryd.v2.ConversationService/Nothing")) is None
    assert paths.service(Details("/memoryd.v2.Nothing/AppendMessages")) is None


async def test_a_method_nobody_serves_is_unimplemented(channel: grpc.aio.Channel) -> None:
    for path in ("/memoryd.v2.ConversationService/Nothing", "/nothing.Service/AppendMessages"):
        call: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(path)
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await call(b"")
        assert raised.value.code() is grpc.StatusCode.UNIMPLEMENTED


async def test_each_kind_of_service_answers_through_the_one_handler(
    channel: grpc.aio.Channel, conversation: md.Conversation
) -> None:
    request = md.AppendMessagesRequest(conversation=conversation, messages=[user("registered")])
    appended = await md.Stubs(channel).conversations.AppendMessages(request)
    assert len(appended.results) == 1
    # memoryd.v1's path is served by the same wrapped handler.
    legacy = channel.unary_unary(
        "/memoryd.v1.MemoryService/AppendMessages",
        request_serializer=md.AppendMessagesRequest.SerializeToString,
        response_deserializer=md.AppendMessagesResponse.FromString,
    )
    assert len((await legacy(request)).results) == 1
    health: Any = health_pb2_grpc.HealthStub(channel)  # methods set per instance
    checked = await health.Check(health_pb2.HealthCheckRequest())
    assert checked.status == health_pb2.HealthCheckResponse.SERVING
