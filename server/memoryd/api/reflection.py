"""Server reflection that also resolves method names and serves the protos' comments, as
grpc.reflection.v1 and v1alpha.

grpcio-reflection asks the protobuf descriptor pool for the file containing a symbol, and the
pool does not index methods: `grpcurl describe memoryd.v2.ConversationService.AppendMessages` and
load tools that look a method up (ghz) fail with "Symbol not found". This pool answers a method
name with its service's file and passes everything else to the default pool.

The pool's descriptors carry no comments, so `grpcurl describe`, Evans and grpcui would show bare
fields. memoryd's own files are answered instead from the descriptor set generated with them
(with source info), which the client package ships (scripts/gen_protos.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Mapping
from importlib import resources
from typing import Any, cast

import grpc
from google.protobuf import descriptor, descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection, reflection_pb2

DESCRIPTOR_SET = "descriptor_set.binpb"


class MethodAwarePool:
    """The default descriptor pool, plus lookup of `package.Service.Method` symbols."""

    def __init__(self, pool: descriptor_pool.DescriptorPool | None = None) -> None:
        self._pool = pool or descriptor_pool.Default()

    def FindFileContainingSymbol(self, symbol: str) -> descriptor.FileDescriptor:  # noqa: N802
        """The file declaring `symbol`, which may be a method of a service."""
        try:
            return self._pool.FindFileContainingSymbol(symbol)
        except KeyError:
            service_name, _, method = symbol.rpartition(".")
            try:
                service = self._pool.FindServiceByName(service_name)
            except KeyError:
                service = None
            if service is None or method not in service.methods_by_name:
                raise KeyError(f"Couldn't find symbol {symbol}") from None
            return service.file

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)


def commented_files(pool: Any) -> dict[str, bytes]:
    """{proto file name: its serialized FileDescriptorProto with source info}, for memoryd's
    own protos. Each is the pool's descriptor (what reflection served before, without
    protoc's json_name, so tools keep printing the proto field names) with the set's comments."""
    data = (resources.files("memoryd_client") / DESCRIPTOR_SET).read_bytes()
    commented = {}
    for file in descriptor_pb2.FileDescriptorSet.FromString(data).file:
        served = descriptor_pb2.FileDescriptorProto()
        pool.FindFileByName(file.name).CopyToProto(served)
        served.source_code_info.CopyFrom(file.source_code_info)
        commented[file.name] = served.SerializeToString()
    return commented


def with_comments(
    response: reflection_pb2.ServerReflectionResponse, commented: Mapping[str, bytes]
) -> reflection_pb2.ServerReflectionResponse:
    """`response` with each of memoryd's files replaced by its commented version."""
    if not response.HasField("file_descriptor_response"):
        return response
    files = response.file_descriptor_response.file_descriptor_proto
    for index, serialized in enumerate(files):
        name = descriptor_pb2.FileDescriptorProto.FromString(serialized).name
        if name in commented:
            files[index] = commented[name]
    return response


class CommentedReflection(reflection.aio.ReflectionServicer):
    """The reflection servicer, answering memoryd's files with their comments."""

    def __init__(self, service_names: tuple[str, ...], pool: Any) -> None:
        super().__init__(service_names, pool=pool)
        self._commented = commented_files(pool)

    async def ServerReflectionInfo(  # type: ignore[override]  # noqa: N802
        self,
        request_iterator: AsyncIterable[reflection_pb2.ServerReflectionRequest],
        context: Any,
    ) -> AsyncIterator[reflection_pb2.ServerReflectionResponse]:
        # The base is an async generator; its stub declares a coroutine.
        answers = cast(
            "AsyncIterable[Any]", super().ServerReflectionInfo(request_iterator, context)
        )
        async for response in answers:
            yield with_comments(response, self._commented)


# --- grpc.reflection.v1 ------------------------------------------------------------------------
# grpcio-reflection serves only grpc.reflection.v1alpha. v1 has the same messages under another
# package, so the same servicer answers both: its v1alpha messages go over the wire unchanged.
# Newer tools (grpcurl, buf curl, grpcui, Postman) ask v1 first.

V1_SERVICE_NAME = "grpc.reflection.v1.ServerReflection"
_V1ALPHA = ".grpc.reflection.v1alpha."
_V1 = ".grpc.reflection.v1."


def register_v1_descriptors(pool: descriptor_pool.DescriptorPool | None = None) -> None:
    """Add grpc/reflection/v1/reflection.proto to the pool (v1alpha's file, renamed), so that
    reflection describes the v1 service too. Adding it twice is a no-op."""
    target = pool or descriptor_pool.Default()
    try:
        target.FindFileByName("grpc/reflection/v1/reflection.proto")
    except KeyError:
        pass
    else:
        return
    proto = descriptor_pb2.FileDescriptorProto()
    reflection_pb2.DESCRIPTOR.CopyToProto(proto)
    proto.name = "grpc/reflection/v1/reflection.proto"
    proto.package = "grpc.reflection.v1"
    proto.ClearField("options")
    for message in proto.message_type:
        for field in message.field:
            if field.HasField("type_name"):
                field.type_name = field.type_name.replace(_V1ALPHA, _V1)
    for service in proto.service:
        for method in service.method:
            method.input_type = method.input_type.replace(_V1ALPHA, _V1)
            method.output_type = method.output_type.replace(_V1ALPHA, _V1)
    target.Add(proto)


def add_v1_servicer_to_server(servicer: Any, server: Any) -> None:
    """Register the v1alpha reflection servicer as grpc.reflection.v1.ServerReflection too (the
    shape of a generated add_*_to_server, so memoryd.api.registration can wrap it)."""
    handler = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    server.add_registered_method_handlers(V1_SERVICE_NAME, {"ServerReflectionInfo": handler})
