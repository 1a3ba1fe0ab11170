"""Connections that take descriptors and never call: every gRPC listener (the main port and the
health port) holds at most its own cap of connections, closes one that has not finished its
handshake within `handshake_timeout_seconds`, and one with no call in progress after
`idle_timeout_seconds`. Under an open-file limit of 1,024, 1,100 idle TCP connections to either
port leave the database its descriptors and the token holders their answers."""

from __future__ import annotations

import resource
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2

import memoryd_client as md
from memoryd.log_events import Event
from memoryd.testing.server_process import ServerProcess
from tests.helpers import health_stub
from tests.server.test_first_hour import free_address

TOKEN = "connection-limits-token-0123456789"
HELD = 1100
# The bound of each wait for the server to close something (the deadlines here are 2 s and 3 s).
WAIT_SECONDS = 30
AUTH = (("authorization", f"Bearer {TOKEN}"),)


def _config(health: str) -> str:
    return f"""
[memoryd.server]
health_listen = "{health}"
handshake_timeout_seconds = 2
idle_timeout_seconds = 3

[[memoryd.auth.tokens]]
token = "{TOKEN}"
role = "admin"
agents = ["*"]
"""


@pytest.fixture
def many_sockets() -> Iterator[None]:
    """This test process may open HELD sockets and more."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 4096
    if hard != resource.RLIM_INFINITY and hard < wanted:
        pytest.skip(f"this test opens {HELD} sockets; the open-file limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _hold(address: str, count: int) -> list[socket.socket]:
    """`count` TCP connections to `address` that never send a byte (each connect completes in
    the kernel's queue, whether or not the server keeps it)."""
    host, _, port = address.rpartition(":")
    held = []
    for _ in range(count):
        sock = socket.create_connection((host, int(port)), timeout=10)
        sock.setblocking(False)
        held.append(sock)
    return held


def _closed(sock: socket.socket) -> bool:
    """Whether the server has closed this connection (what it sent before that is read and
    dropped: its HTTP/2 settings)."""
    try:
        while True:
            data = sock.recv(4096)
            if not data:
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def _await_close(sock: socket.socket) -> None:
    """Block until the server closes this connection (socket.timeout if it never does)."""
    sock.settimeout(WAIT_SECONDS)
    try:
        while sock.recv(4096):
            pass
    except ConnectionResetError:
        return


def _append(channel: grpc.Channel, text: str, *, wait: bool = False) -> None:
    stored = md.SyncStubs(channel).conversations.AppendMessages(
        md.AppendMessagesRequest(
            conversation=md.Conversation(channel="limits", chat_id="1"),
            messages=[md.NewMessage(role=md.ROLE_USER, content=text)],
        ),
        metadata=AUTH,
        timeout=30,
        wait_for_ready=wait,
    )
    assert stored.results[0].outcome == md.APPEND_OUTCOME_STORED


def _serving(address: str) -> bool:
    with grpc.insecure_channel(address) as channel:
        answer = health_stub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=30, wait_for_ready=True
        )
    return bool(answer.status == health_pb2.HealthCheckResponse.SERVING)


def test_idle_connections_to_either_port_leave_token_holders_served(
    many_sockets: None, tmp_path: Path
) -> None:
    health = free_address()
    server = ServerProcess(tmp_path / "home", config=_config(health), open_files=1024).start()
    held: list[socket.socket] = []
    try:
        limits = server.events(Event.GRPC_LIMITS)[-1]
        assert limits["open_file_limit"] == 1024
        assert limits["max_connections"] + limits["health_max_connections"] < 512
        with grpc.insecure_channel(server.address) as connected:
            _append(connected, "before", wait=True)
            # The health port: its own cap is full at once, and the main port does not notice.
            held = _hold(health, HELD)
            assert sum(_closed(sock) for sock in held[:10]) == 0
            with grpc.insecure_channel(server.address) as fresh:
                _append(fresh, "while the health port is held")
            _append(connected, "on the connection made before")
            # Each held connection is closed: beyond the cap at once, the rest at the deadline.
            for sock in held:
                _await_close(sock)
            assert _serving(health)
            for sock in held:
                sock.close()
            # The main port: a connection made before keeps answering; a new one gets in once
            # the handshake deadline has closed what held its place.
            held = _hold(server.address, HELD)
            _append(connected, "while the main port is held")
            with grpc.insecure_channel(server.address) as fresh:
                _append(fresh, "a new connection, after the deadline", wait=True)
            assert _serving(health)
    finally:
        for sock in held:
            sock.close()
        assert server.stop() == 0, server.output
    assert "Traceback" not in server.output


def test_a_connection_with_no_call_is_closed_after_the_idle_deadline(tmp_path: Path) -> None:
    """The handshake done, no call: closed after `idle_timeout_seconds` (GOAWAY); the client
    connects again for its next call without an error."""
    server = ServerProcess(tmp_path / "home", config=_config(free_address())).start()
    try:
        with grpc.insecure_channel(server.address) as channel:
            # Connected (READY) for the call, then IDLE: the server's GOAWAY.
            went_idle = threading.Event()
            seen: list[grpc.ChannelConnectivity] = []

            def follow(state: grpc.ChannelConnectivity) -> None:
                seen.append(state)
                if (
                    state is grpc.ChannelConnectivity.IDLE
                    and grpc.ChannelConnectivity.READY in seen
                ):
                    went_idle.set()

            channel.subscribe(follow)
            _append(channel, "one call", wait=True)
            assert went_idle.wait(WAIT_SECONDS), seen
            _append(channel, "the next call")
    finally:
        assert server.stop() == 0, server.output


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ("handshake_timeout_seconds = 0", "memoryd.server.handshake_timeout_seconds must be"),
        ("idle_timeout_seconds = 100000", "idle_timeout_seconds must be more than 0 and at"),
        ("max_connections = -5", "memoryd.server.max_connections must not be negative"),
    ],
)
def test_limits_that_make_no_sense_stop_the_start(
    tmp_path: Path, setting: str, expected: str
) -> None:
    server = ServerProcess(tmp_path / "home", config=f"[memoryd.server]\n{setting}\n")
    assert server.wait_exit() != 0
    assert expected in server.output
