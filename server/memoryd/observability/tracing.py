"""OpenTelemetry traces ([memoryd.tracing]), off by default; exported over OTLP when on.

The spans: one per RPC (a server span, its parent taken from the caller's `traceparent`
metadata), and below it the writer job that commits the call's write, the query's embedding,
and a compaction the turn started. A review runs later, in the scheduler, as a child of the
turn that triggered it, with a `chat` span per model request (gen_ai attributes: provider,
model, tokens). Background embedding batches are spans of their own.

Names and attributes follow OpenTelemetry's semantic conventions: rpc.* for calls, gen_ai.* for
model calls and embeddings, and gen_ai.operation.name for memory operations
(`create_memory`, `search_memory`, `update_memory`, `delete_memory`). No span carries message
text, memory values, queries, owner or chat ids.

With tracing off, `span()` returns one shared null context: each call site costs a function
call, and opentelemetry is not even imported (it is the optional extra `memoryd[tracing]`).
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib.util
import random
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from memoryd.errors import StartupError

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer

    from memoryd.config.serving_settings import TracingSettings

_NULL: AbstractContextManager[None] = contextlib.nullcontext()
# Statuses that are the server's fault (OpenTelemetry's rule for gRPC server spans).
_SERVER_ERRORS = frozenset(
    {"UNKNOWN", "DEADLINE_EXCEEDED", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS"}
)
# The metadata keys of W3C trace context (the propagator OpenTelemetry uses by default).
_TRACE_HEADERS = frozenset({"traceparent", "tracestate"})
# gen_ai.operation.name of the memory RPCs.
MEMORY_OPERATIONS = {
    "StoreMemory": "create_memory",
    "UpdateMemory": "update_memory",
    "RestoreMemory": "update_memory",
    "ArchiveMemory": "delete_memory",
    "DeleteMemory": "delete_memory",
    "GetMemory": "search_memory",
    "ListMemories": "search_memory",
    "Recall": "search_memory",
    "SearchHistory": "search_memory",
}


class _Tracing:
    """The tracer and the OpenTelemetry functions the hot paths call, while tracing is on
    (imported once, at `configure`)."""

    __slots__ = (
        "attach",
        "current_span",
        "detach",
        "extract",
        "in_context",
        "kinds",
        "provider",
        "ratio",
        "status",
        "tracer",
    )

    def __init__(self) -> None:
        self.tracer: Tracer | None = None
        self.provider: Any = None
        self.ratio = 1.0
        self.attach: Any = None
        self.detach: Any = None
        self.extract: Any = None
        self.in_context: Any = None
        self.current_span: Any = None
        self.kinds: Any = None
        self.status: Any = None


_STATE = _Tracing()
# Set while a call whose trace was not sampled runs: the spans below it are not even made
# (the SDK's own unsampled span costs ~15 microseconds; this check, a fraction of one).
_UNSAMPLED: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "memoryd_unsampled", default=False
)


def configure(settings: TracingSettings, *, version: str, exporter: Any = None) -> None:
    """Turn tracing on per `settings` (nothing when it is off): a tracer provider with a batch
    processor exporting over OTLP/gRPC to `settings.otlp_endpoint` (or to `exporter`)."""
    if not settings.enabled:
        return
    if importlib.util.find_spec("opentelemetry.sdk") is None:
        raise StartupError(
            "memoryd.tracing.enabled is true, but OpenTelemetry is not installed: "
            "pip install 'memoryd[tracing]'"
        )
    from opentelemetry import context, propagate, trace  # noqa: PLC0415 - only with tracing on
    from opentelemetry.sdk.resources import Resource  # noqa: PLC0415
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: PLC0415
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased  # noqa: PLC0415

    if exporter is None:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # noqa: PLC0415
            OTLPSpanExporter,
        )

        exporter = OTLPSpanExporter(endpoint=settings.otlp_endpoint)
    provider = TracerProvider(
        resource=Resource.create(
            {"service.name": settings.service_name, "service.version": version}
        ),
        # Roots are sampled by memoryd itself, at `sample_ratio`, before any span is made (see
        # RpcSpan.start and span); a caller's sampled trace is followed.
        sampler=ParentBased(ALWAYS_ON),
    )
    provider.add_span_processor(BatchSpanProcessor(exporter))
    _STATE.provider = provider
    _STATE.ratio = settings.sample_ratio
    _STATE.attach = context.attach
    _STATE.detach = context.detach
    _STATE.extract = propagate.extract
    _STATE.in_context = trace.set_span_in_context
    _STATE.current_span = trace.get_current_span
    _STATE.kinds = trace.SpanKind
    _STATE.status = (trace.Status, trace.StatusCode)
    _STATE.tracer = trace.get_tracer("memoryd", version, tracer_provider=provider)


def shutdown() -> None:
    """Export what is buffered and stop (at server stop)."""
    provider = _STATE.provider
    _STATE.tracer = None
    _STATE.provider = None
    if provider is not None:
        provider.shutdown()


def enabled() -> bool:
    """Whether spans are being made."""
    return _STATE.tracer is not None


def span(
    name: str,
    attributes: Mapping[str, Any] | None = None,
    *,
    parent: Context | None = None,
    client: bool = False,
) -> AbstractContextManager[Span | None]:
    """A span around a block (the current one's child, or `parent`'s), ended with it, an
    exception recorded; `client`: a call to another service (a model provider). Nothing under
    a call whose trace is not sampled."""
    state = _STATE
    tracer = state.tracer
    if tracer is None:
        return _NULL
    if parent is None and (
        _UNSAMPLED.get()
        or (
            not state.current_span().get_span_context().is_valid  # a new trace's root
            and random.random() >= state.ratio  # noqa: S311 - sampling, not secrets
        )
    ):
        return _NULL
    kinds = state.kinds
    return tracer.start_as_current_span(
        name,
        context=parent,
        kind=kinds.CLIENT if client else kinds.INTERNAL,
        attributes=attributes,
    )


def current() -> Context | None:
    """The current trace context, to parent work that runs later elsewhere (None when off,
    or when the current call is not sampled)."""
    if _STATE.tracer is None or _UNSAMPLED.get():
        return None
    from opentelemetry import context  # noqa: PLC0415

    return context.get_current()


def annotate(target: Span | None, attributes: Mapping[str, Any]) -> None:
    """Set attributes on a span from `span()` (nothing when tracing is off)."""
    if target is not None:
        target.set_attributes(attributes)


class RpcSpan:
    """The server span of one RPC, current while its handler runs; or, for a call whose trace
    is not sampled, only the mark that keeps the spans below it from being made."""

    __slots__ = ("_span", "_token")

    def __init__(self, handle: Span | None, token: object) -> None:
        self._span = handle
        self._token = token

    @classmethod
    def start(
        cls, method: str, metadata: Iterable[tuple[str, Any]] | None, transport: str
    ) -> RpcSpan | None:
        """Start the span of `method` (`/package.Service/Method`), its parent from the
        caller's trace context in `metadata` (whose sampling decision it follows); without
        one, a new trace is sampled at `sample_ratio`. None when tracing is off."""
        state = _STATE
        tracer = state.tracer
        if tracer is None:
            return None
        carrier = {
            key: value
            for key, value in (metadata or ())
            if key in _TRACE_HEADERS and isinstance(value, str)
        }
        parent = state.extract(carrier) if carrier else None
        if parent is not None and not state.current_span(parent).get_span_context().is_valid:
            parent = None  # a malformed traceparent is no trace: it may not force one
        if parent is None and random.random() >= state.ratio:  # noqa: S311 - sampling, not secrets
            return cls(None, _UNSAMPLED.set(True))
        service, _, name = method.lstrip("/").partition("/")
        attributes: dict[str, Any] = {
            "rpc.system": "grpc" if transport == "grpc" else "connect_rpc",
            "rpc.service": service,
            "rpc.method": name,
        }
        operation = MEMORY_OPERATIONS.get(name)
        if operation is not None:
            attributes["gen_ai.operation.name"] = operation
        handle = tracer.start_span(
            method.lstrip("/"),
            context=parent,
            kind=state.kinds.SERVER,
            attributes=attributes,
        )
        if not handle.is_recording():  # the caller's trace is not sampled
            return cls(None, _UNSAMPLED.set(True))
        return cls(handle, state.attach(state.in_context(handle)))

    def finish(self, code: str, number: int) -> None:
        """End the span with the call's status; the context it made current is restored."""
        handle = self._span
        if handle is None:
            with contextlib.suppress(ValueError):  # a stream finished in another context
                _UNSAMPLED.reset(self._token)  # type: ignore[arg-type]
            return
        handle.set_attribute("rpc.grpc.status_code", number)
        if code in _SERVER_ERRORS:
            status, status_code = _STATE.status
            handle.set_status(status(status_code.ERROR, code))
        handle.end()
        _STATE.detach(self._token)
