"""The gRPC server: services, health, reflection, and an orderly stop.

On SIGTERM or SIGINT: health turns NOT_SERVING, new calls are refused, calls in flight get
`grace_period_seconds` to finish, then the writer commits what is queued and the database closes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import signal
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import grpc
from google.protobuf import descriptor_pool
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2_grpc

from memoryd import __version__
from memoryd.api import contract
from memoryd.api.access import declarations
from memoryd.api.auth import Authorizer
from memoryd.api.commitment import Commitments, committed_first
from memoryd.api.reflection import (
    V1_SERVICE_NAME,
    CommentedReflection,
    MethodAwarePool,
    add_v1_servicer_to_server,
    register_v1_descriptors,
)
from memoryd.api.registration import add_service, add_services
from memoryd.api.status import RpcLog, log_rpc_with_logging
from memoryd.config import ServerSettings, Settings, check_exposure, check_private_settings
from memoryd.config.reloading import Running
from memoryd.errors import StartupError
from memoryd.log_events import Event
from memoryd.observability import metrics, tracing
from memoryd.runtime import Runtime
from memoryd.serving.binding import bind_failure
from memoryd.serving.grpc_limits import GrpcLimits, ListenerLimits
from memoryd.serving.health_port import start_health_port
from memoryd.serving.listeners import start_http
from memoryd.serving.token_reloads import SettingsPipe, reload_on_hangup
from memoryd.serving.worker_role import WorkerRole

log = logging.getLogger("memoryd.server")

SERVICE_NAMES = contract.service_names()


async def serve(
    settings: Settings,
    *,
    stop: asyncio.Event | None = None,
    rpc_log: RpcLog = log_rpc_with_logging,
    env: Mapping[str, str] | None = None,
    worker: WorkerRole | None = None,
    running: Running | None = None,
) -> None:
    """Run until `stop` is set (or SIGTERM/SIGINT), then shut down in order. `worker`: this
    process is one of a supervisor's (memoryd.supervisor). `running`: what it runs of the
    config file, to reload its tokens from (SIGHUP, or the supervisor's pipe)."""
    check_exposure(settings)
    check_private_settings(settings)
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    # Installed for the whole run: a second signal while stopping must not cut the orderly stop
    # short (the grace period bounds it; SIGKILL remains for an impatient operator).
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, _request_stop, stop)
    if worker is not None:
        worker.stop_with_supervisor()
    tracing.configure(settings.tracing, version=__version__)
    metrics.RECORDING.on = settings.metrics.enabled
    metrics.BUILD.labels(__version__, settings.storage.backend).set(1)
    try:
        runtime = Runtime.open(settings, env or {}, lock_fd=worker.lock_fd if worker else None)
    except BaseException:
        tracing.shutdown()
        raise
    for missing in runtime.models.review.missing_keys(env or {}):
        log.warning(
            "the API key of provider %s is not set: its calls will be refused",
            missing,
            extra={"event": Event.PROVIDER_KEY_MISSING, "provider": missing},
        )
    try:
        await _serve(settings, runtime, stop, rpc_log, worker=worker, running=running)
    finally:
        await runtime.close()
        tracing.shutdown()
        _ignore_late_signals(loop)
        stats = runtime.writer.stats
        log.info(
            "stopped after %d write groups (%d calls, %d rows, %d retries)",
            stats.groups,
            stats.jobs,
            stats.rows,
            stats.retries,
            extra={"event": Event.STOPPED, "writer": dataclasses.asdict(stats)},
        )


def server_credentials(server: ServerSettings) -> grpc.ServerCredentials | None:
    """TLS credentials from [memoryd.server] tls_cert / tls_key (and tls_client_ca: a client
    must then present a certificate that CA signed); None for plain text."""
    if not server.tls_cert:
        return None

    def read(name: str) -> bytes:
        path = Path(getattr(server, name)).expanduser()
        try:
            return path.read_bytes()
        except OSError as error:
            raise StartupError(
                f"memoryd.server.{name}: cannot read {path}: {error.strerror}"
            ) from None

    client_ca = read("tls_client_ca") if server.tls_client_ca else None
    try:  # gRPC only finds out when it binds, and says "Failed to bind": check the pair first
        ssl.create_default_context().load_cert_chain(
            Path(server.tls_cert).expanduser(), Path(server.tls_key).expanduser()
        )
    except (ssl.SSLError, OSError) as error:
        raise StartupError(
            f"the TLS certificate or key cannot be used ({server.tls_cert}, {server.tls_key}): "
            f"{error}"
        ) from None
    try:
        return grpc.ssl_server_credentials(
            [(read("tls_key"), read("tls_cert"))],
            root_certificates=client_ca,
            require_client_auth=client_ca is not None,
        )
    except (RuntimeError, ValueError) as error:
        raise StartupError(f"the TLS certificate or key cannot be used: {error}") from None


def _ignore_late_signals(loop: asyncio.AbstractEventLoop) -> None:
    """Stopped: a SIGTERM, SIGINT or SIGHUP from now on is ignored. Closing the event loop
    would put back their default action, and a signal repeated in the moments before the
    process exits (an operator's second ^C, a supervisor's stop after its own SIGTERM, a
    reload) would then kill a server that had drained cleanly, and lose the last log lines with
    it."""
    # Ignored first, then forgotten by the loop: the loop's own removal puts the default action
    # back, and a signal in the moment before it was ignored again killed the process (a test
    # sending SIGTERM every millisecond through a stop met that moment in one full run).
    handlers = getattr(loop, "_signal_handlers", None)  # asyncio's Unix loop keeps them there
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
        if isinstance(handlers, dict):
            handlers.pop(signum, None)
        else:  # pragma: no cover - another loop: its removal, then ignored again
            loop.remove_signal_handler(signum)
            signal.signal(signum, signal.SIG_IGN)
    if isinstance(handlers, dict) and not handlers:
        signal.set_wakeup_fd(-1)  # as the loop's removal of its last handler does


def _request_stop(stop: asyncio.Event) -> None:
    if stop.is_set():
        log.info("already stopping", extra={"event": Event.STOP_REPEATED})
    stop.set()


def add_memoryd_services(
    server: grpc.aio.Server,
    settings: Settings,
    runtime: Runtime,
    rpc_log: RpcLog,
    commitments: Commitments | None = None,
) -> tuple[dict[str, grpc.RpcMethodHandler[Any, Any]], Authorizer | None]:
    """memoryd's own services, both versions' paths, on `server`, over the runtime's use cases:
    every handler wrapped (logged, counted; guarded when tokens are configured; a write refused
    on a read-only server; the headers of a write not safe to repeat sent by `commitments`
    before a stop could cut it). Returns the wrapped handlers by path (HTTP/JSON serves them)
    and the guard (None without tokens), whose tokens a reload replaces."""
    # Every RPC's declared access, read (and checked) whether tokens are configured or not. With
    # tokens, memoryd's own services are guarded by it; health and reflection stay open.
    access = contract.routed(declarations(contract.methods()))
    guard = Authorizer(settings.auth.tokens, access) if settings.auth.tokens else None
    read_only = settings.server.read_only
    writing = frozenset(path for path, item in access.items() if item.writes and read_only)
    handlers = add_services(
        server,
        ((service.register, service.servicer(runtime.services)) for service in contract.SERVICES),
        rpc_log,
        guard,
        refused=writing,
        commits=contract.routed(committed_first(contract.methods())),
        routes=contract.routes(),
        called=runtime.services.callers.called,
        commitments=commitments,
    )
    return handlers, guard


def grpc_server(server: ServerSettings, limits: GrpcLimits, *, shared: bool) -> grpc.aio.Server:
    """The main port's gRPC server, under its connection cap and deadlines; `shared` when a
    supervisor's workers listen on its port together."""
    return grpc.aio.server(
        options=[
            *limits.options(),
            ("grpc.max_receive_message_length", server.max_request_bytes),
            # Off for a server on its own: a second server could bind the same port and steal
            # half the calls. A supervisor's workers share its port (memoryd.supervisor).
            ("grpc.so_reuseport", 1 if shared else 0),
            # Long-lived streams (transcripts) stay open while idle: the server pings every
            # 60 s and gives up after 20 s without an answer; clients may ping every 10 s.
            ("grpc.keepalive_time_ms", 60_000),
            ("grpc.keepalive_timeout_ms", 20_000),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_recv_ping_interval_without_data_ms", 10_000),
            ("grpc.http2.max_pings_without_data", 0),
        ],
    )


def _bind(server: grpc.aio.Server, settings: ServerSettings) -> int:
    """Bind the main port (with TLS when configured); returns the port bound."""
    try:
        credentials = server_credentials(settings)
        if credentials is None:
            return server.add_insecure_port(settings.listen)
        return server.add_secure_port(settings.listen, credentials)
    except RuntimeError as error:
        raise StartupError(
            f"cannot listen on {settings.listen}: {bind_failure(settings.listen)}"
        ) from error


async def _serve(
    settings: Settings,
    runtime: Runtime,
    stop: asyncio.Event,
    rpc_log: RpcLog,
    *,
    worker: WorkerRole | None,
    running: Running | None,
) -> None:
    limits = ListenerLimits.for_process(settings.server)
    limits.log()
    server = grpc_server(settings.server, limits.main, shared=worker is not None)
    health_servicer = health.aio.HealthServicer()
    register_v1_descriptors()
    reflection_servicer = CommentedReflection(
        (*SERVICE_NAMES, health.SERVICE_NAME, V1_SERVICE_NAME, reflection.SERVICE_NAME),
        # Duck-typed: it forwards everything but method lookups to the default pool.
        pool=cast("descriptor_pool.DescriptorPool", MethodAwarePool()),
    )
    commitments = Commitments()
    handlers, guard = add_memoryd_services(server, settings, runtime, rpc_log, commitments)
    if running is not None:
        if worker is not None:
            SettingsPipe(worker.settings_fd).follow(running, guard)
        else:
            reload_on_hangup(running, guard)
    for register, servicer in (
        (health_pb2_grpc.add_HealthServicer_to_server, health_servicer),
        (reflection_pb2_grpc.add_ServerReflectionServicer_to_server, reflection_servicer),
        (add_v1_servicer_to_server, reflection_servicer),
    ):
        add_service(server, register, servicer, rpc_log)
    port = _bind(server, settings.server)
    # Bound before gRPC starts: a port that cannot be had stops the start before any call.
    listeners = await start_http(settings, handlers, runtime, guard)
    health_port = (
        await start_health_port(
            settings.server.health_listen,
            health_servicer,
            limits.health,
            shared=worker is not None,
        )
        if settings.server.health_listen
        else None
    )
    await server.start()
    names = ("", *SERVICE_NAMES, *((worker.health_name,) if worker else ()))
    for name in names:
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    host = settings.server.listen.rpartition(":")[0]
    address = f"{host}:{port}"
    log.info(
        "memoryd %s serving on %s (data in %s)",
        __version__,
        address,
        settings.home,
        extra={
            # A worker's own start; its supervisor logs `serving` when every worker serves.
            "event": Event.SERVING if worker is None else Event.WORKER_SERVING,
            "address": address,
            "home": str(settings.home),
            "database": runtime.database,
            "schema_version": runtime.schema_version,
            "tls": (
                "mutual"
                if settings.server.tls_client_ca
                else "on"
                if settings.server.tls_cert
                else "off"
            ),
            "tokens": len(settings.auth.tokens),
            **listeners.addresses(),
            **(
                {"health": f"{settings.server.health_listen.rpartition(':')[0]}:{health_port[1]}"}
                if health_port
                else {}
            ),
        },
    )
    await _start_background(settings, runtime, first=worker is None or worker.index == 0)
    # Files whose write after a commit failed follow their revision within seconds.
    healing = asyncio.create_task(runtime.services.prompts.keep_converged())
    if worker is not None:
        worker.report_ready()

    try:
        await stop.wait()
    finally:
        healing.cancel()
        # Before anything a client could see as the stop: gRPC's shutdown cancels what it has
        # not started, and a write it cuts must have its headers (memoryd.api.commitment).
        await commitments.drain()
        log.info(
            "stopping: refusing new calls, %.1fs for calls in flight",
            settings.server.grace_period_seconds,
            extra={"event": Event.STOPPING},
        )
        await health_servicer.enter_graceful_shutdown()
        # Idle streams would hold the whole grace period.
        runtime.services.transcripts.stop_streams()
        await runtime.services.scheduler.stop()
        await listeners.stop()
        await server.stop(settings.server.grace_period_seconds)
        if health_port is not None:
            await health_port[0].stop(0)


async def _start_background(settings: Settings, runtime: Runtime, *, first: bool) -> None:
    """The background writers (embeddings, scheduled reviews), unless the server is read-only;
    one line says what is off (the `first` worker's, of several)."""
    await runtime.services.embedding.start(
        background=not settings.server.read_only, lock=runtime.background
    )
    if first and not settings.realtime.persist_transcripts:
        log.info(
            "realtime transcripts are acknowledged but not stored (persisted: false in each "
            "acknowledgement): set memoryd.realtime.persist_transcripts = true "
            "(MEMORYD_REALTIME_PERSIST_TRANSCRIPTS=true) to keep voice conversations",
            extra={"event": Event.TRANSCRIPTS_NOT_STORED},
        )
    if settings.server.read_only:
        log.warning(
            "read-only: calls that write are refused, and reviews, compaction and embeddings "
            "do not run; searches use the vectors there are (memoryd.server.read_only = true)",
            extra={"event": Event.READ_ONLY},
        )
        return
    if runtime.services.reviewer.configured:
        # Started either way: a retune (UpdateReviewSettings) may enable it later.
        runtime.services.scheduler.start()
        if not runtime.services.scheduler.enabled:
            log.info(
                "background review is off (memoryd.memory.enabled = false, or no trigger is "
                "set): reviews run when asked (ReviewNow, `memoryd memory review`)",
                extra={"event": Event.BACKGROUND_REVIEW_OFF},
            )
        elif first and settings.memory.review_interval_hours == 0:
            log.warning(
                "memoryd.memory.review_interval_hours = 0 turns off the time trigger only: "
                "turns, idle conversations and passive turns still send messages to the model "
                "for review; memoryd.memory.enabled = false turns background review off",
                extra={"event": Event.REVIEW_INTERVAL_ONLY_OFF},
            )
        return
    log.warning(
        "no model provider is configured: messages, search and the memory rows you store "
        "work; learning facts (review) and compaction need a model. Connect one with "
        "`memoryd setup --base-url http://127.0.0.1:11434/v1 --model llama3.2` (Ollama; or "
        "any OpenAI-compatible URL), then restart",
        extra={"event": Event.NO_PROVIDER},
    )
