"""Every unary RPC over HTTP/1.1 with JSON (or binary protobuf): the Connect protocol's unary
calls, as an ASGI application (`ConnectApp`) that `memoryd.http_listener` serves.

A call is `POST /memoryd.v2.ConversationService/AppendMessages` with `Content-Type:
application/json` and the request in protobuf's JSON mapping; the answer is 200 with the
response, or an error: the HTTP status of its code (the Connect protocol's table,
`HTTP_STATUS`) and a JSON body `{"code": "invalid_argument", "message": ..., "details":
[{"type": "google.rpc.ErrorInfo", "value": <base64>}]}`. `curl` and Connect's clients
(connect-web, connect-go, connect-python) speak it.

The handlers are the very ones gRPC calls (memoryd.api.registration wraps them once): the same
authentication (`Authorization: Bearer`), the same access rules, bounds, status mapping and RPC
log. `HttpContext` is this transport's servicer context: the request's headers as metadata,
and `abort` ending the call with its status. Streaming RPCs stay gRPC-only (404 here, saying
so). CORS answers only the origins configured in `[memoryd.http] cors_origins`.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

import grpc
from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from google.rpc import status_pb2

from memoryd.api import error_details
from memoryd.domain.digits import is_number
from memoryd.web.body import Disconnected, read_body

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
Unary = Callable[[Any, Any], Awaitable[Any]]

# The Connect protocol's HTTP status of each code.
HTTP_STATUS: dict[grpc.StatusCode, int] = {
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNKNOWN: 500,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.INTERNAL: 500,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DATA_LOSS: 500,
    grpc.StatusCode.UNAUTHENTICATED: 401,
}
JSON = "application/json"
# As gRPC's status messages (memoryd.api.status.MAX_STATUS_MESSAGE_CHARS).
MAX_MESSAGE_CHARS = 2048
PROTO = "application/proto"
CORS_HEADERS = (
    "authorization, content-type, connect-protocol-version, connect-timeout-ms, x-user-agent"
)


class Aborted(grpc.aio.AbortError):
    """A call ended by `HttpContext.abort` (an AbortError, so the handlers' wrapper lets it
    through as it does gRPC's own)."""

    def __init__(self, code: grpc.StatusCode, message: str, details: bytes | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details


class HttpContext:
    """The servicer context of one HTTP call, for the handlers (they use these three)."""

    # What the RPC metrics and spans call the transport (memoryd.api.status).
    transport = "http"

    def __init__(self, headers: list[tuple[str, str]]) -> None:
        self._metadata = tuple(headers)
        self._code: grpc.StatusCode | None = None

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    def code(self) -> grpc.StatusCode | None:
        return self._code

    async def send_initial_metadata(self, metadata: tuple[tuple[str, Any], ...]) -> None:
        """Nothing to do: an HTTP answer's headers go with its body, and no HTTP client retries
        (memoryd.api.commitment)."""

    async def abort(
        self,
        code: grpc.StatusCode,
        details: str = "",
        trailing_metadata: tuple[tuple[str, Any], ...] = (),
    ) -> None:
        self._code = code
        status = dict(trailing_metadata).get(error_details.TRAILER)
        raise Aborted(code, details, status if isinstance(status, bytes) else None)


class Procedure:
    """One unary RPC: its wrapped handler and its message classes."""

    def __init__(self, handler: Unary, request: type[Message]) -> None:
        self.handler = handler
        self.request = request


@dataclasses.dataclass(frozen=True, slots=True)
class _Call:
    """One admitted request: its RPC, its content type, headers and the CORS ones to answer."""

    procedure: Procedure
    kind: str
    headers: list[tuple[str, str]]
    found: dict[str, str]
    cors: list[tuple[bytes, bytes]]


class ConnectApp:
    """The ASGI application: `procedures` by path (`/package.Service/Method`)."""

    def __init__(
        self,
        procedures: Mapping[str, Procedure],
        *,
        streaming: frozenset[str],
        max_request_bytes: int,
        cors_origins: frozenset[str] = frozenset(),
    ) -> None:
        self._procedures = dict(procedures)
        self._streaming = streaming
        self._max_request_bytes = max_request_bytes
        self._cors = cors_origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        headers = [
            (name.decode("latin-1").lower(), value.decode("latin-1"))
            for name, value in scope.get("headers") or ()
        ]
        found = dict(headers)
        cors = self._cors_headers(found.get("origin", ""))
        if scope["method"] == "OPTIONS" and cors:
            await _answer(send, 204, [*cors, (b"access-control-max-age", b"7200")], b"")
            return
        path = scope.get("path", "")
        refusal = self._refusal(path, scope["method"], found)
        if refusal is not None:
            code, message, extra, status = refusal
            await _error(send, code, message, [*cors, *extra], status=status)
            return
        kind = found.get("content-type", "").split(";")[0].strip().lower()
        await self._call(_Call(self._procedures[path], kind, headers, found, cors), receive, send)

    def _refusal(
        self, path: str, method: str, found: dict[str, str]
    ) -> tuple[grpc.StatusCode, str, list[tuple[bytes, bytes]], int | None] | None:
        """Why a request is refused before its RPC runs: (code, message, headers, HTTP status
        when not the code's), or None."""
        if path not in self._procedures:
            if path in self._streaming:
                message = f"{path} is a streaming RPC: it is served over gRPC only"
            else:
                message = f"no unary RPC {path[:200]!r}"
            return grpc.StatusCode.UNIMPLEMENTED, message, [], 404
        if method != "POST":
            return grpc.StatusCode.UNIMPLEMENTED, "use POST", [(b"allow", b"POST")], 405
        kind = found.get("content-type", "").split(";")[0].strip().lower()
        if kind not in (JSON, PROTO):
            accepted = [(b"accept-post", f"{JSON}, {PROTO}".encode())]
            message = f"Content-Type must be {JSON} or {PROTO}, got {kind[:100] or 'none'!r}"
            return grpc.StatusCode.UNKNOWN, message, accepted, 415
        if found.get("content-encoding", "identity") != "identity":
            return (
                grpc.StatusCode.UNIMPLEMENTED,
                "compressed requests are not accepted",
                [],
                None,
            )
        return None

    async def _call(self, call: _Call, receive: Receive, send: Send) -> None:
        procedure, kind, cors = call.procedure, call.kind, call.cors
        try:
            body = await read_body(receive, self._max_request_bytes)
        except Disconnected:
            return  # no request arrived: nothing runs, nobody to answer
        if body is None:
            await _error(
                send,
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"the request is larger than the {self._max_request_bytes:,} bytes accepted "
                "(memoryd.server.max_request_bytes)",
                cors,
            )
            return
        try:
            request = _decode(procedure.request, kind, body)
        except (json_format.ParseError, DecodeError, ValueError, UnicodeDecodeError) as error:
            # In gRPC's words for the same bytes (memoryd.api.registration).
            message = (
                f"the request is not a valid protobuf message: {error}"
                if kind == PROTO
                else f"the request is not valid JSON of {procedure.request.DESCRIPTOR.full_name}: "
                f"{error}"
            )
            await _error(send, grpc.StatusCode.INVALID_ARGUMENT, message, cors)
            return
        try:
            timeout = _timeout(call.found.get("connect-timeout-ms"))
        except ValueError as error:
            await _error(send, grpc.StatusCode.INVALID_ARGUMENT, str(error), cors)
            return
        try:
            async with asyncio.timeout(timeout):
                response = await procedure.handler(request, HttpContext(call.headers))
        except Aborted as aborted:
            await _error(send, aborted.code, aborted.message, cors, details=aborted.details)
            return
        except TimeoutError:
            await _error(send, grpc.StatusCode.DEADLINE_EXCEEDED, "the deadline passed", cors)
            return
        payload = (
            response.SerializeToString()
            if kind == PROTO
            else json_format.MessageToJson(response, indent=None).encode()
        )
        await _answer(send, 200, [*cors, (b"content-type", kind.encode())], payload)

    def _cors_headers(self, origin: str) -> list[tuple[bytes, bytes]]:
        if not origin or origin not in self._cors:
            return []
        return [
            (b"access-control-allow-origin", origin.encode()),
            (b"vary", b"Origin"),
            (b"access-control-allow-methods", b"POST, OPTIONS"),
            (b"access-control-allow-headers", CORS_HEADERS.encode()),
        ]


def _decode(kind_of: type[Message], content_type: str, body: bytes) -> Message:
    if content_type == PROTO:
        return kind_of.FromString(body)
    return json_format.Parse(body.decode("utf-8") or "{}", kind_of())


def _timeout(header: str | None) -> float | None:
    if header is None:
        return None
    if not is_number(header) or len(header) > 10:
        raise ValueError(f"Connect-Timeout-Ms must be at most 10 digits, got {header[:20]!r}")
    return int(header) / 1000


async def _answer(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _error(
    send: Send,
    code: grpc.StatusCode,
    message: str,
    headers: list[tuple[bytes, bytes]],
    *,
    status: int | None = None,
    details: bytes | None = None,
) -> None:
    """A Connect error: `code`'s HTTP status and the JSON body, with the details memoryd
    attaches to every refusal (google.rpc.ErrorInfo, BadRequest)."""
    if len(message) > MAX_MESSAGE_CHARS:  # a parser's message may quote the request
        message = message[:MAX_MESSAGE_CHARS] + f"... ({len(message):,} characters)"
    document: dict[str, Any] = {"code": code.name.lower(), "message": message}
    if details:
        parsed = status_pb2.Status.FromString(details)
        document["details"] = [
            {
                "type": item.type_url.rpartition("/")[2],
                "value": base64.b64encode(item.value).decode().rstrip("="),
            }
            for item in parsed.details
        ]
    await _answer(
        send,
        status or HTTP_STATUS[code],
        [*headers, (b"content-type", JSON.encode())],
        json.dumps(document, ensure_ascii=False).encode(),
    )
