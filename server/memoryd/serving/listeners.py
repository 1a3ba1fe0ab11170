"""The HTTP listeners of a server: the HTTP/JSON API (memoryd.api.connect_http) with the console
and /metrics on `[memoryd.http] listen`, and the metrics' own port (`[memoryd.metrics] listen`).

Both are memoryd.web listeners: they answer only the names of their address (and
`[memoryd.http] allowed_hosts`), run browser requests only from their own origin or the CORS
origins, and share one cap on open connections and the same deadlines. What they serve is the
same wrapped handlers gRPC calls, so tokens, access rules, bounds and statuses are gRPC's.
"""

from __future__ import annotations

import dataclasses
import logging
import ssl
from collections.abc import Mapping
from typing import Any

from google.protobuf import message_factory

from memoryd.api import contract
from memoryd.api.auth import Authorizer
from memoryd.api.connect_http import ConnectApp, Procedure
from memoryd.config import ServerSettings, Settings
from memoryd.console.app import ConsoleApp
from memoryd.log_events import Event
from memoryd.runtime import Runtime
from memoryd.serving import levels
from memoryd.serving.metrics_endpoint import MetricsApp
from memoryd.web.budget import ConnectionBudget, HttpLimits
from memoryd.web.hosts import HostGuard, HostPolicy
from memoryd.web.listener import HttpListener

log = logging.getLogger("memoryd.server")


@dataclasses.dataclass(frozen=True, slots=True)
class HttpListeners:
    """The HTTP listeners that are on: the API's (with /metrics) and the metrics' own."""

    api: HttpListener | None
    metrics: HttpListener | None
    settings: Settings

    def addresses(self) -> dict[str, str]:
        """Where each listens, for the serving log line."""
        found = {}
        for name, listener, listen in (
            ("http", self.api, self.settings.http.listen),
            ("metrics", self.metrics, self.settings.metrics.listen),
        ):
            if listener is not None:
                found[name] = f"{listen.rpartition(':')[0]}:{listener.port}"
        return found

    async def stop(self) -> None:
        """Let requests in flight finish (within the grace period), close."""
        for listener in (self.api, self.metrics):
            if listener is not None:
                await listener.stop(self.settings.server.grace_period_seconds)


def _tls_options(server: ServerSettings) -> dict[str, Any]:
    """uvicorn's TLS options from the gRPC listener's TLS settings (none without TLS)."""
    if not server.tls_cert:
        return {}
    options: dict[str, Any] = {"ssl_certfile": server.tls_cert, "ssl_keyfile": server.tls_key}
    if server.tls_client_ca:
        options |= {"ssl_ca_certs": server.tls_client_ca, "ssl_cert_reqs": ssl.CERT_REQUIRED}
    return options


async def start_http(
    settings: Settings, handlers: Mapping[str, Any], runtime: Runtime, guard: Authorizer | None
) -> HttpListeners:
    """The HTTP/JSON listener over the same wrapped handlers, when [memoryd.http] listen is
    set (memoryd.api.connect_http), serving /metrics as well; and the metrics' own listener,
    when [memoryd.metrics] listen is set. Both answer only the names of their address (and
    [memoryd.http] allowed_hosts), and share one cap on open connections and its deadlines
    (memoryd.web)."""
    metrics_on = settings.metrics.enabled
    http = settings.http
    if not (http.listen or (metrics_on and settings.metrics.listen)):
        return HttpListeners(None, None, settings)
    limits = HttpLimits(
        header_seconds=http.header_timeout_seconds,
        body_seconds=http.body_timeout_seconds,
        idle_seconds=http.idle_timeout_seconds,
    )
    budget = ConnectionBudget.for_process(http.max_connections)
    log.info(
        "HTTP: %s; a request's headers within %gs, its body within %gs, idle connections "
        "closed after %gs",
        budget.describe(),
        limits.header_seconds,
        limits.body_seconds,
        limits.idle_seconds,
        extra={
            "event": Event.HTTP_LIMITS,
            "max_connections": budget.cap,
            "open_file_limit": budget.limit,
            "header_timeout_seconds": limits.header_seconds,
            "body_timeout_seconds": limits.body_seconds,
            "idle_timeout_seconds": limits.idle_seconds,
        },
    )

    def with_metrics(inner: Any) -> MetricsApp:
        return MetricsApp(lambda: levels.refresh(runtime), guard, inner)

    async def start(app: Any, listen: str, setting: str) -> HttpListener:
        policy = HostPolicy.of_listener(
            listen, http.hosts, http.origins, setting="memoryd.http.allowed_hosts"
        )
        return await HttpListener.start(
            HostGuard(app, policy),
            listen,
            limits=limits,
            budget=budget,
            setting=setting,
            tls=_tls_options(settings.server),
        )

    api = None
    if http.listen:
        app: Any = _connect_app(settings, handlers)
        if http.console:
            app = ConsoleApp(
                app,
                guard,
                secure=bool(settings.server.tls_cert),
                idle_seconds=http.console_idle_minutes * 60,
            )
        api = await start(
            with_metrics(app) if metrics_on else app, http.listen, "memoryd.http.listen"
        )
    own = None
    if metrics_on and settings.metrics.listen:
        try:
            own = await start(with_metrics(None), settings.metrics.listen, "memoryd.metrics.listen")
        except BaseException:
            if api is not None:
                await api.stop()
            raise
    return HttpListeners(api, own, settings)


def _connect_app(settings: Settings, handlers: Mapping[str, Any]) -> ConnectApp:
    """Every unary RPC of memoryd.v2 and memoryd.v1 as a Connect procedure, over its wrapped
    handler; a memoryd.v1 path reads its request as the memoryd.v2 message it is routed to."""
    procedures = {}
    methods = contract.routed({contract.path(method): method for method in contract.methods()})
    for path, method in methods.items():
        if not (method.client_streaming or method.server_streaming):
            procedures[path] = Procedure(
                handlers[path].unary_unary, message_factory.GetMessageClass(method.input_type)
            )
    return ConnectApp(
        procedures,
        streaming=frozenset(handlers) - frozenset(procedures),
        max_request_bytes=settings.server.max_request_bytes,
        cors_origins=settings.http.origins,
    )
