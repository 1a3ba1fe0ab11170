"""What every RPC reports, and the one error -> status mapping.

`STATUS` maps each memoryd error to its gRPC status (the only such mapping). A call's record
(`CallRecord`) ends it with the status its error maps to (any other exception becomes INTERNAL
with a reference id, the traceback logged under that id and never sent to the caller), and
reports one line per RPC (method, status, duration) to the RPC log, counts it in the metrics
(memoryd.observability.metrics) and, with tracing on, ends its server span. Every handler is
wrapped with it at registration (memoryd.api.registration).
"""

from __future__ import annotations

import logging
import secrets
import time
from typing import Protocol

import grpc

from memoryd.api import error_details
from memoryd.api.context import Context
from memoryd.errors import (
    Code,
    MemorydError,
    Reason,
)
from memoryd.log_events import Event
from memoryd.observability import metrics, tracing

log = logging.getLogger("memoryd.rpc")

STATUS: dict[Code, grpc.StatusCode] = {
    Code.INVALID_ARGUMENT: grpc.StatusCode.INVALID_ARGUMENT,
    Code.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    Code.UNAUTHENTICATED: grpc.StatusCode.UNAUTHENTICATED,
    Code.PERMISSION_DENIED: grpc.StatusCode.PERMISSION_DENIED,
    Code.FAILED_PRECONDITION: grpc.StatusCode.FAILED_PRECONDITION,
    Code.RESOURCE_EXHAUSTED: grpc.StatusCode.RESOURCE_EXHAUSTED,
    Code.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    Code.INTERNAL: grpc.StatusCode.INTERNAL,
}
# gRPC sends the message in a trailer; past 16 KiB of metadata the client reports
# RESOURCE_EXHAUSTED instead of the real status.
MAX_STATUS_MESSAGE_CHARS = 2048
# Load balancers poll health and tools browse reflection: logged at debug, not info.
QUIET_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")


class RpcLog(Protocol):
    """Where the per-RPC line goes: (logging level, method, status name, duration in ms, the
    caller's token fingerprint or "")."""

    def __call__(
        self, level: int, method: str, status: str, duration_ms: float, caller: str = ""
    ) -> None: ...


def log_rpc_with_logging(
    level: int, method: str, status: str, duration_ms: float, caller: str = ""
) -> None:
    """The plain RpcLog: a record on the memoryd.rpc logger."""
    if log.isEnabledFor(level):
        extra: dict[str, object] = {
            "event": Event.RPC,
            "method": method,
            "status": status,
            "duration_ms": duration_ms,
        }
        if caller:
            extra["token"] = caller
        log.log(level, "%s %s %.3fms", method, status, duration_ms, extra=extra)


def status_of(error: MemorydError) -> grpc.StatusCode:
    """The gRPC status of a memoryd error."""
    return STATUS[error.code]


class MethodMetrics:
    """One method's RPC metrics: its label values, made once."""

    __slots__ = ("_calls", "_durations")

    def __init__(self, method: str) -> None:
        service = method[1:].partition("/")[0]
        self._calls = {
            (status, transport): (service, method, status.name, transport)
            for status in grpc.StatusCode
            for transport in ("grpc", "http")
        }
        self._durations = {
            transport: (service, method, transport) for transport in ("grpc", "http")
        }

    def record(self, status: grpc.StatusCode, transport: str, seconds: float) -> None:
        metrics.RPCS.inc(self._calls[status, transport])
        metrics.RPC_SECONDS.observe(self._durations[transport], seconds)


class CallRecord:
    """Bookkeeping for one RPC: the status it ended with, the log line, its metrics and span."""

    __slots__ = ("caller", "level", "method", "metrics", "rpc_log", "span", "start", "status")

    def __init__(
        self, method: str, level: int, rpc_log: RpcLog, counted: MethodMetrics, context: Context
    ) -> None:
        self.method = method
        self.level = level
        self.rpc_log = rpc_log
        self.metrics = counted
        self.start = time.perf_counter()
        self.status = grpc.StatusCode.OK
        self.caller = ""
        self.span = (
            tracing.RpcSpan.start(method, context.invocation_metadata(), _transport(context))
            if tracing.enabled()
            else None
        )

    async def fail(self, context: Context, error: BaseException) -> None:
        """Abort the call with the status `error` maps to (raises grpc's AbortError)."""
        if isinstance(error, MemorydError):
            self.status = status_of(error)
            message = _bounded(error.message)
            details = error_details.of_error(self.status.value[0], message, error)
            await context.abort(self.status, message, ((error_details.TRAILER, details),))
        reference = secrets.token_hex(4)
        self.status = grpc.StatusCode.INTERNAL
        log.error(
            "unexpected error in %s (reference %s)",
            self.method,
            reference,
            exc_info=error,
            extra={"event": Event.RPC_ERROR, "method": self.method, "ref": reference},
        )
        message = f"internal error (reference {reference}); the server log has the details"
        details = error_details.status_details(
            self.status.value[0], message, Reason.INTERNAL, metadata={"reference": reference}
        )
        await context.abort(self.status, message, ((error_details.TRAILER, details),))

    def finish(self, context: Context) -> None:
        """Report the RPC's line."""
        if self.status == grpc.StatusCode.OK:
            self.status = context.code() or grpc.StatusCode.OK  # a handler may set_code itself
        seconds = time.perf_counter() - self.start
        self.rpc_log(
            self.level, self.method, self.status.name, round(seconds * 1000, 3), self.caller
        )
        if metrics.RECORDING.on:
            self.metrics.record(self.status, _transport(context), seconds)
        if self.span is not None:
            self.span.finish(self.status.name, self.status.value[0])


def _transport(context: Context) -> str:
    """The call's transport: grpc, or http for a call of memoryd.api.connect_http."""
    return getattr(context, "transport", "grpc")


def _bounded(message: str) -> str:
    """A status message short enough for any trailer. Messages quote client values clipped
    (memoryd.domain.quoting); this only guards against a message that forgot to."""
    if len(message) <= MAX_STATUS_MESSAGE_CHARS:
        return message
    return message[:MAX_STATUS_MESSAGE_CHARS] + f"... ({len(message):,} characters)"
