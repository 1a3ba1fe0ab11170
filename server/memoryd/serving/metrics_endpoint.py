"""/metrics: the Prometheus exposition of memoryd.observability.metrics, as an ASGI
application in front of another (the HTTP/JSON API on its port) or alone (a metrics port).

With tokens configured, a scrape needs an admin token: counts of calls and reviews say how
the service is used, which is the operator's to see. The scrape-time gauges are read first
(memoryd.serving.levels).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client.exposition import choose_encoder

from memoryd.api.auth import Authorizer
from memoryd.errors import Unauthenticated
from memoryd.observability import metrics

log = logging.getLogger("memoryd.metrics")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]
PATH = "/metrics"


class MetricsApp:
    """Serves GET /metrics; any other path goes to `inner` (404 without one)."""

    def __init__(
        self, refresh: Callable[[], Awaitable[None]], guard: Authorizer | None, inner: Asgi | None
    ) -> None:
        self._refresh = refresh
        self._guard = guard
        self._inner = inner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") != PATH:
            if self._inner is not None:
                await self._inner(scope, receive, send)
            elif scope["type"] == "http":
                await _answer(send, 404, "text/plain", b"not found: this port serves /metrics\n")
            return
        if scope["method"] != "GET":
            await _answer(send, 405, "text/plain", b"/metrics answers GET\n", allow=b"GET")
            return
        headers = [
            (key.decode("latin-1").lower(), value.decode("latin-1"))
            for key, value in scope.get("headers", ())
        ]
        refusal = self._refusal(headers)
        if refusal is not None:
            status, message = refusal
            await _answer(send, status, "text/plain", message.encode() + b"\n")
            return
        await self._refresh()
        encoder, content_type = choose_encoder(dict(headers).get("accept", ""))
        body = encoder(metrics.REGISTRY)
        await _answer(send, 200, content_type, body)

    def _refusal(self, headers: list[tuple[str, str]]) -> tuple[int, str] | None:
        if self._guard is None:
            return None
        try:
            caller = self._guard.caller(headers)
        except Unauthenticated as error:
            return 401, error.message
        if caller.role != "admin":
            return 403, '/metrics needs an admin token ([[memoryd.auth.tokens]] role = "admin")'
        return None


async def _answer(
    send: Send, status: int, content_type: str, body: bytes, *, allow: bytes | None = None
) -> None:
    headers = [
        (b"content-type", content_type.encode()),
        (b"content-length", str(len(body)).encode()),
    ]
    if allow is not None:
        headers.append((b"allow", allow))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
