"""The sections of how memoryd serves: [memoryd.server] (the gRPC listener, its TLS, limits and
workers), [memoryd.storage] (the database), [memoryd.http] (HTTP/JSON, the console), and
[memoryd.metrics] and [memoryd.tracing]. Each checks its own rules (`validate`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from memoryd.config.secrets import mask_dsn, mask_url
from memoryd.config.section import (
    MAX_WORKERS,
    MIB,
    Section,
    check_listen,
    is_host_name,
)
from memoryd.errors import StartupError


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ServerSettings(Section):
    """[memoryd.server]: the gRPC listener and process behaviour."""

    # The address to serve on, HOST:PORT (`--listen`). A non-loopback address needs tokens and
    # TLS, or `insecure`.
    listen: str = "127.0.0.1:50051"
    # A second gRPC address, always plaintext, that serves only grpc.health.v1 with the same
    # statuses as `listen`: for probes that cannot present TLS or a token (Kubernetes' gRPC
    # probes, a container's HEALTHCHECK). It says only whether memoryd serves, so it may listen
    # beyond loopback without tokens or TLS. Empty: off.
    health_listen: str = ""
    # On SIGTERM or SIGINT, how long calls in flight get to finish.
    grace_period_seconds: float = 10.0
    # The most gRPC connections open at once on `listen`, per process; beyond it a new
    # connection is closed at once (the client retries). 0: half of the open-file limit less a
    # reserve and the health port's share (HTTP has the other half), so that connections never
    # take the descriptors the database and the model need; a larger value is lowered to that.
    max_connections: int = 0
    # A connection must finish its TLS handshake and open HTTP/2 within this many seconds of
    # being accepted, or it is closed.
    handshake_timeout_seconds: float = 10.0
    # A connection with no call in progress for this many seconds is closed (GOAWAY: a client
    # connects again for its next call, without an error).
    idle_timeout_seconds: float = 300.0
    # The largest request accepted (4 MiB, gRPC's usual limit). Answers never pass 4 MiB,
    # whatever this is (memoryd.domain.answers).
    max_request_bytes: int = 4 * MIB
    # Read-only connections, each on its own thread, so reads never block the event loop.
    reader_threads: int = 4
    # Server processes sharing the address and the store (`memoryd serve --workers N`): one
    # process is bounded by one interpreter lock. 1: a single process, no supervisor.
    workers: int = 1
    # Structured logs on stderr: the lowest level written, and one JSON object per line or text.
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["json", "text"] = "json"
    # How log lines name agents, owners and conversations: as adapters do ("plain"), or as keyed
    # hashes ("hashed"), so that an erased owner's ids are not left in the log (memoryd.log_names).
    log_identifiers: Literal["plain", "hashed"] = "plain"
    # Serve a non-loopback address without tokens (anyone who can reach it may read and erase
    # everything), or with tokens but without TLS (tokens and content travel in clear text):
    # `memoryd serve --insecure`. Off: such a start is refused.
    insecure: bool = False
    # TLS: the server's certificate chain and key (PEM files). With tls_client_ca, clients must
    # present a certificate signed by that CA (mutual TLS).
    tls_cert: str = ""
    tls_key: str = ""
    tls_client_ca: str = ""
    # Refuse every call that writes (FAILED_PRECONDITION, saying so) and run no background
    # writer (reviews, compaction, embeddings), for demos, evaluations and maintenance windows.
    # Reads keep working.
    read_only: bool = False

    def validate(self) -> None:
        """The address is HOST:PORT; TLS files go together and exist."""
        check_listen(self.listen, "memoryd.server.listen")
        if self.health_listen:
            check_listen(self.health_listen, "memoryd.server.health_listen")
        if not 1 <= self.workers <= MAX_WORKERS:
            raise StartupError(f"memoryd.server.workers is {self.workers}: from 1 to {MAX_WORKERS}")
        for name in ("handshake_timeout_seconds", "idle_timeout_seconds"):
            if not 0 < getattr(self, name) <= 86_400:
                raise StartupError(
                    f"memoryd.server.{name} must be more than 0 and at most 86400 (a day), got "
                    f"{getattr(self, name)}"
                )
        if bool(self.tls_cert) != bool(self.tls_key):
            raise StartupError(
                "memoryd.server.tls_cert and tls_key go together: set both or neither"
            )
        if self.tls_client_ca and not self.tls_cert:
            raise StartupError(
                "memoryd.server.tls_client_ca needs tls_cert and tls_key (mutual TLS is TLS first)"
            )
        for name in ("tls_cert", "tls_key", "tls_client_ca"):
            value = getattr(self, name)
            if value and not Path(value).expanduser().is_file():
                raise StartupError(f"memoryd.server.{name}: {value} is not a readable file")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class StorageSettings(Section):
    """[memoryd.storage]: the database (SQLite in the data directory, or PostgreSQL), its
    connection policy, and the group-committing writer."""

    # Where memoryd keeps everything: "sqlite" (memoryd.db in the data directory) or "postgres"
    # (the database named by dsn or dsn_env; PostgreSQL 17 or later, with pg_trgm).
    backend: Literal["sqlite", "postgres"] = "sqlite"
    # PostgreSQL's connection string (libpq keywords or a postgresql:// URI). A password does
    # not belong here: use dsn_env, a ~/.pgpass file or PGPASSWORD (a config file holding one
    # must be readable by its owner only; it is masked wherever settings are shown).
    dsn: str = dataclasses.field(default="", metadata={"secret": mask_dsn})
    # The environment variable that holds the connection string instead (the usual way: it may
    # carry a password, and memoryd never logs it).
    dsn_env: str = ""
    # A file holding PostgreSQL's password alone (a container's mounted secret), readable by
    # memoryd's user only; it takes the place of a password in the connection string.
    password_file: str = ""
    # PostgreSQL connections for reads, each on its own thread (the writer has one more).
    pool_size: int = 4
    # The longest one PostgreSQL statement may run before it is cancelled (0: no limit).
    statement_timeout_ms: int = 30_000
    # SQLite's durability: "normal" survives a crash of memoryd (WAL), "full" also power loss.
    synchronous: Literal["normal", "full"] = "normal"
    # How long a connection waits for a lock before its attempt fails.
    busy_timeout_ms: int = 5000
    # The most rows one transaction of the writer commits for the writes queued together.
    group_commit_max_rows: int = 512
    # How long the writer lingers for more writes before it commits a group (0: not at all).
    group_commit_max_wait_ms: float = 0.0
    # Attempts of a write that fails transiently (busy, locked, I/O, disk full), then
    # UNAVAILABLE; at most 10.
    write_attempts: int = 3
    # The pause before the next attempt, growing with each.
    write_retry_delay_ms: int = 100
    # Erased rows are overwritten in the database file, not only unlinked.
    secure_delete: bool = True

    def validate(self) -> None:
        """A bounded number of write attempts; PostgreSQL is named exactly once."""
        if self.write_attempts > 10:
            raise StartupError("memoryd.storage.write_attempts must be at most 10")
        if self.backend == "postgres" and bool(self.dsn) == bool(self.dsn_env):
            raise StartupError(
                'memoryd.storage.backend = "postgres" needs the database: set dsn_env (the '
                "variable holding the connection string) or dsn, not both"
            )
        if self.backend == "sqlite" and (self.dsn or self.dsn_env or self.password_file):
            raise StartupError(
                'memoryd.storage.dsn, dsn_env and password_file are for backend = "postgres"; '
                "the SQLite database is memoryd.db in the data directory"
            )


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class HttpSettings(Section):
    """[memoryd.http]: every unary RPC over HTTP/1.1 with JSON as well (the Connect protocol),
    on a port of its own, under the same tokens and TLS as gRPC."""

    # HOST:PORT to serve HTTP on; empty: off. A non-loopback address needs what gRPC's does
    # (tokens and TLS, or `insecure`).
    listen: str = ""
    # Browser origins allowed to call (CORS), comma-separated, e.g.
    # "https://console.example.com"; empty: no cross-origin calls.
    cors_origins: str = ""
    # The web console at /console on the same port: sign in with a token; it calls the API
    # above with that token's rights (a session cookie and a CSRF token).
    console: bool = True
    # How long a console session lasts without a request, in minutes.
    console_idle_minutes: int = 720
    # Names, beyond the listen address's own, that requests may be addressed to (their Host
    # header), comma-separated: a reverse proxy's or a DNS name's. A leading dot takes every
    # name below it (".example.com"). A loopback address also answers to localhost, 127.0.0.1
    # and [::1]; a wildcard one (0.0.0.0) to any IP address. Any other Host is refused (421):
    # a web page that rebinds its own name to this address cannot reach the API. Applies to
    # the metrics' own port too.
    allowed_hosts: str = ""
    # A request's line and headers must arrive within this many seconds of the connection's
    # start (or of the first byte of a later request on the same connection); 408 otherwise.
    header_timeout_seconds: float = 10.0
    # A request's body must arrive within this many seconds of its headers, and an answer the
    # client does not read is given up after as long.
    body_timeout_seconds: float = 30.0
    # A connection with no request in progress is closed after this many seconds.
    idle_timeout_seconds: float = 30.0
    # The most HTTP connections open at once, all HTTP listeners together; beyond it, new ones
    # wait in the kernel's queue. 0: half of the open-file limit (less a reserve), so that
    # gRPC and the database keep the rest; a larger value is lowered to that.
    max_connections: int = 0

    def validate(self) -> None:
        """The address is HOST:PORT; each origin is scheme://host[:port]; timeouts are
        positive."""
        if self.listen:
            check_listen(self.listen, "memoryd.http.listen")
        for name in ("header_timeout_seconds", "body_timeout_seconds", "idle_timeout_seconds"):
            if not 0 < getattr(self, name) <= 3600:
                raise StartupError(
                    f"memoryd.http.{name} must be more than 0 and at most 3600, got "
                    f"{getattr(self, name)}"
                )
        for name in self.hosts:
            if not is_host_name(name):
                raise StartupError(
                    f"memoryd.http.allowed_hosts: {name!r} is not a host name (a name such as "
                    "memory.example.com, .example.com for every name below it, or an address)"
                )
        if not 1 <= self.console_idle_minutes <= 7 * 24 * 60:
            raise StartupError(
                "memoryd.http.console_idle_minutes must be between 1 and 10080 (a week), got "
                f"{self.console_idle_minutes}"
            )
        for origin in self.origins:
            scheme, sep, rest = origin.partition("://")
            if scheme not in ("http", "https") or not sep or not rest or "/" in rest:
                raise StartupError(
                    f"memoryd.http.cors_origins: {origin!r} is not an origin "
                    "(scheme://host[:port], e.g. https://console.example.com)"
                )

    def check_workers(self, workers: int, where: str = "") -> None:
        """HTTP is served by a single process (workers would each bind its port)."""
        if self.listen and workers > 1:
            raise StartupError(
                f"{where}memoryd.http.listen is served by one process only: it cannot be set "
                f"with {workers} workers (yet)"
            )

    @property
    def origins(self) -> frozenset[str]:
        """The CORS origins, parsed."""
        return frozenset(part.strip() for part in self.cors_origins.split(",") if part.strip())

    @property
    def hosts(self) -> tuple[str, ...]:
        """The allowed host names, parsed."""
        return tuple(part.strip() for part in self.allowed_hosts.split(",") if part.strip())


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class MetricsSettings(Section):
    """[memoryd.metrics]: Prometheus metrics (docs/metrics.md), at /metrics on the HTTP port
    ([memoryd.http] listen) and on a port of their own. With tokens configured, a scrape needs
    an admin token (`Authorization: Bearer`)."""

    # Count calls, writes, reviews, model calls...; false: no per-call counting, no /metrics.
    enabled: bool = True
    # HOST:PORT of a listener that serves only /metrics; empty: none (the HTTP port still
    # serves it). A non-loopback address needs what gRPC's does (tokens and TLS, or `insecure`).
    listen: str = ""

    def validate(self) -> None:
        """The address is HOST:PORT."""
        if self.listen:
            check_listen(self.listen, "memoryd.metrics.listen")

    def check_workers(self, workers: int, where: str = "") -> None:
        """Metrics are served by a single process (workers would each bind its port)."""
        if self.enabled and self.listen and workers > 1:
            raise StartupError(
                f"{where}memoryd.metrics.listen is served by one process only: it cannot be "
                f"set with {workers} workers (yet)"
            )


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TracingSettings(Section):
    """[memoryd.tracing]: OpenTelemetry traces of RPCs, writes, reviews, model calls,
    compactions and embeddings, exported over OTLP/gRPC. Needs `memoryd[tracing]`. The OTLP
    exporter's own variables (OTEL_EXPORTER_OTLP_HEADERS, _CERTIFICATE...) apply too."""

    # Make spans and export them; false: no spans at all (the default).
    enabled: bool = False
    # The OTLP/gRPC collector: http:// in clear text, https:// with TLS.
    otlp_endpoint: str = dataclasses.field(
        default="http://127.0.0.1:4317", metadata={"secret": mask_url}
    )
    # service.name of every span.
    service_name: str = "memoryd"
    # The share of new traces recorded, 0 to 1. A caller's sampled trace is always followed
    # (its `traceparent`). Each recorded span costs ~140 microseconds of CPU (docs/metrics.md).
    sample_ratio: float = 0.01

    def validate(self) -> None:
        """An endpoint URL, a name, a ratio."""
        if not self.otlp_endpoint.startswith(("http://", "https://")):
            raise StartupError(
                "memoryd.tracing.otlp_endpoint must start with http:// or https:// "
                f"(for example http://127.0.0.1:4317), got {mask_url(self.otlp_endpoint)!r}"
            )
        if not self.service_name.strip():
            raise StartupError("memoryd.tracing.service_name must not be blank")
        if not 0 <= self.sample_ratio <= 1:
            raise StartupError(
                f"memoryd.tracing.sample_ratio must be between 0 and 1, got {self.sample_ratio}"
            )
