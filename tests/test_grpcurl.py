"""Debugging with the real grpcurl: reflection resolves services, methods and messages."""

from __future__ import annotations

import subprocess

import pytest

from tests.server_process import ServerProcess


def grpcurl_run(grpcurl: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `grpcurl -plaintext ARGS...`."""
    return subprocess.run(
        [grpcurl, "-plaintext", *args], capture_output=True, text=True, check=False, timeout=60
    )


@pytest.mark.parametrize(
    ("symbol", "first_line"),
    [
        ("memoryd.v1.MemoryService", "memoryd.v1.MemoryService is a service:"),
        ("memoryd.v1.CompactionService", "memoryd.v1.CompactionService is a service:"),
        (
            "memoryd.v1.MemoryService.SearchHistory",
            "memoryd.v1.MemoryService.SearchHistory is a method:",
        ),
        ("memoryd.v1.Conversation", "memoryd.v1.Conversation is a message:"),
        ("memoryd.v1.Role", "memoryd.v1.Role is an enum:"),
        ("grpc.health.v1.Health", "grpc.health.v1.Health is a service:"),
    ],
)
def test_describe(grpcurl: str, server: ServerProcess, symbol: str, first_line: str) -> None:
    result = grpcurl_run(grpcurl, server.address, "describe", symbol)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == first_line


def test_unknown_symbols_are_reported(grpcurl: str, server: ServerProcess) -> None:
    result = grpcurl_run(grpcurl, server.address, "describe", "memoryd.v1.MemoryService.Nope")
    assert result.returncode != 0
    assert "Symbol not found: memoryd.v1.MemoryService.Nope" in result.stderr


def test_errors_reach_grpcurl_with_their_status(grpcurl: str, server: ServerProcess) -> None:
    result = grpcurl_run(
        grpcurl,
        "-d",
        '{"conversation": {"channel": "telegram"}}',
        server.address,
        "memoryd.v1.MemoryService/GetConversation",
    )
    assert result.returncode != 0
    assert "Code: InvalidArgument" in result.stderr
    assert "Message: conversation.chat_id is required" in result.stderr


def test_health_check(grpcurl: str, server: ServerProcess) -> None:
    result = grpcurl_run(grpcurl, server.address, "grpc.health.v1.Health/Check")
    assert result.returncode == 0, result.stderr
    assert '"status": "SERVING"' in result.stdout
