"""The HTTP listeners keep out what gRPC keeps out: a request addressed to a name the server does
not answer to (DNS rebinding) or sent by a page of another origin is refused before any handler
runs, on the API, the console, /metrics and the metrics' own port; a connection that does not
finish its request is closed at its deadline; open connections are capped below the open-file
limit, so gRPC keeps answering while HTTP is flooded; and floods are logged with a count, once
per interval, never once per attempt."""

from __future__ import annotations

import asyncio
import json
import logging
import resource
import select
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2

import memoryd_client as md
from memoryd.api import contract
from memoryd.log_events import Event
from memoryd.testing.server_process import ServerProcess
from memoryd.web.budget import ConnectionBudget, HttpLimits
from memoryd.web.hosts import HostPolicy, host_of
from memoryd.web.listener import HttpListener
from memoryd.web.throttle import RepeatFilter, Throttle
from tests.helpers import health_stub, raw_exchange

# Each RPC's memoryd.v2 path, by name.
V2 = {method.name: contract.path(method) for method in contract.methods()}
EOF_WAIT_SECONDS = 60.0


def http_address(server: ServerProcess, name: str = "http") -> str:
    return str(server.events(Event.SERVING)[-1][name])


def request(
    address: str,
    method: str,
    path: str,
    body: Any = None,
    *,
    host: str | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, bytes]:
    """One HTTP/1.1 request with exactly these headers (Host as given); (status, body)."""
    payload = b"" if body is None else json.dumps(body).encode()
    lines = [
        f"{method} {path} HTTP/1.1",
        f"Host: {address if host is None else host}",
        "Connection: close",
    ]
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    answer = raw_exchange(address, ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload)
    head, _, content = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), content


def timed_out(address: str, data: bytes) -> bool:
    """Whether the server answers `data` (an unfinished request) with 408 and closes."""
    return raw_exchange(address, data, wait=EOF_WAIT_SECONDS).startswith(b"HTTP/1.1 408 ")


def server_with(tmp_path_factory: pytest.TempPathFactory, config: str, **kwargs: Any) -> Any:
    server = ServerProcess(tmp_path_factory.mktemp("http") / "home", config=config, **kwargs)
    return server.start()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    config = """
[memoryd.http]
listen = "127.0.0.1:0"
allowed_hosts = "memory.example.com, .proxy.example"
cors_origins = "https://console.example"

[memoryd.metrics]
listen = "127.0.0.1:0"
"""
    server = server_with(tmp_path_factory, config)
    yield server
    assert server.stop() == 0, server.output


# --- the names a listener answers to ----------------------------------------------------------


def test_a_rebound_name_reaches_no_handler_and_changes_nothing(served: ServerProcess) -> None:
    address = http_address(served)
    port = address.rpartition(":")[2]
    owner = f"ada-{uuid.uuid4().hex[:8]}"
    chat = {"channel": "web", "chatId": "1", "ownerId": owner}
    rebound = f"rebind.attacker.example:{port}"
    for path, body in (
        (V2["AppendMessages"], {"conversation": chat, "messages": [{"content": "hi"}]}),
        (V2["SearchHistory"], {"owner": {"ownerId": owner}, "query": "hi"}),
        (V2["PurgeOwner"], {"ownerId": owner}),
        ("/console/session", {"token": ""}),
    ):
        status, text = request(address, "POST", path, body, host=rebound)
        assert status == 421, (path, text)
        assert b"rebind.attacker.example" in text
        assert b"memoryd.http.allowed_hosts" in text
    for path in ("/console/", "/metrics", "/console/assets/console.js"):
        assert request(address, "GET", path, host=rebound)[0] == 421, path
    # Nothing was stored by the refused append.
    with md.connect_sync(served.address) as channel:
        listed = md.SyncStubs(channel).conversations.ListMessages(
            md.ListMessagesRequest(
                conversation=md.Conversation(channel="web", chat_id="1", owner_id=owner)
            )
        )
    assert list(listed.messages) == []


def test_the_listeners_own_names_and_the_allowed_ones_are_answered(served: ServerProcess) -> None:
    address = http_address(served)
    port = address.rpartition(":")[2]
    for host in (
        address,
        f"localhost:{port}",
        f"[::1]:{port}",
        "127.0.0.1",
        "LOCALHOST.",
        "memory.example.com",
        "proxy.example",
        "a.b.proxy.example:443",
    ):
        status, text = request(address, "POST", V2["GetServerInfo"], {}, host=host)
        assert status == 200, (host, text)
    for host in ("memory.example.com.evil", "evilproxy.example", "127.0.0.2", "", "[::2]:80"):
        assert request(address, "POST", V2["GetServerInfo"], {}, host=host)[0] == 421, host


def test_a_request_without_a_host_is_refused(served: ServerProcess) -> None:
    answer = raw_exchange(http_address(served), b"GET /metrics HTTP/1.0\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 421 "), answer[:100]
    assert b"no Host header" in answer


def test_the_metrics_own_port_checks_names_too(served: ServerProcess) -> None:
    address = http_address(served, "metrics")
    assert request(address, "GET", "/metrics")[0] == 200
    assert request(address, "GET", "/metrics", host="rebind.attacker.example")[0] == 421


def test_browser_requests_of_other_origins_are_refused(served: ServerProcess) -> None:
    address = http_address(served)
    call = V2["GetServerInfo"]
    for origin in ("http://evil.example", "null", f"https://{address}", "http://127.0.0.1:1"):
        status, text = request(address, "POST", call, {}, headers={"Origin": origin})
        assert status == 403, (origin, text)
        assert b"web origin" in text
        preflight = {"Origin": origin, "Access-Control-Request-Method": "POST"}
        assert request(address, "OPTIONS", call, headers=preflight)[0] == 403, origin
    for origin in (f"http://{address}", "https://console.example", "HTTPS://console.example/"):
        status, text = request(address, "POST", call, {}, headers={"Origin": origin})
        assert status == 200, (origin, text)


def test_host_policy_rules() -> None:
    loopback = HostPolicy.of_listener("127.0.0.1:80", setting="s")
    assert loopback.answers("localhost")
    assert loopback.answers("::1")
    assert not loopback.answers("10.0.0.1")
    assert not loopback.answers("example.com")
    wildcard = HostPolicy.of_listener("0.0.0.0:80", ["db.internal"], setting="s")
    assert wildcard.answers("10.0.0.1")
    assert wildcard.answers("fe80::1")
    assert wildcard.answers("db.internal")
    assert not wildcard.answers("localhost")
    named = HostPolicy.of_listener("[2001:db8::5]:80", setting="s")
    assert named.answers(host_of("[2001:DB8:0::5]:80"))
    assert not named.answers("localhost")
    assert host_of("Example.COM.:8080") == "example.com"


# --- deadlines ---------------------------------------------------------------------------------

QUICK = """
[memoryd.http]
listen = "127.0.0.1:0"
header_timeout_seconds = 1
body_timeout_seconds = 1
idle_timeout_seconds = 1
"""


def test_connections_that_do_not_finish_their_request_are_closed(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    server = server_with(tmp_path_factory, QUICK)
    try:
        address = http_address(server)
        head = f"POST {V2['GetServerInfo']} HTTP/1.1\r\nHost: {address}\r\n"
        # Nothing at all, half a request line, headers without their end, a body cut short:
        # each is closed, with 408 where a request had begun.
        assert raw_exchange(address, b"", wait=EOF_WAIT_SECONDS) == b""
        assert timed_out(address, b"POST /memo")
        assert timed_out(address, head.encode())
        cut = head + "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
        assert timed_out(address, cut.encode())
        # A body cut short is never run, even when the part that came is valid JSON.
        valid = json.dumps(
            {"conversation": {"channel": "cut", "chatId": "1"}, "messages": [{"content": "x"}]}
        )
        cut = (
            f"POST {V2['AppendMessages']} HTTP/1.1\r\nHost: {address}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(valid) + 10}\r\n\r\n{valid}"
        )
        assert timed_out(address, cut.encode())
        with md.connect_sync(server.address) as channel:
            listed = md.SyncStubs(channel).conversations.ListMessages(
                md.ListMessagesRequest(conversation=md.Conversation(channel="cut", chat_id="1"))
            )
        assert list(listed.messages) == []
        # A client dripping a header line a second gains nothing: its deadline is absolute.
        host, _, port = address.rpartition(":")
        with socket.create_connection((host, int(port)), timeout=EOF_WAIT_SECONDS) as sock:
            sock.sendall(head.encode())
            drips = 0
            while not select.select([sock], [], [], 0.5)[0]:
                sock.sendall(b"X-Drip: 1\r\n")
                drips += 1
            assert sock.recv(100).startswith(b"HTTP/1.1 408 ")
        # A kept-alive connection idle after an answer is closed too; a whole request is
        # answered as ever.
        keep = f"POST {V2['GetServerInfo']} HTTP/1.1\r\nHost: {address}\r\n"
        keep += "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
        answer = raw_exchange(address, keep.encode(), wait=EOF_WAIT_SECONDS)
        assert answer.startswith(b"HTTP/1.1 200 ")
        # 150 held-open connections all end.
        held = [socket.create_connection((host, int(port))) for _ in range(150)]
        for index, sock in enumerate(held):
            if index % 2:
                sock.sendall(head.encode())
        for sock in held:
            sock.settimeout(EOF_WAIT_SECONDS)
            while sock.recv(65536):
                pass
            sock.close()
        assert server.events(Event.HTTP_TIMED_OUT)
    finally:
        assert server.stop() == 0, server.output


def test_at_the_cap_new_connections_wait_until_one_closes(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    config = '[memoryd.http]\nlisten = "127.0.0.1:0"\nmax_connections = 3\n'
    server = server_with(tmp_path_factory, config)
    try:
        assert server.events(Event.HTTP_LIMITS)[-1]["max_connections"] == 3
        address = http_address(server)
        host, _, port = address.rpartition(":")
        held = [socket.create_connection((host, int(port))) for _ in range(3)]
        waiting = socket.create_connection((host, int(port)), timeout=EOF_WAIT_SECONDS)
        waiting.sendall(
            f"POST {V2['GetServerInfo']} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n"
            "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}".encode()
        )
        server.wait_for_event(Event.HTTP_CONNECTIONS_CAPPED)
        held.pop().close()
        assert waiting.recv(100).startswith(b"HTTP/1.1 200 ")
        waiting.close()
        for sock in held:
            sock.close()
    finally:
        assert server.stop() == 0, server.output


def test_held_connections_under_a_low_file_limit_leave_grpc_serving(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """1,100 idle HTTP connections against a server whose open-file limit is 1,024: HTTP takes
    at most its cap, the rest wait in the kernel's queue, and gRPC answers meanwhile."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 2048
    if hard != resource.RLIM_INFINITY and hard < wanted:
        pytest.skip(f"this test opens {wanted} sockets; the open-file limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    config = '[memoryd.http]\nlisten = "127.0.0.1:0"\nheader_timeout_seconds = 600\n'
    server = server_with(tmp_path_factory, config, open_files=1024)
    held: list[socket.socket] = []
    try:
        limits = server.events(Event.HTTP_LIMITS)[-1]
        assert limits["open_file_limit"] == 1024
        cap = limits["max_connections"]
        assert cap < 512
        address = http_address(server)
        host, _, port = address.rpartition(":")
        held = [socket.create_connection((host, int(port))) for _ in range(1100)]
        server.wait_for_event(Event.HTTP_CONNECTIONS_CAPPED)
        with grpc.insecure_channel(server.address) as channel:
            health = health_stub(channel).Check(health_pb2.HealthCheckRequest(), timeout=30)
            assert health.status == health_pb2.HealthCheckResponse.SERVING
            stored = md.SyncStubs(channel).conversations.AppendMessages(
                md.AppendMessagesRequest(
                    conversation=md.Conversation(channel="fd", chat_id="1"),
                    messages=[md.NewMessage(role=md.ROLE_USER, content="still here")],
                ),
                timeout=30,
            )
            assert stored.results[0].outcome == md.APPEND_OUTCOME_STORED
    finally:
        for sock in held:
            sock.close()
        assert server.stop() == 0, server.output
    assert "Traceback" not in server.output
    assert len(server.events(Event.HTTP_CONNECTIONS_CAPPED)) <= 3


# --- floods are counted, not written line by line ----------------------------------------------


def test_a_throttled_line_is_written_once_per_interval_with_its_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = logging.getLogger("memoryd.test.throttle")
    throttle = Throttle(logger, "accepting failed", event="test", interval=3600)
    with caplog.at_level(logging.INFO, logger=logger.name):
        for _ in range(10_000):
            throttle.note("Too many open files (EMFILE)")
        throttle.flush()
    lines = [record.getMessage() for record in caplog.records]
    assert lines == [
        "accepting failed: Too many open files (EMFILE)",
        lines[1],
    ]
    assert "9,999 times in the last" in lines[1]
    assert throttle.total == 10_000


def test_a_library_logger_repeating_itself_is_counted(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("memoryd.test.repeats")
    repeats = RepeatFilter(interval=3600)
    logger.addFilter(repeats)
    try:
        with caplog.at_level(logging.WARNING, logger=logger.name):
            for _ in range(5_000):
                logger.warning("Invalid HTTP request received.")
        assert [record.getMessage() for record in caplog.records] == [
            "Invalid HTTP request received."
        ]
    finally:
        logger.removeFilter(repeats)


async def test_accepted_connections_answer_without_waiting_for_delayed_acks() -> None:
    """Without TCP_NODELAY an answer's body waited for the client's delayed ACK, 40 ms a call
    (bench/http_json.py measures it): every connection a memoryd.web listener accepts has
    Nagle's algorithm off. A listener of the real code, serving a plain ASGI app."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    listener = await HttpListener.start(
        app,
        "127.0.0.1:0",
        limits=HttpLimits(),
        budget=ConnectionBudget(8, 64),
        setting="a test",
    )
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert (await reader.readuntil(b"ok")).startswith(b"HTTP/1.1 200")
        (connection,) = listener.connections
        assert connection.transport is not None
        accepted = connection.transport.get_extra_info("socket")
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        writer.close()
        await writer.wait_closed()
    finally:
        await listener.stop()
