"""The one choke point between handlers and the wire: error -> status mapping, and RPC logs.

Every RPC passes through `RpcInterceptor`, which

- maps each memoryd error to its status (the table below is the only such mapping);
- answers requests that are not valid protobuf (bad UTF-8 in a string, truncated bytes) with
  INVALID_ARGUMENT instead of grpc's default INTERNAL;
- turns any other exception into INTERNAL with a reference id, logging the traceback under that
  id and never sending it to the caller;
- logs one structured line per RPC: method, status, duration (through the queue handler set up
  by memoryd.logs, so formatting and I/O happen off the event loop).
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from memoryd.errors import Code, InvalidArgument, MemorydError

log = logging.getLogger("memoryd.rpc")
Context = grpc.aio.ServicerContext[Any, Any]

STATUS: dict[Code, grpc.StatusCode] = {
    Code.INVALID_ARGUMENT: grpc.StatusCode.INVALID_ARGUMENT,
    Code.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    Code.ALREADY_EXISTS: grpc.StatusCode.ALREADY_EXISTS,
    Code.FAILED_PRECONDITION: grpc.StatusCode.FAILED_PRECONDITION,
    Code.RESOURCE_EXHAUSTED: grpc.StatusCode.RESOURCE_EXHAUSTED,
    Code.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    Code.INTERNAL: grpc.StatusCode.INTERNAL,
}
# Load balancers poll health and tools browse reflection: logged at debug, not info.
QUIET_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")


def status_of(error: MemorydError) -> grpc.StatusCode:
    """The gRPC status of a memoryd error."""
    return STATUS[error.code]


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


class _Call:
    """Bookkeeping for one RPC: the status it ended with and the log line."""

    def __init__(self, method: str) -> None:
        self.method = method
        self.start = time.perf_counter()
        self.code = grpc.StatusCode.OK

    async def fail(self, context: Context, error: BaseException) -> None:
        """Abort the call with the status `error` maps to (raises grpc's AbortError)."""
        if isinstance(error, MemorydError):
            self.code = status_of(error)
            await context.abort(self.code, error.message)
        reference = secrets.token_hex(4)
        self.code = grpc.StatusCode.INTERNAL
        log.error(
            "unexpected error in %s (reference %s)",
            self.method,
            reference,
            exc_info=error,
            extra={"event": "rpc_error", "method": self.method, "ref": reference},
        )
        await context.abort(
            self.code, f"internal error (reference {reference}); the server log has the details"
        )

    def finish(self, context: Context) -> None:
        """Emit the RPC's log line."""
        if self.code == grpc.StatusCode.OK:
            self.code = context.code() or grpc.StatusCode.OK  # a handler may set_code itself
        level = logging.DEBUG if self.method.startswith(QUIET_PREFIXES) else logging.INFO
        if log.isEnabledFor(level):
            duration_ms = round((time.perf_counter() - self.start) * 1000, 3)
            log.log(
                level,
                "%s %s %.3fms",
                self.method,
                self.code.name,
                duration_ms,
                extra={
                    "event": "rpc",
                    "method": self.method,
                    "status": self.code.name,
                    "duration_ms": duration_ms,
                },
            )


def _check_request(request: Any) -> None:
    if isinstance(request, _Undecodable):
        raise InvalidArgument(f"the request is not a valid protobuf message: {request.reason}")


class RpcInterceptor(grpc.aio.ServerInterceptor):
    """Wraps every handler with the error mapping and the RPC log line."""

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler: Any = await continuation(handler_call_details)
        if handler is None:
            return None
        method: str = handler_call_details.method
        unary_request = not handler.request_streaming
        for kind in ("unary_unary", "unary_stream", "stream_unary", "stream_stream"):
            behavior = getattr(handler, kind)
            if behavior is not None:
                handler = handler._replace(**{kind: _wrap(method, behavior, unary_request)})
        if unary_request:
            handler = handler._replace(request_deserializer=_tolerant(handler.request_deserializer))
        wrapped: grpc.RpcMethodHandler[Any, Any] = handler
        return wrapped


def _wrap(method: str, behavior: Any, unary_request: bool) -> Any:  # noqa: FBT001
    """The same bookkeeping around a coroutine handler or an async-generator handler."""
    if inspect.isasyncgenfunction(behavior):

        async def stream(request: Any, context: Context) -> AsyncIterator[Any]:
            call = _Call(method)
            try:
                if unary_request:
                    _check_request(request)
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
        call = _Call(method)
        try:
            if unary_request:
                _check_request(request)
            return await behavior(request, context)
        except (grpc.aio.AbortError, grpc.aio.UsageError):
            raise
        except Exception as error:  # noqa: BLE001 - the one place any error becomes a status
            await call.fail(context, error)
        finally:
            call.finish(context)

    return unary
