"""The one choke point between handlers and the wire: every service is registered through
`add_services`, which wraps each of its handlers once, at start-up, so that every RPC

- maps each memoryd error to its status (memoryd.api.status, the only such mapping);
- answers requests that are not valid protobuf (bad UTF-8 in a string, truncated bytes) with
  INVALID_ARGUMENT instead of grpc's default INTERNAL;
- refuses to send an answer larger than a default client accepts (RESOURCE_EXHAUSTED);
- turns any other exception into INTERNAL with a reference id (memoryd.api.status);
- with tokens configured, authenticates the caller and admits its request (memoryd.api.auth),
  every message of a client stream included;
- on a read-only server, refuses the calls that write (FAILED_PRECONDITION);
- reports one line per RPC to the RPC log, the metrics and its span (memoryd.api.status);
- marks each call, and each message of a client stream, with `called` (the background embedder
  yields while calls come: memoryd.services.pacing).

Wrapping at registration rather than in a grpc.aio server interceptor matters for speed: an
interceptor runs as an extra coroutine per call and rebuilds the handler each time, which cost
10-15% of AppendMessages throughput.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any, Protocol

import grpc
from google.protobuf.message import DecodeError

from memoryd.api.auth import Authorizer
from memoryd.api.commitment import Commitments, Commits
from memoryd.api.context import Context
from memoryd.api.status import (
    QUIET_PREFIXES,
    CallRecord,
    MethodMetrics,
    RpcLog,
    log_rpc_with_logging,
)
from memoryd.domain.answers import MAX_ANSWER_BYTES
from memoryd.errors import (
    FailedPrecondition,
    InvalidArgument,
    Reason,
    ResourceExhausted,
)


class _Registrar:
    """Stands in for the server while a generated add_*_to_server registers its handlers."""

    def __init__(self) -> None:
        self.services: dict[str, dict[str, grpc.RpcMethodHandler[Any, Any]]] = {}

    def add_registered_method_handlers(
        self, name: str, handlers: dict[str, grpc.RpcMethodHandler[Any, Any]]
    ) -> None:
        self.services[name] = handlers

    def add_generic_rpc_handlers(self, handlers: object) -> None:
        """The generated code registers the same handlers both ways; the dict is enough."""


READ_ONLY = (
    "memoryd is read-only (memoryd.server.read_only = true): calls that write are refused "
    "until it is turned off and the server restarted; reads work"
)


def add_service(
    server: grpc.aio.Server,
    register: Callable[[Any, Any], None],
    servicer: object,
    rpc_log: RpcLog = log_rpc_with_logging,
    guard: Authorizer | None = None,
) -> dict[str, grpc.RpcMethodHandler[Any, Any]]:
    """Register one servicer with its generated `register` function, every handler wrapped
    (add_services, with no guard: health and reflection)."""
    return add_services(server, ((register, servicer),), rpc_log, guard)


def add_services(
    server: grpc.aio.Server,
    registrations: Iterable[tuple[Callable[[Any, Any], None], object]],
    rpc_log: RpcLog = log_rpc_with_logging,
    guard: Authorizer | None = None,
    *,
    refused: frozenset[str] = frozenset(),
    commits: Mapping[str, Commits] | None = None,
    routes: Mapping[str, str] | None = None,
    called: Callable[[], None] = lambda: None,
    commitments: Commitments | None = None,
) -> dict[str, grpc.RpcMethodHandler[Any, Any]]:
    """Register each servicer with its generated `register` function, every handler wrapped;
    with a `guard`, every call is authenticated and its request admitted first; a method in
    `refused` (the writing ones of a read-only server) then answers FAILED_PRECONDITION. A
    request that `commits` says is not safe to repeat runs through `commitments`, which send
    its response headers before a stop could cut it (memoryd.api.commitment). Each path of
    `routes` (memoryd.v1's) is served by the handler of the path it names, wrapped under its
    own path: logged, counted and guarded as itself. Returns the wrapped handlers by path
    (`/package.Service/Method`), for other transports."""
    registrar = _Registrar()
    committed = commitments or Commitments()
    for register, servicer in registrations:
        register(servicer, registrar)
    raw = {
        f"/{service}/{method}": handler
        for service, handlers in registrar.services.items()
        for method, handler in handlers.items()
    }
    for legacy, current in (routes or {}).items():
        raw[legacy] = raw[current]
    by_service: dict[str, dict[str, grpc.RpcMethodHandler[Any, Any]]] = {}
    for path, handler in raw.items():
        service, _, method = path[1:].partition("/")
        by_service.setdefault(service, {})[method] = _wrap_handler(
            path,
            handler,
            rpc_log,
            guard,
            refused=path in refused,
            commits=(commits or {}).get(path),
            called=called,
            commitments=committed,
        )
    every = {
        f"/{service}/{method}": handler
        for service, wrapped in by_service.items()
        for method, handler in wrapped.items()
    }
    server.add_generic_rpc_handlers((Paths(every),))
    return every


class Paths(grpc.GenericRpcHandler):
    """Finds a call's handler by its path in one lookup.

    Registered as a generic handler only, never with `add_registered_method_handlers`: grpc.aio's
    server keeps one pending request per registered method and passes all of them to
    `asyncio.wait` for every call it accepts, so each call paid for every method served (about
    95, with memoryd.v1's paths, health and reflection). Without them it waits on one request.
    On AppendMessages that was 50 to 110 µs of CPU a call (bench/append_throughput.py)."""

    def __init__(self, handlers: Mapping[str, grpc.RpcMethodHandler[Any, Any]]) -> None:
        self._handlers = dict(handlers)

    def service(
        self, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        return self._handlers.get(handler_call_details.method)


@dataclasses.dataclass(frozen=True, slots=True)
class _Undecodable:
    """Stands in for a request that could not be parsed, so the handler can refuse it."""

    reason: str


def _tolerant(deserialize: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    if deserialize is None:
        return None

    def parse(data: bytes) -> Any:
        try:
            return deserialize(data)
        except (DecodeError, ValueError, UnicodeDecodeError) as error:
            return _Undecodable(str(error) or type(error).__name__)

    return parse


def _check_request(request: Any) -> None:
    if isinstance(request, _Undecodable):
        raise InvalidArgument(f"the request is not a valid protobuf message: {request.reason}")


async def _checked(
    requests: AsyncIterator[Any], admit: Admission | None, called: Callable[[], None]
) -> AsyncIterator[Any]:
    """A client stream whose messages are refused, in order, when one cannot be parsed (or, with
    tokens, is not admitted: each later message as part of what the first one opened); each
    message marked with `called`."""
    opened: frozenset[str] | None = None
    async for request in requests:
        called()
        _check_request(request)
        if admit is not None:
            agents = admit(request, opened)
            opened = agents if opened is None else opened
        yield request


class Admission(Protocol):
    """The check a call's requests go through: the agents a request is admitted for; a client
    stream's later messages are checked with those of its first (`opened`)."""

    def __call__(self, request: Any, opened: frozenset[str] | None = None) -> frozenset[str]: ...


def _admission(
    guard: Authorizer | None, method: str, call: CallRecord, context: Context, *, refused: bool
) -> Admission | None:
    """Authenticate the call, then refuse it if its method is refused; the check each of its
    requests then goes through (None: no tokens are configured, every call is admitted)."""
    admit: Admission | None = None
    if guard is not None:
        caller = guard.caller(context.invocation_metadata())
        call.caller = caller.fingerprint

        def admit(request: Any, opened: frozenset[str] | None = None) -> frozenset[str]:
            return guard.admit(caller, method, request, opened)

    if refused:
        raise FailedPrecondition(READ_ONLY, reason=Reason.READ_ONLY)
    return admit


def _readable(response: Any) -> Any:
    """The last guard of "no answer a default client cannot read": lists are cut by size where
    they are built (memoryd.domain.answers); this refuses anything that still got through."""
    size = response.ByteSize()  # 0.2 microseconds for a small answer
    if size > MAX_ANSWER_BYTES:
        raise ResourceExhausted(
            f"the answer would be {size:,} bytes, more than the {MAX_ANSWER_BYTES:,} a gRPC "
            "client accepts by default; ask for less (a smaller page_size or limit)"
        )
    return response


def _wrap_handler(
    method: str,
    handler: grpc.RpcMethodHandler[Any, Any],
    rpc_log: RpcLog,
    guard: Authorizer | None,
    *,
    refused: bool,
    commits: Commits | None,
    called: Callable[[], None],
    commitments: Commitments,
) -> grpc.RpcMethodHandler[Any, Any]:
    replaced: Any = handler
    unary_request = not handler.request_streaming
    level = logging.DEBUG if method.startswith(QUIET_PREFIXES) else logging.INFO
    for kind in ("unary_unary", "unary_stream", "stream_unary", "stream_stream"):
        behavior = getattr(handler, kind)
        if behavior is not None:
            wrapped = _wrap(
                method,
                behavior,
                level,
                rpc_log,
                guard=guard,
                unary_request=unary_request,
                refused=refused,
                commits=commits,
                called=called,
                commitments=commitments,
            )
            replaced = replaced._replace(**{kind: wrapped})
    replaced = replaced._replace(request_deserializer=_tolerant(handler.request_deserializer))
    result: grpc.RpcMethodHandler[Any, Any] = replaced
    return result


def _wrap(
    method: str,
    behavior: Any,
    level: int,
    rpc_log: RpcLog,
    *,
    guard: Authorizer | None,
    unary_request: bool,
    refused: bool,
    commits: Commits | None = None,
    called: Callable[[], None],
    commitments: Commitments,
) -> Any:
    """The same bookkeeping around a coroutine handler or an async-generator handler."""
    counted = MethodMetrics(method)

    def admitted(request: Any, call: CallRecord, context: Context) -> Any:
        """The request once admitted: the caller's token and the read-only switch, then a
        unary request's checks (a stream's are applied to each message as it is read)."""
        admit = _admission(guard, method, call, context, refused=refused)
        if not unary_request:
            return _checked(request, admit, called)
        _check_request(request)
        if admit is not None:
            admit(request)
        return request

    if inspect.isasyncgenfunction(behavior):

        async def stream(request: Any, context: Context) -> AsyncIterator[Any]:
            called()
            call = CallRecord(method, level, rpc_log, counted, context)
            try:
                request = admitted(request, call, context)
                async for response in behavior(request, context):
                    yield response
            except (grpc.aio.AbortError, grpc.aio.UsageError):
                raise
            except Exception as error:  # noqa: BLE001 - the one place any error becomes a status
                await call.fail(context, error)
            finally:
                call.finish(context)

        return stream

    async def unary(request: Any, context: Context) -> Any:
        called()
        call = CallRecord(method, level, rpc_log, counted, context)
        try:
            request = admitted(request, call, context)
            if commits is not None and commits(request):
                response = await commitments.run(context, lambda: behavior(request, context))
            else:
                response = await behavior(request, context)
            return _readable(response)
        except (grpc.aio.AbortError, grpc.aio.UsageError):
            raise
        except Exception as error:  # noqa: BLE001 - the one place any error becomes a status
            await call.fail(context, error)
        finally:
            call.finish(context)

    return unary
