"""The settings memoryd is configured with: one frozen dataclass per section, each checking
its own rules (`validate`) once its values are typed.

Sources, later ones winning: built-in defaults, the TOML file, environment variables, command-line
flags. The file is `--config PATH`, else $MEMORYD_CONFIG, else `<home>/config.toml` when it exists.
Every setting `[memoryd.<section>] <key>` can be overridden by `MEMORYD_<SECTION>_<KEY>`; the data
directory by `MEMORYD_HOME`. Unknown keys are refused, so a typo never silently does nothing.

    [memoryd]
    home = "~/.memoryd"

    [memoryd.server]
    listen = "127.0.0.1:50051"

    [memoryd.storage]
    synchronous = "normal"          # or "full"

    [memoryd.history]
    max_conversation_history = "unbounded"   # or a positive integer

    [memoryd.memory]
    enabled = true                  # false: no background review (ReviewNow still works)
    review_interval_hours = 24      # the longest a fact waits; also 5 turns, or 10 idle minutes

    [memoryd.compaction]
    threshold = 0.85                # compact at this fraction of the context window

    [memoryd.search]
    embeddings = "embedded"         # or "provider" (an /embeddings endpoint), or "off"

    [[memoryd.auth.tokens]]         # when any is set, every call needs a bearer token
    token_env = "MEMORYD_TELEGRAM_TOKEN"   # or token = "..." (at least 16 characters)
    role = "adapter"                # or "admin" (the CLI, operators)
    agents = ["main"]               # the agents it may touch; ["*"] for every agent
    max_trust = "guest"             # optional: the highest trust its calls may claim

    [[memoryd.providers]]           # the first is primary, the rest fallbacks, in order
    name = "local"
    base_url = "http://127.0.0.1:11434/v1"
    model = "llama3.1"
    api_key_env = "OLLAMA_API_KEY"  # the key is read from this variable, never from the file
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from pathlib import Path
from typing import Any, Literal

from memoryd.config.secrets import mask_dsn, mask_url
from memoryd.config.tokens import AuthSettings
from memoryd.data_directory import DATABASE_FILE
from memoryd.errors import StartupError

KIB = 1024
MIB = 1024 * KIB
UNBOUNDED = "unbounded"
# Content + metadata of one message: a message and its identifiers must fit one 4 MiB answer.
MAX_MESSAGE_BYTES = 3 * MIB
DEFAULT_HOME = "~/.memoryd"
# More server processes than this gains nothing on any machine memoryd is meant for.
MAX_WORKERS = 64


class Section:
    """What every [memoryd.<section>] table is: typed values, and the rules between them."""

    __slots__ = ()

    @classmethod
    def fields(cls) -> tuple[dataclasses.Field[Any], ...]:
        """The section's settings, in declaration order."""
        return dataclasses.fields(cls)  # type: ignore[arg-type]  # every Section is a dataclass

    def validate(self) -> None:
        """Refuse values that are each well typed but make no sense (StartupError)."""


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
class HistorySettings(Section):
    """[memoryd.history]: conversation history limits and the hot window cache."""

    # The most messages of a conversation's window; "unbounded" (the default) or a positive
    # integer. Older messages stay stored and searchable.
    max_conversation_history: int | None = None
    # The largest content and metadata of one message; together at most 3 MiB, so that one
    # message always fits in a 4 MiB answer.
    max_content_bytes: int = 256 * KIB
    max_metadata_bytes: int = 64 * KIB
    # The most messages of one AppendMessages call.
    max_messages_per_call: int = 100
    # The hot window cache: conversations kept, and their newest messages each.
    cache_conversations: int = 1024
    cache_messages_per_conversation: int = 200

    def validate(self) -> None:
        """One stored message must always fit in an answer a default client reads (4 MiB)."""
        size = self.max_content_bytes + self.max_metadata_bytes
        if size > MAX_MESSAGE_BYTES:
            raise StartupError(
                f"memoryd.history.max_content_bytes + max_metadata_bytes is {size:,} bytes; at "
                f"most {MAX_MESSAGE_BYTES:,}, so that one message always fits in the 4 MiB "
                "answer every gRPC client accepts"
            )


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ReviewSettings(Section):
    """[memoryd.memory]: the background reviewer."""

    # Background review; off leaves ReviewNow (`memoryd memory review`) working.
    enabled: bool = True
    # Reviews use this provider (a [[memoryd.providers]] name) first, or, when it names no
    # provider, the primary provider with this model (a cheaper one, say); the other providers
    # stay fallbacks. Empty: the chain as configured.
    model: str = ""
    # Hours (fractions too: 0.5 is 30 minutes) since the last review after which a conversation
    # with new input is reviewed: the longest a fact waits. 0: no time trigger (the turn, idle
    # and passive triggers still fire). A conversation with a backlog is reviewed again at once.
    review_interval_hours: float = 24.0
    # The most messages, and tokens of messages, one review reads; a backlog is read in turns.
    review_max_messages: int = 40
    review_input_token_budget: int = 4000
    # Tokens of the "current memory" listing in a review prompt: the most recently updated rows
    # that fit are shown, and the review may change only those.
    review_memory_token_budget: int = 4000
    # After a failed review, the conversation's next review waits this long.
    review_failure_backoff_ms: int = 300_000
    # Off ("unbounded") by default. When set, at most this many row changes (add, replace,
    # archive) of one answer are applied; the cursor then stays, and the same messages are
    # reviewed again at once, so nothing is dropped.
    review_max_operations: int | None = None
    # OpenHermit's name for review_max_operations (its per-review tool-call cap), accepted as
    # that; when both are set they must agree.
    max_tool_calls: int | None = None
    # The longest answer a review call may write (sent as max_tokens). An answer cut at it fails
    # the review, saying so, and the messages stay for the next one.
    review_max_output_tokens: int = 4096
    # Reviews running at once.
    review_concurrency: int = 4
    # OpenHermit's triggers, at its values (0 turns one off). Completed turns since the last
    # review after which new input is reviewed.
    turn_interval: int | None = 5
    # Minutes without a new message after which unread input is reviewed.
    idle_timeout_minutes: float | None = 10.0
    # User messages stored without an agent turn (AppendMessages in a group chat the agent only
    # reads) since the last review after which they are reviewed.
    passive_turn_interval: int | None = 20
    # How often the scheduler looks for due reviews.
    scheduler_tick_seconds: float = 5.0
    # Keep each review's prompt and the model's answer, for an operator to read
    # (GetReviewExchange, the console). They quote what users said, so they are off by default;
    # a purge of the conversation or owner erases them.
    keep_review_exchanges: bool = False

    def validate(self) -> None:
        """The scheduler ticks; the operation cap has one value."""
        if self.scheduler_tick_seconds <= 0:
            raise StartupError("memoryd.memory.scheduler_tick_seconds must be positive")
        both = (self.review_max_operations, self.max_tool_calls)
        if None not in both and both[0] != both[1]:
            raise StartupError(
                "memoryd.memory.max_tool_calls (OpenHermit's name) and review_max_operations "
                f"are the same cap: set one, or the same value in both (got {both[1]} and "
                f"{both[0]})"
            )

    @property
    def operation_cap(self) -> int | None:
        """The most row changes one review applies (None: all): review_max_operations, or
        OpenHermit's max_tool_calls."""
        return self.review_max_operations if self.max_tool_calls is None else self.max_tool_calls


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CompactionSettings(Section):
    """[memoryd.compaction]: keeping conversations inside their model's context window."""

    # Automatic compaction (Preflight, and the check after CommitTurn); /compact always works.
    enabled: bool = True
    # Compact when a turn's peak prompt tokens reach this fraction of the context window; the
    # composed context never passes it either. 0.1 to 1.0.
    threshold: float = 0.85
    # Sent with the summary call only ("none": not sent). An endpoint that refuses it (HTTP 400)
    # is asked again without it.
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high"] = "medium"
    # The most recently updated agent-scope memory rows in the composed context.
    context_entry_limit: int = 10
    # After a failed compaction, automatic compaction of that conversation waits this long.
    failure_backoff_seconds: float = 60.0
    # Before the window moves past unreviewed user messages, they are reviewed (in batches of
    # review_max_messages) for at most this long; compaction then goes ahead regardless.
    review_catch_up_seconds: float = 60.0

    def validate(self) -> None:
        """The threshold is a fraction of the context window."""
        if not 0.1 <= self.threshold <= 1.0:
            raise StartupError(
                f"memoryd.compaction.threshold must be between 0.1 and 1.0 (a fraction of the "
                f"context window), got {self.threshold}"
            )


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RealtimeSettings(Section):
    """[memoryd.realtime]: StreamTranscript."""

    # Store final transcript segments (off by default, as in the seed: finals are then only
    # acknowledged, each acknowledgement saying persisted: false, and the start says so once).
    persist_transcripts: bool = False
    # Transcript streams open at once; one more is RESOURCE_EXHAUSTED.
    max_streams: int = 256
    # Transcript streams of one agent open at once, so that one adapter cannot take every slot
    # and starve the other agents; one more is RESOURCE_EXHAUSTED.
    max_streams_per_agent: int = 64
    # The largest segment text.
    max_segment_bytes: int = 64 * KIB


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SearchSettings(Section):
    """[memoryd.search]: semantic search (vectors made in the background) beside the words."""

    # "embedded": bge-small-en-v1.5 inside the memoryd-model-bge-small package, on this machine;
    # "provider": the /embeddings endpoint of a [[memoryd.providers]] entry; "off": words only.
    embeddings: Literal["embedded", "provider", "off"] = "embedded"
    # With "provider": the [[memoryd.providers]] entry's name (empty: the first entry).
    embedding_provider: str = ""
    # With "provider": the embedding model's name (required), e.g. nomic-embed-text on Ollama.
    embedding_model: str = ""
    # Messages or rows the background embedder reads and embeds at a time.
    embedding_batch: int = 64
    # Threads the background embedder runs the embedded model on, at the lowest CPU priority
    # (they use what calls leave). A search's query embeds on a thread of its own.
    embedding_threads: int = 2
    # Vectors of recently searched scopes kept in memory, in MiB (least recently used dropped).
    # A scope with more vectors than fit is searched by its words (semantic: refused, saying so).
    vector_cache_mb: float = 256.0
    # The similarity (0 to 1) at which a row or message holding none of the query's words is
    # as relevant as the floor asks (docs/api.md#relevance): "model", the one measured for the
    # embedded model (a provider's model has none: whatever its meaning finds stands at the
    # floor); a number, that one instead; 0: none.
    min_similarity: float | Literal["model"] = "model"
    # The relevance (0 to 1) every hit of SearchHistory and Recall is held to, whichever way it
    # matched (its words, part of a word, a key, its meaning, or their fusion): a hit below it
    # is left out and counted (below_floor). 0 keeps every hit.
    min_relevance: float = 0.5

    def validate(self) -> None:
        """A similarity floor is between 0 and 1, and so is the relevance floor."""
        if isinstance(self.min_similarity, float) and not 0 <= self.min_similarity < 1:
            raise StartupError(
                "memoryd.search.min_similarity must be from 0 up to (not including) 1, or "
                f'"model", got {self.min_similarity}'
            )
        if not 0 <= self.min_relevance < 1:
            raise StartupError(
                "memoryd.search.min_relevance must be from 0 up to (not including) 1, "
                f"got {self.min_relevance}"
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


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ProviderSettings:
    """One [[memoryd.providers]] entry: an OpenAI-compatible chat-completions endpoint."""

    # Unique: what logs, review runs and [memoryd.memory] model call the entry.
    name: str
    # The endpoint's base URL, http:// or https:// (for example http://127.0.0.1:11434/v1).
    base_url: str
    # The chat model to call.
    model: str
    # The environment variable holding the API key; empty for endpoints without keys.
    api_key_env: str = ""
    # The model's context window in tokens, where a caller does not say (compaction's budget).
    context_window: int = 128_000
    # One call's time limit; then the next provider in the chain is tried.
    timeout_seconds: float = 90.0

    def validate(self, label: str) -> None:
        """Names and addresses that can be called; positive limits."""
        for key in ("name", "base_url", "model"):
            if not getattr(self, key).strip():
                raise StartupError(f"{label}.{key} must not be blank")
        if not self.base_url.startswith(("http://", "https://")):
            raise StartupError(f"{label}.base_url must start with http:// or https://")
        if self.context_window <= 0 or self.timeout_seconds <= 0:
            raise StartupError(f"{label}: context_window and timeout_seconds must be positive")


def review_providers(
    providers: tuple[ProviderSettings, ...], model: str
) -> tuple[ProviderSettings, ...]:
    """The chain reviews use ([memoryd.memory] model): the provider of that name first, or the
    primary with that model; the others follow as fallbacks. Empty: the chain as configured."""
    if not model or not providers:
        return providers
    named = [provider for provider in providers if provider.name == model]
    if named:
        return (named[0], *(provider for provider in providers if provider is not named[0]))
    return (dataclasses.replace(providers[0], model=model), *providers[1:])


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Everything memoryd is configured with."""

    home: Path
    config_path: Path | None = None
    server: ServerSettings = ServerSettings()
    storage: StorageSettings = StorageSettings()
    history: HistorySettings = HistorySettings()
    memory: ReviewSettings = ReviewSettings()
    compaction: CompactionSettings = CompactionSettings()
    realtime: RealtimeSettings = RealtimeSettings()
    search: SearchSettings = SearchSettings()
    http: HttpSettings = HttpSettings()
    metrics: MetricsSettings = MetricsSettings()
    tracing: TracingSettings = TracingSettings()
    auth: AuthSettings = AuthSettings()  # noqa: RUF009 - frozen, so one shared default is safe
    providers: tuple[ProviderSettings, ...] = ()
    # The settings whose value in the config file holds a secret (memoryd.config.loading).
    secrets_in_file: tuple[str, ...] = ()

    @property
    def database_path(self) -> Path:
        """The SQLite database, the source of truth."""
        return self.home / DATABASE_FILE


def embedding_provider(settings: Settings) -> ProviderSettings | None:
    """The provider whose /embeddings endpoint makes the vectors (embeddings = "provider")."""
    search = settings.search
    if search.embeddings != "provider":
        return None
    for provider in settings.providers:
        if provider.name == search.embedding_provider or not search.embedding_provider:
            return provider
    return None


SECTIONS: dict[str, type[Section]] = {
    "server": ServerSettings,
    "storage": StorageSettings,
    "history": HistorySettings,
    "memory": ReviewSettings,
    "compaction": CompactionSettings,
    "realtime": RealtimeSettings,
    "search": SearchSettings,
    "http": HttpSettings,
    "metrics": MetricsSettings,
    "tracing": TracingSettings,
}
# Settings that may be 0 although they are not durations in _ms / _seconds.
ZERO_ALLOWED = frozenset(
    {"review_interval_hours", "sample_ratio", "max_connections", "min_similarity", "min_relevance"}
)


_HOST_LABEL = r"[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?"
_HOST_NAME = re.compile(rf"\.?{_HOST_LABEL}(\.{_HOST_LABEL})*\.?")


def is_host_name(text: str) -> bool:
    """A DNS name (a leading dot: every name below it) or an IP address ([v6] or bare)."""
    try:
        ipaddress.ip_address(text.removeprefix("[").removesuffix("]"))
    except ValueError:
        return _HOST_NAME.fullmatch(text) is not None
    return True


def check_listen(value: str, label: str) -> str:
    """HOST:PORT, or StartupError naming `label`."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise StartupError(
            f"{label} must be HOST:PORT (for example 127.0.0.1:50051), got {value!r}"
        )
    return value
