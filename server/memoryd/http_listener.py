"""The HTTP/JSON listener (`[memoryd.http] listen`): memoryd.api.connect_http's application,
served by uvicorn inside the server's own event loop, with the gRPC listener's TLS.

uvicorn (h11 underneath) parses HTTP/1.1: keep-alive, pipelining and malformed requests are
its; memoryd starts and stops it itself (not `uvicorn.Server.serve`, which would take over the
process's signal handlers).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from typing import Any

from memoryd.config import ServerSettings
from memoryd.errors import StartupError

log = logging.getLogger(__name__)


class HttpListener:
    """A started uvicorn server on one bound socket."""

    def __init__(self, server: Any, sock: socket.socket, task: asyncio.Task[None]) -> None:
        self._server = server
        self._socket = sock
        self._task = task

    @property
    def port(self) -> int:
        return int(self._socket.getsockname()[1])

    @classmethod
    async def start(
        cls, app: Any, listen: str, tls: ServerSettings, setting: str = "memoryd.http.listen"
    ) -> HttpListener:
        """Bind `listen` (the value of `setting`) and serve `app` on it (TLS when the gRPC
        listener has it)."""
        import uvicorn  # noqa: PLC0415 - loaded only when HTTP is on

        host, _, port = listen.rpartition(":")
        sock = _bound(host.strip("[]"), int(port), listen, setting)
        options: dict[str, Any] = {}
        if tls.tls_cert:
            options |= {"ssl_certfile": tls.tls_cert, "ssl_keyfile": tls.tls_key}
            if tls.tls_client_ca:
                options |= {"ssl_ca_certs": tls.tls_client_ca, "ssl_cert_reqs": ssl.CERT_REQUIRED}
        config = uvicorn.Config(
            app,
            lifespan="off",
            log_level="warning",
            access_log=False,
            server_header=False,
            proxy_headers=False,
            timeout_keep_alive=30,
            **options,
        )
        server = uvicorn.Server(config)
        try:
            # What uvicorn.Server.serve does before its startup, without its signal handlers.
            config.load()
            server.lifespan = config.lifespan_class(config)
            await server.startup(sockets=[sock])
        except (SystemExit, ssl.SSLError, OSError) as error:  # uvicorn cannot serve (TLS files)
            sock.close()
            raise StartupError(f"cannot serve HTTP on {listen}") from error
        task = asyncio.create_task(_keep_date(server), name="memoryd-http")
        return cls(server, sock, task)

    async def stop(self) -> None:
        """Refuse new connections, let requests in flight finish, close."""
        self._server.should_exit = True
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        await self._server.shutdown(sockets=[self._socket])
        self._socket.close()


async def _keep_date(server: Any) -> None:
    """What uvicorn's own main loop does that memoryd needs: the Date header of its answers,
    renewed each second. That loop wakes ten times a second, which cost an idle server 4 ms
    of CPU a second (measured: against 0.5 without a listener), more than the calls it serves
    at a few dozen a second."""
    while True:
        await server.on_tick(0)  # tick 0: the default headers, Date included, are renewed
        await asyncio.sleep(1.0)


def _bound(host: str, port: int, listen: str, setting: str) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Connections inherit it (Linux): an answer's headers and body leave as uvicorn writes them,
    # instead of the body waiting out the client's delayed ACK (40 ms a call, measured).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise StartupError(f"cannot listen on {listen} ({setting}): {error.strerror}") from error
    sock.listen(1024)
    sock.setblocking(False)  # noqa: FBT003 - the socket API's own argument
    return sock
