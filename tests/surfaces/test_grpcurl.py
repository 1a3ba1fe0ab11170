"""Debugging with the real grpcurl: reflection resolves services, methods and messages."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import grpc
import pytest
from google.protobuf import descriptor_pb2
from grpc_reflection.v1alpha import reflection_pb2

from memoryd.testing.server_process import ServerProcess


def grpcurl_run(grpcurl: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `grpcurl -plaintext ARGS...`."""
    return subprocess.run(
        [grpcurl, "-plaintext", *args], capture_output=True, text=True, check=False, timeout=60
    )


@pytest.mark.parametrize(
    ("symbol", "first_line"),
    [
        ("memoryd.v2.ConversationService", "memoryd.v2.ConversationService is a service:"),
        ("memoryd.v2.ContextService", "memoryd.v2.ContextService is a service:"),
        ("memoryd.v1.MemoryService", "memoryd.v1.MemoryService is a service:"),
        ("memoryd.v1.CompactionService", "memoryd.v1.CompactionService is a service:"),
        (
            "memoryd.v2.ConversationService.SearchHistory",
            "memoryd.v2.ConversationService.SearchHistory is a method:",
        ),
        ("memoryd.v2.Conversation", "memoryd.v2.Conversation is a message:"),
        ("memoryd.v2.Role", "memoryd.v2.Role is an enum:"),
        ("grpc.health.v1.Health", "grpc.health.v1.Health is a service:"),
    ],
)
def test_describe(grpcurl: str, server: ServerProcess, symbol: str, first_line: str) -> None:
    result = grpcurl_run(grpcurl, server.address, "describe", symbol)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == first_line


def test_unknown_symbols_are_reported(grpcurl: str, server: ServerProcess) -> None:
    result = grpcurl_run(grpcurl, server.address, "describe", "memoryd.v2.MemoryService.Nope")
    assert result.returncode != 0
    assert "Symbol not found: memoryd.v2.MemoryService.Nope" in result.stderr


def test_errors_reach_grpcurl_with_their_status(grpcurl: str, server: ServerProcess) -> None:
    result = grpcurl_run(
        grpcurl,
        "-d",
        '{"conversation": {"channel": "telegram"}}',
        server.address,
        "memoryd.v2.ConversationService/GetConversation",
    )
    assert result.returncode != 0
    assert "Code: InvalidArgument" in result.stderr
    assert "Message: conversation.chat_id is required" in result.stderr


def test_health_check(grpcurl: str, server: ServerProcess) -> None:
    result = grpcurl_run(grpcurl, server.address, "grpc.health.v1.Health/Check")
    assert result.returncode == 0, result.stderr
    assert '"status": "SERVING"' in result.stdout


REFLECTION_VERSIONS = ("grpc.reflection.v1", "grpc.reflection.v1alpha")


@pytest.mark.parametrize("version", REFLECTION_VERSIONS)
async def test_both_reflection_versions_list_and_describe(
    server: ServerProcess, version: str
) -> None:
    """The same reflection answers as grpc.reflection.v1 and v1alpha (same messages)."""
    async with grpc.aio.insecure_channel(server.address) as channel:
        info = channel.stream_stream(
            f"/{version}.ServerReflection/ServerReflectionInfo",
            request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
            response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
        )
        requests = [
            reflection_pb2.ServerReflectionRequest(list_services=""),
            reflection_pb2.ServerReflectionRequest(
                file_containing_symbol="memoryd.v2.AdminService.ExportData"
            ),
            reflection_pb2.ServerReflectionRequest(
                file_containing_symbol=f"{version}.ServerReflection"
            ),
        ]
        listed, method, service = [answer async for answer in info(iter(requests))]
    names = {entry.name for entry in listed.list_services_response.service}
    assert names >= {
        "memoryd.v2.ConversationService",
        "memoryd.v2.AdminService",
        "memoryd.v1.MemoryService",
        "memoryd.v1.CompactionService",
        "grpc.health.v1.Health",
        *(f"{v}.ServerReflection" for v in REFLECTION_VERSIONS),
    }
    (found,) = [
        descriptor_pb2.FileDescriptorProto.FromString(raw)
        for raw in method.file_descriptor_response.file_descriptor_proto
        if descriptor_pb2.FileDescriptorProto.FromString(raw).name
        == "memoryd/v2/admin_service.proto"
    ]
    assert "ExportData" in [m.name for m in found.service[0].method]
    files = [
        descriptor_pb2.FileDescriptorProto.FromString(raw)
        for raw in service.file_descriptor_response.file_descriptor_proto
    ]
    assert f"{version}.ServerReflection".rsplit(".", 1)[0] in [f.package for f in files]


def test_grpcurl_uses_reflection_v1(
    grpcurl: str, start_server: type[ServerProcess], tmp_path: Path
) -> None:
    # Reflection calls are logged at debug level.
    server = start_server(tmp_path / "home", config='[memoryd.server]\nlog_level = "debug"\n')
    server.start()
    before = len(server.events("rpc"))
    result = grpcurl_run(grpcurl, server.address, "list")
    assert result.returncode == 0, result.stderr
    assert "grpc.reflection.v1.ServerReflection" in result.stdout.splitlines()
    v1 = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
    deadline = time.monotonic() + 10
    methods: list[str] = []
    while v1 not in methods and time.monotonic() < deadline:  # the log line follows the call
        time.sleep(0.05)
        methods = [event["method"] for event in server.events("rpc")[before:]]
    assert v1 in methods
    assert "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo" not in methods


def test_describe_shows_the_protos_comments(grpcurl: str, server: ServerProcess) -> None:
    """Reflection serves the descriptors with their source info, so tools show the comments."""
    message = grpcurl_run(grpcurl, server.address, "describe", "memoryd.v2.StoreMemoryRequest")
    assert message.returncode == 0, message.stderr
    text = message.stdout
    assert "// StoreMemoryRequest is one memory_store (or memory_add) call." in text
    assert "// The trust of the writer. Unset means operator." in text
    method = grpcurl_run(grpcurl, server.address, "describe", "memoryd.v2.MemoryService.GetMemory")
    assert method.returncode == 0, method.stderr
    assert "// GetMemory returns one row of the caller, by id or by scope and key." in method.stdout
    # Files outside memoryd (health) are served as before.
    health = grpcurl_run(grpcurl, server.address, "describe", "grpc.health.v1.Health")
    assert health.returncode == 0, health.stderr
    assert "grpc.health.v1.Health is a service:" in health.stdout
