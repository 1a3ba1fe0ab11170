"""An HTTP/1.1 listener that cannot be held open or starved: uvicorn's protocol (h11 parses every
request) on connections memoryd accepts itself, inside the server's own event loop.

uvicorn's own server accepts through asyncio: nothing closes a connection that never finishes
its request (it has no header or body timeout), nothing caps how many are open, and when the
process runs out of file descriptors asyncio retries the accept in a loop that logs a traceback
per attempt (tens of thousands a second, while gRPC, sharing the descriptors, stops answering).
So this listener keeps uvicorn's protocol and replaces the rest:

- **A cap on open connections** (`ConnectionBudget`), shared by every HTTP listener of the
  process and set below the open-file limit (half of it, less a reserve), so that gRPC, the
  database and the model always have descriptors. At the cap the listener stops accepting; new
  connections wait in the kernel's queue (not in the process) until one closes.
- **Deadlines** (`HttpLimits`): a request's line and headers within `header_seconds` of the
  connection's start (or of the first byte of a later request on a kept-alive connection), its
  body within `body_seconds` of its headers, at most `idle_seconds` between requests, and an
  answer the client does not read for `body_seconds` ends the connection. A request cut off
  gets 408. Each is an absolute deadline: a client that drips a byte a second gains nothing.
- **Accept errors are logged once per interval with a count**, and accepting pauses briefly,
  instead of one traceback per attempt.

TLS handshakes are bounded by `header_seconds` too. Start and stop are memoryd's (not
`uvicorn.Server.serve`, which would take over the process's signal handlers); an application
that needs it gets the ASGI lifespan (`memoryd mcp --listen`'s session manager).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
import ssl
import time
from email.utils import formatdate
from typing import Any

import h11

from memoryd.errors import StartupError
from memoryd.log_events import Event
from memoryd.web.budget import ConnectionBudget, HttpLimits
from memoryd.web.throttle import Throttle, throttle_library_logger

log = logging.getLogger("memoryd.http")

# How often deadlines are checked (and the Date header renewed): deadlines are met to a second.
SWEEP_SECONDS = 1.0
# After an accept error (descriptors exhausted), how long accepting pauses.
ACCEPT_PAUSE_SECONDS = 0.5
LISTEN_BACKLOG = 1024
_TIMED_OUT = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n%s"
)


class _Connection(asyncio.Protocol):
    """One accepted connection: uvicorn's protocol inside, its deadlines kept here."""

    def __init__(self, listener: HttpListener) -> None:
        self._listener = listener
        self.inner: Any = listener.new_protocol()
        self.transport: asyncio.Transport | None = None
        self.made = False
        now = time.monotonic()
        self.phase = "head"
        self.phase_started = now
        self.first_byte_at: float | None = None
        self.requests = 0
        self.stalled_since: float | None = None
        self.closing_since: float | None = None

    # --- asyncio.Protocol, passed on to uvicorn's -----------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.made = True
        self.transport = transport  # type: ignore[assignment]  # a stream transport
        self._listener.connections.add(self)
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        now = time.monotonic()
        self.observe(now)  # an answer may have ended since the last sweep
        if self.phase == "head" and self.first_byte_at is None:
            self.first_byte_at = now
        self.inner.data_received(data)
        self.observe(now)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()  # type: ignore[no-any-return]

    def connection_lost(self, exc: Exception | None) -> None:
        self._listener.connections.discard(self)
        self._listener.closed()
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.stalled_since = time.monotonic()
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.stalled_since = None
        self.inner.resume_writing()

    # --- deadlines ------------------------------------------------------------------------------

    def observe(self, now: float) -> None:
        """Follow the request's progress (h11's state of the client's side)."""
        state = self.inner.conn.their_state
        phase = "head" if state is h11.IDLE else "body" if state is h11.SEND_BODY else "answer"
        if phase == self.phase:
            return
        if phase == "head":
            self.requests += 1
            self.first_byte_at = None
        self.phase, self.phase_started = phase, now

    def deadline(self, limits: HttpLimits) -> float | None:
        """When this connection is given up, as things stand (None: not while it answers)."""
        if self.closing_since is not None:
            return self.closing_since + limits.idle_seconds
        if self.phase == "head":
            if self.first_byte_at is not None:
                return self.first_byte_at + limits.header_seconds
            wait = limits.header_seconds if self.requests == 0 else limits.idle_seconds
            return self.phase_started + wait
        if self.phase == "body":
            return self.phase_started + limits.body_seconds
        if self.stalled_since is not None:
            return self.stalled_since + limits.body_seconds
        return None

    def give_up(self, now: float) -> str:
        """End the connection at its deadline: 408 when a request was cut off before any of its
        answer; what it was doing, for the count."""
        transport = self.transport
        if transport is None:
            return "closed"
        if self.closing_since is not None:
            transport.abort()  # it never let the 408 or the close through
            return "closing"
        self.closing_since = now
        # A request begun and not answered at all: in the head phase the last answer is done.
        cycle = self.inner.cycle
        cut_off = (self.phase == "head" and self.first_byte_at is not None) or (
            self.phase == "body" and (cycle is None or not cycle.response_started)
        )
        if cut_off:
            body = b"the request did not arrive in time\n"
            transport.write(_TIMED_OUT % (len(body), body))
        if self.phase == "answer":
            transport.abort()  # an answer the client does not read: nothing more can be sent
        else:
            transport.close()
        return "idle" if self.phase == "head" and not cut_off else self.phase


class HttpListener:
    """A listening socket, its accepted connections, and their deadlines."""

    def __init__(
        self,
        config: Any,
        sock: socket.socket,
        limits: HttpLimits,
        budget: ConnectionBudget,
        name: str,
    ) -> None:
        import uvicorn.server  # noqa: PLC0415 - loaded only when HTTP is on

        self._config = config
        self._socket = sock
        self._limits = limits
        self._budget = budget
        self._name = name
        self._state = uvicorn.server.ServerState()
        self._lifespan: Any = None
        self.connections: set[_Connection] = set()
        self._loop = asyncio.get_running_loop()
        self._reading = False
        self._stopped = False
        self._sweeper: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._accept_errors = Throttle(
            log, f"{name}: accepting a connection failed", event=Event.HTTP_ACCEPT_FAILED
        )
        self._full = Throttle(
            log,
            f"{name}: {budget.cap:,} HTTP connections are open (the cap): new ones wait in the "
            "kernel's queue until one closes",
            event=Event.HTTP_CONNECTIONS_CAPPED,
        )
        self._timeouts = Throttle(
            log,
            f"{name}: HTTP connections closed at their deadline",
            event=Event.HTTP_TIMED_OUT,
            level=logging.INFO,
        )

    @property
    def port(self) -> int:
        """The port it listens on."""
        return int(self._socket.getsockname()[1])

    @classmethod
    async def start(
        cls,
        app: Any,
        listen: str,
        *,
        limits: HttpLimits,
        budget: ConnectionBudget,
        setting: str,
        tls: dict[str, Any] | None = None,
        lifespan: bool = False,
    ) -> HttpListener:
        """Bind `listen` (the value of `setting`) and serve `app` on it; `tls`: uvicorn's
        ssl_* options."""
        import uvicorn  # noqa: PLC0415 - loaded only when HTTP is on

        throttle_library_logger("uvicorn.error")
        config = uvicorn.Config(
            app,
            http="h11",
            ws="none",
            lifespan="on" if lifespan else "off",
            log_level="warning",
            access_log=False,
            server_header=False,
            proxy_headers=False,
            timeout_keep_alive=max(1, round(limits.idle_seconds)),
            **(tls or {}),
        )
        sock = _bound(listen, setting)
        try:
            config.load()
        except (SystemExit, ssl.SSLError, OSError) as error:  # uvicorn cannot serve (TLS files)
            sock.close()
            raise StartupError(f"cannot serve HTTP on {listen}") from error
        listener = cls(config, sock, limits, budget, listen)
        if lifespan:
            listener._lifespan = config.lifespan_class(config)
            await listener._lifespan.startup()
        listener._renew_date()
        listener._sweeper = asyncio.create_task(listener._sweep(), name=f"memoryd-http {listen}")
        listener._resume()
        return listener

    def new_protocol(self) -> Any:
        """uvicorn's protocol for one connection."""
        return self._config.http_protocol_class(
            config=self._config,
            server_state=self._state,
            app_state=self._lifespan.state if self._lifespan is not None else {},
            _loop=self._loop,
        )

    # --- accepting ------------------------------------------------------------------------------

    def _resume(self) -> None:
        if self._stopped or self._reading:
            return
        self._reading = True
        self._loop.add_reader(self._socket.fileno(), self._accept)

    def _pause(self) -> None:
        if self._reading:
            self._reading = False
            self._loop.remove_reader(self._socket.fileno())

    def _accept(self) -> None:
        while not self._stopped:
            if not self._budget.take():
                self._full.note()
                self._pause()
                self._budget.wait(self._resume)
                return
            try:
                sock, _address = self._socket.accept()
            except (BlockingIOError, InterruptedError):
                self._budget.give_back()
                return
            except ConnectionAbortedError:
                self._budget.give_back()
                continue
            except OSError as error:
                self._budget.give_back()
                # Out of descriptors or memory: say so once a while, and try again shortly.
                self._accept_errors.note(_reason(error))
                self._pause()
                self._loop.call_later(ACCEPT_PAUSE_SECONDS, self._resume)
                return
            sock.setblocking(False)  # noqa: FBT003 - the socket API's own argument
            task = self._loop.create_task(self._connect(sock))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _connect(self, sock: socket.socket) -> None:
        made: list[_Connection] = []

        def protocol() -> _Connection:
            made.append(_Connection(self))
            return made[0]

        try:
            await self._loop.connect_accepted_socket(
                protocol,
                sock,
                ssl=self._config.ssl,
                ssl_handshake_timeout=self._limits.header_seconds if self._config.ssl else None,
            )
        except (OSError, ssl.SSLError, TimeoutError, asyncio.CancelledError):
            # A TLS handshake that failed or took too long: the connection never began.
            if not (made and made[0].made):
                sock.close()
                self._budget.give_back()

    def closed(self) -> None:
        """A connection ended: its place is free."""
        self._budget.give_back()

    # --- deadlines ------------------------------------------------------------------------------

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            self._renew_date()
            now = time.monotonic()
            for connection in list(self.connections):
                connection.observe(now)
                deadline = connection.deadline(self._limits)
                if deadline is not None and now >= deadline:
                    self._timeouts.note(connection.give_up(now))

    def _renew_date(self) -> None:
        """The Date header of every answer (uvicorn's own loop renews it each second)."""
        date = formatdate(time.time(), usegmt=True).encode()
        self._state.default_headers = [(b"date", date), *self._config.encoded_headers]

    # --- stopping -------------------------------------------------------------------------------

    async def stop(self, grace_seconds: float = 5.0) -> None:
        """Refuse new connections, let requests in flight finish within `grace_seconds`, close
        what is left."""
        self._stopped = True
        self._pause()
        self._socket.close()
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        for connection in list(self.connections):
            connection.inner.shutdown()
        deadline = time.monotonic() + grace_seconds
        # uvicorn keeps its tasks in a plain set: there is no event to wait on.
        while (self.connections or self._state.tasks) and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        for connection in list(self.connections):
            if connection.transport is not None:
                connection.transport.abort()
        for task in (*self._state.tasks, *self._tasks):
            task.cancel()
        await asyncio.gather(*self._state.tasks, *self._tasks, return_exceptions=True)
        for throttle in (self._accept_errors, self._full, self._timeouts):
            throttle.flush()
        if self._lifespan is not None:
            await self._lifespan.shutdown()


def _reason(error: OSError) -> str:
    name = errno.errorcode.get(error.errno or 0, "")
    return f"{error.strerror or error} ({name})" if name else str(error)


def _bound(listen: str, setting: str) -> socket.socket:
    host, _, port = listen.rpartition(":")
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Connections inherit it (Linux): an answer's headers and body leave as uvicorn writes them,
    # instead of the body waiting out the client's delayed ACK (40 ms a call, measured).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, int(port)))
    except OSError as error:
        sock.close()
        raise StartupError(f"cannot listen on {listen} ({setting}): {error.strerror}") from error
    sock.listen(LISTEN_BACKLOG)
    sock.setblocking(False)  # noqa: FBT003 - the socket API's own argument
    return sock
