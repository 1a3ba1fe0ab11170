"""Typed, frozen settings, loaded once at start-up.

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
import hashlib
import ipaddress
import math
import tomllib
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from memoryd.data_directory import DATABASE_FILE
from memoryd.errors import StartupError

KIB = 1024
MIB = 1024 * KIB
UNBOUNDED = "unbounded"
# Content + metadata of one message: a message and its identifiers must fit one 4 MiB answer.
MAX_MESSAGE_BYTES = 3 * MIB


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ServerSettings:
    """[memoryd.server]: the gRPC listener and process behaviour."""

    listen: str = "127.0.0.1:50051"
    grace_period_seconds: float = 10.0
    # gRPC's usual limit. Answers never pass 4 MiB whatever this is (memoryd.domain.answers).
    max_request_bytes: int = 4 * MIB
    reader_threads: int = 4
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


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class StorageSettings:
    """[memoryd.storage]: SQLite connection policy and the group-committing writer."""

    synchronous: Literal["normal", "full"] = "normal"
    busy_timeout_ms: int = 5000
    group_commit_max_rows: int = 512
    group_commit_max_wait_ms: float = 0.0
    write_attempts: int = 3
    write_retry_delay_ms: int = 100
    secure_delete: bool = True


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class HistorySettings:
    """[memoryd.history]: conversation history limits and the hot window cache."""

    max_conversation_history: int | None = None
    max_content_bytes: int = 256 * KIB
    max_metadata_bytes: int = 64 * KIB
    max_messages_per_call: int = 100
    cache_conversations: int = 1024
    cache_messages_per_conversation: int = 200


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ReviewSettings:
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
    review_max_messages: int = 40
    review_input_token_budget: int = 4000
    # Tokens of the "current memory" listing in a review prompt: the most recently updated rows
    # that fit are shown, and the review may change only those.
    review_memory_token_budget: int = 4000
    review_failure_backoff_ms: int = 300_000
    # Off ("unbounded") by default. When set, at most this many row changes (add, replace,
    # archive) of one answer are applied; the cursor then stays, and the same messages are
    # reviewed again at once, so nothing is dropped.
    review_max_operations: int | None = None
    # Reviews running at once.
    review_concurrency: int = 4
    # OpenHermit's triggers, at its values (0 turns one off): completed turns since the last
    # review; minutes without a new message; user messages stored without an agent turn
    # (AppendMessages in a group chat the agent only reads) since the last review.
    turn_interval: int | None = 5
    idle_timeout_minutes: float | None = 10.0
    passive_turn_interval: int | None = 20
    # How often the scheduler looks for due reviews.
    scheduler_tick_seconds: float = 5.0


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CompactionSettings:
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


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RealtimeSettings:
    """[memoryd.realtime]: StreamTranscript."""

    # Store final transcript segments (off by default, as in the seed: finals are then only
    # acknowledged).
    persist_transcripts: bool = False
    # Transcript streams open at once; one more is RESOURCE_EXHAUSTED.
    max_streams: int = 256
    # Transcript streams of one agent open at once, so that one adapter cannot take every slot
    # and starve the other agents; one more is RESOURCE_EXHAUSTED.
    max_streams_per_agent: int = 64
    # The largest segment text.
    max_segment_bytes: int = 64 * KIB


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SearchSettings:
    """[memoryd.search]: semantic search (vectors made in the background) beside the words."""

    # "embedded": bge-small-en-v1.5 inside the memoryd-model-bge-small package, on this machine;
    # "provider": the /embeddings endpoint of a [[memoryd.providers]] entry; "off": words only.
    embeddings: Literal["embedded", "provider", "off"] = "embedded"
    # With "provider": the entry's name (empty: the first entry) and the embedding model's name.
    embedding_provider: str = ""
    embedding_model: str = ""
    # Messages or rows the background embedder reads and embeds at a time.
    embedding_batch: int = 64
    # Threads of the embedded model (each call uses up to this many cores).
    embedding_threads: int = 2
    # Vectors of recently searched scopes kept in memory, in MiB (least recently used dropped).
    # A scope with more vectors than fit is searched by its words (semantic: refused, saying so).
    vector_cache_mb: float = 256.0


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ProviderSettings:
    """One [[memoryd.providers]] entry: an OpenAI-compatible chat-completions endpoint."""

    name: str
    base_url: str
    model: str
    # The environment variable holding the API key; empty for endpoints without keys.
    api_key_env: str = ""
    context_window: int = 128_000
    timeout_seconds: float = 90.0


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


MIN_TOKEN_CHARS = 16
ANY_AGENT = "*"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TokenSettings:
    """One [[memoryd.auth.tokens]] entry. The token itself is kept only as its SHA-256."""

    digest: bytes
    role: Literal["admin", "adapter"]
    # None: every agent ("*").
    agents: frozenset[str] | None
    max_trust: Literal["operator", "guest"] | None = None

    @property
    def fingerprint(self) -> str:
        """What logs name the token by: the first 8 hex digits of its SHA-256."""
        return self.digest.hex()[:8]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AuthSettings:
    """[memoryd.auth]: who may call. No tokens: no authentication, loopback only."""

    tokens: tuple[TokenSettings, ...] = ()
    # The file the CLI reads its token from when $MEMORYD_TOKEN is not set.
    cli_token_file: str = ""
    # Whether a token is written in the config file itself (`token = "..."`, not token_env):
    # then the file must be private (check_private_settings).
    tokens_in_file: bool = False


def token_digest(token: str) -> bytes:
    """The SHA-256 a token is kept and compared as."""
    return hashlib.sha256(token.encode("utf-8")).digest()


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
    auth: AuthSettings = AuthSettings()
    providers: tuple[ProviderSettings, ...] = ()

    @property
    def database_path(self) -> Path:
        """The SQLite database, the source of truth."""
        return self.home / DATABASE_FILE


SECTIONS: dict[str, type[Any]] = {
    "server": ServerSettings,
    "storage": StorageSettings,
    "history": HistorySettings,
    "memory": ReviewSettings,
    "compaction": CompactionSettings,
    "realtime": RealtimeSettings,
    "search": SearchSettings,
}
# Settings that may be 0 although they are not durations in _ms / _seconds.
ZERO_ALLOWED = frozenset({"review_interval_hours"})
DEFAULT_HOME = "~/.memoryd"


def load_settings(
    env: Mapping[str, str],
    *,
    config_path: str | None = None,
    home: str | None = None,
    listen: str | None = None,
) -> Settings:
    """Build the settings from defaults, the config file, `env` and command-line values."""
    home_text = home or env.get("MEMORYD_HOME")
    default_home = Path(home_text or DEFAULT_HOME).expanduser()
    path, document = _read_config_file(config_path or env.get("MEMORYD_CONFIG"), default_home)
    table = _memoryd_table(document, path)

    if home_text is None and "home" in table:
        home_value = table["home"]
        if not isinstance(home_value, str) or not home_value.strip():
            raise StartupError(f"{_where(path)}memoryd.home must be a non-empty string")
        default_home = Path(home_value).expanduser()
    unknown = sorted(set(table) - {"home", "providers", "auth", *SECTIONS})
    if unknown:
        raise StartupError(f"{_where(path)}unknown setting memoryd.{unknown[0]}")

    sections: dict[str, Any] = {}
    for name, cls in SECTIONS.items():
        values = table.get(name, {})
        if not isinstance(values, dict):
            raise StartupError(f"{_where(path)}[memoryd.{name}] must be a table")
        sections[name] = _build_section(name, cls, values, env, path)
    _check_message_room(sections["history"], path)
    if listen is not None:
        sections["server"] = dataclasses.replace(
            sections["server"], listen=_check_listen(listen, "--listen")
        )
    providers = _providers(table.get("providers", []), path)
    _check_embedding_provider(sections["search"], providers, path)
    if sections["memory"].model and not providers:
        raise StartupError(
            f"{_where(path)}memoryd.memory.model is {sections['memory'].model!r}, but no "
            "[[memoryd.providers]] is configured to run it"
        )
    auth = _auth(table.get("auth", {}), env, path)
    return Settings(
        home=default_home.resolve(),
        config_path=path,
        providers=providers,
        auth=auth,
        **sections,
    )


def setting_origins(
    env: Mapping[str, str],
    *,
    config_path: str | None = None,
    home: str | None = None,
    listen: str | None = None,
) -> dict[str, str]:
    """Where each sectioned setting and the home come from, as load_settings chooses them:
    "flag", "environment", "file" or "default", by dotted name (memoryd.server.listen).
    Call it after load_settings accepted the same arguments."""
    home_text = home or env.get("MEMORYD_HOME")
    default_home = Path(home_text or DEFAULT_HOME).expanduser()
    path, document = _read_config_file(config_path or env.get("MEMORYD_CONFIG"), default_home)
    table = _memoryd_table(document, path)
    origins = {
        "memoryd.home": "flag"
        if home
        else "environment"
        if env.get("MEMORYD_HOME")
        else "file"
        if "home" in table
        else "default"
    }
    for name, cls in SECTIONS.items():
        values = table.get(name, {})
        for field in dataclasses.fields(cls):
            if f"MEMORYD_{name.upper()}_{field.name.upper()}" in env:
                origin = "environment"
            elif field.name in values:
                origin = "file"
            else:
                origin = "default"
            origins[f"memoryd.{name}.{field.name}"] = origin
    if listen is not None:
        origins["memoryd.server.listen"] = "flag"
    return origins


def _check_message_room(history: HistorySettings, path: Path | None) -> None:
    """One stored message must always fit in an answer a default client reads (4 MiB)."""
    size = history.max_content_bytes + history.max_metadata_bytes
    if size > MAX_MESSAGE_BYTES:
        raise StartupError(
            f"{_where(path)}memoryd.history.max_content_bytes + max_metadata_bytes is {size:,} "
            f"bytes; at most {MAX_MESSAGE_BYTES:,}, so that one message always fits in the "
            "4 MiB answer every gRPC client accepts"
        )


def embedding_provider(settings: Settings) -> ProviderSettings | None:
    """The provider whose /embeddings endpoint makes the vectors (embeddings = "provider")."""
    search = settings.search
    if search.embeddings != "provider":
        return None
    for provider in settings.providers:
        if provider.name == search.embedding_provider or not search.embedding_provider:
            return provider
    return None


def _check_embedding_provider(
    search: SearchSettings, providers: tuple[ProviderSettings, ...], path: Path | None
) -> None:
    if search.embeddings != "provider":
        return
    where = f"{_where(path)}memoryd.search"
    if not search.embedding_model.strip():
        raise StartupError(
            f'{where}.embedding_model must name the model for embeddings = "provider"'
        )
    names = [provider.name for provider in providers]
    if not names:
        raise StartupError(
            f'{where}.embeddings = "provider" needs a [[memoryd.providers]] entry to call'
        )
    if search.embedding_provider and search.embedding_provider not in names:
        raise StartupError(
            f"{where}.embedding_provider {search.embedding_provider!r} is not a provider's name "
            f"({', '.join(names)})"
        )


def _providers(entries: Any, path: Path | None) -> tuple[ProviderSettings, ...]:
    """[[memoryd.providers]]: every entry typed and checked; names unique."""
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise StartupError(f"{_where(path)}memoryd.providers must be an array of tables")
    hints = typing.get_type_hints(ProviderSettings)
    fields = {field.name for field in dataclasses.fields(ProviderSettings)}
    required = {"name", "base_url", "model"}
    providers: list[ProviderSettings] = []
    for index, entry in enumerate(entries):
        label = f"{_where(path)}memoryd.providers[{index}]"
        unknown = sorted(set(entry) - fields)
        if unknown:
            raise StartupError(f"{label}: unknown setting {unknown[0]}")
        missing = sorted(required - set(entry))
        if missing:
            raise StartupError(f"{label}: {missing[0]} is required")
        values = {key: _coerce(value, hints[key], f"{label}.{key}") for key, value in entry.items()}
        provider = ProviderSettings(**values)
        for key in ("name", "base_url", "model"):
            if not getattr(provider, key).strip():
                raise StartupError(f"{label}.{key} must not be blank")
        if not provider.base_url.startswith(("http://", "https://")):
            raise StartupError(f"{label}.base_url must start with http:// or https://")
        if provider.context_window <= 0 or provider.timeout_seconds <= 0:
            raise StartupError(f"{label}: context_window and timeout_seconds must be positive")
        providers.append(provider)
    names = [provider.name for provider in providers]
    for name in names:
        if names.count(name) > 1:
            raise StartupError(f"{_where(path)}memoryd.providers: name {name!r} is used twice")
    return tuple(providers)


def data_home(env: Mapping[str, str], *, home: str | None, config_path: str | None) -> Path:
    """The data directory, as `serve` would find it (--home, $MEMORYD_HOME, [memoryd] home in
    the config file, ~/.memoryd), without checking the rest of the settings."""
    chosen = home or env.get("MEMORYD_HOME")
    if chosen:
        return Path(chosen).expanduser().resolve()
    default = Path(DEFAULT_HOME).expanduser()
    path, document = _read_config_file(config_path or env.get("MEMORYD_CONFIG"), default)
    configured = document.get("memoryd", {}).get("home") if path else None
    if isinstance(configured, str) and configured.strip():
        return Path(configured).expanduser().resolve()
    return default.resolve()


def cli_token(env: Mapping[str, str]) -> str | None:
    """The token the CLI sends: $MEMORYD_TOKEN, else the file named by [memoryd.auth]
    cli_token_file in the config file ($MEMORYD_CONFIG, else <home>/config.toml). The config is
    read without checking the server's own tokens, whose variables the CLI does not have."""
    if env.get("MEMORYD_TOKEN"):
        return env["MEMORYD_TOKEN"].strip()
    home = Path(env.get("MEMORYD_HOME") or DEFAULT_HOME).expanduser()
    try:
        path, document = _read_config_file(env.get("MEMORYD_CONFIG"), home)
    except StartupError:
        return None
    auth = document.get("memoryd", {}).get("auth", {}) if path else {}
    named = auth.get("cli_token_file") if isinstance(auth, dict) else None
    if not isinstance(named, str) or not named:
        return None
    try:
        return Path(named).expanduser().read_text(encoding="utf-8").strip() or None
    except OSError as error:
        raise StartupError(
            f"memoryd.auth.cli_token_file {named} cannot be read: {error.strerror}"
        ) from None


def _auth(table: Any, env: Mapping[str, str], path: Path | None) -> AuthSettings:
    """[memoryd.auth]: the tokens, each checked; a token is never kept in plain text."""
    where = _where(path)
    if not isinstance(table, dict):
        raise StartupError(f"{where}[memoryd.auth] must be a table")
    unknown = sorted(set(table) - {"tokens", "cli_token_file"})
    if unknown:
        raise StartupError(f"{where}unknown setting memoryd.auth.{unknown[0]}")
    cli_file = table.get("cli_token_file", "")
    if not isinstance(cli_file, str):
        raise StartupError(f"{where}memoryd.auth.cli_token_file must be a string")
    entries = table.get("tokens", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise StartupError(f"{where}memoryd.auth.tokens must be an array of tables")
    tokens = [_token(entry, index, env, where) for index, entry in enumerate(entries)]
    digests = [token.digest for token in tokens]
    for index, digest in enumerate(digests):
        if digests.index(digest) != index:
            raise StartupError(
                f"{where}memoryd.auth.tokens[{index}] has the same token as "
                f"memoryd.auth.tokens[{digests.index(digest)}]; every caller needs its own"
            )
    return AuthSettings(
        tokens=tuple(tokens),
        cli_token_file=cli_file,
        tokens_in_file=any("token" in entry for entry in entries),
    )


def _token(entry: dict[str, Any], index: int, env: Mapping[str, str], where: str) -> TokenSettings:
    label = f"{where}memoryd.auth.tokens[{index}]"
    unknown = sorted(set(entry) - {"token", "token_env", "role", "agents", "max_trust"})
    if unknown:
        raise StartupError(f"{label}: unknown setting {unknown[0]}")
    if ("token" in entry) == ("token_env" in entry):
        raise StartupError(f"{label}: set exactly one of token and token_env")
    if "token_env" in entry:
        variable = entry["token_env"]
        if not isinstance(variable, str) or not variable:
            raise StartupError(f"{label}.token_env must name an environment variable")
        if not env.get(variable):
            raise StartupError(f"{label}.token_env: the environment variable {variable} is not set")
        token = env[variable]
        source = f"${variable}"
    else:
        token = entry["token"]
        source = f"{label}.token"
        if not isinstance(token, str):
            raise StartupError(f"{label}.token must be a string")
    if len(token) < MIN_TOKEN_CHARS or token != token.strip():
        raise StartupError(
            f"{source}: a token must be at least {MIN_TOKEN_CHARS} characters, without leading "
            "or trailing whitespace (make one with: openssl rand -hex 32)"
        )
    role = entry.get("role")
    if role not in ("admin", "adapter"):
        raise StartupError(f'{label}.role must be "admin" or "adapter"')
    agents = entry.get("agents")
    if (
        not isinstance(agents, list)
        or not agents
        or not all(isinstance(a, str) and a.strip() == a and a for a in agents)
    ):
        raise StartupError(f'{label}.agents must be a list of agent ids, or ["*"]')
    if ANY_AGENT in agents and len(agents) > 1:
        raise StartupError(f'{label}.agents: "*" stands alone (it means every agent)')
    max_trust = entry.get("max_trust")
    if max_trust not in (None, "operator", "guest"):
        raise StartupError(f'{label}.max_trust must be "operator" or "guest"')
    return TokenSettings(
        digest=token_digest(token),
        role=role,
        agents=None if agents == [ANY_AGENT] else frozenset(agents),
        max_trust=max_trust,
    )


def _read_config_file(explicit: str | None, home: Path) -> tuple[Path | None, dict[str, Any]]:
    if explicit is not None:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise StartupError(f"config file {path} does not exist")
    else:
        path = home / "config.toml"
        if not path.is_file():
            return None, {}
    try:
        with path.open("rb") as handle:
            return path, tomllib.load(handle)
    except tomllib.TOMLDecodeError as error:
        raise StartupError(f"config file {path} is not valid TOML: {error}") from None
    except OSError as error:
        raise StartupError(f"config file {path} cannot be read: {error.strerror}") from None


def _memoryd_table(document: dict[str, Any], path: Path | None) -> dict[str, Any]:
    extra = sorted(set(document) - {"memoryd"})
    if extra:
        raise StartupError(f"{_where(path)}unknown top-level table [{extra[0]}]; use [memoryd.*]")
    table = document.get("memoryd", {})
    if not isinstance(table, dict):
        raise StartupError(f"{_where(path)}[memoryd] must be a table")
    return table


def _build_section(
    name: str, cls: type[Any], values: dict[str, Any], env: Mapping[str, str], path: Path | None
) -> Any:
    hints = typing.get_type_hints(cls)
    fields = {field.name for field in dataclasses.fields(cls)}
    for key in values:
        if key not in fields:
            raise StartupError(f"{_where(path)}unknown setting memoryd.{name}.{key}")
    prefix = f"MEMORYD_{name.upper()}_"
    for variable in env:
        if variable.startswith(prefix) and variable[len(prefix) :].lower() not in fields:
            raise StartupError(f"unknown environment setting {variable}")
    chosen: dict[str, Any] = {}
    for key in sorted(fields):
        label = f"memoryd.{name}.{key}"
        variable = prefix + key.upper()
        if variable in env:
            chosen[key] = _coerce(_parse_env(env[variable]), hints[key], variable)
        elif key in values:
            chosen[key] = _coerce(values[key], hints[key], f"{_where(path)}{label}")
    section = cls(**chosen)
    _validate(name, section)
    return section


def _parse_env(text: str) -> Any:
    """Environment values are strings; read numbers and booleans as TOML would."""
    try:
        return tomllib.loads(f"value = {text}")["value"]
    except tomllib.TOMLDecodeError:
        return text


def _coerce(value: Any, hint: Any, label: str) -> Any:  # noqa: PLR0911 - one branch per type
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is Literal:
        if value not in args:
            choices = ", ".join(repr(arg) for arg in args)
            raise StartupError(f"{label} must be one of {choices}, got {value!r}")
        return value
    if origin in (types.UnionType, typing.Union) and type(None) in args:
        # Optional limits are written as "unbounded" (or 0) for "no limit".
        if value in (UNBOUNDED, 0):
            return None
        inner = next(arg for arg in args if arg is not type(None))
        return _coerce(value, inner, f"{label} (a positive integer or {UNBOUNDED!r})")
    if hint is bool:
        if not isinstance(value, bool):
            raise StartupError(f"{label} must be true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise StartupError(f"{label} must be an integer, got {value!r}")
        return value
    if hint is float:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise StartupError(f"{label} must be a finite number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise StartupError(f"{label} must be a string, got {value!r}")
        return value
    raise StartupError(f"{label}: unsupported setting type {hint!r}")  # pragma: no cover


def _validate(name: str, section: Any) -> None:
    for field in dataclasses.fields(section):
        value = getattr(section, field.name)
        label = f"memoryd.{name}.{field.name}"
        is_number = isinstance(value, int | float) and not isinstance(value, bool)
        if is_number and (field.name.endswith(("_ms", "_seconds")) or field.name in ZERO_ALLOWED):
            if value < 0:
                raise StartupError(f"{label} must not be negative, got {value}")
        elif is_number and value <= 0:
            raise StartupError(f"{label} must be positive, got {value}")
    if isinstance(section, ServerSettings):
        _check_listen(section.listen, "memoryd.server.listen")
        _check_tls(section)
    if isinstance(section, ReviewSettings) and section.scheduler_tick_seconds <= 0:
        raise StartupError("memoryd.memory.scheduler_tick_seconds must be positive")
    if isinstance(section, CompactionSettings) and not 0.1 <= section.threshold <= 1.0:
        raise StartupError(
            f"memoryd.compaction.threshold must be between 0.1 and 1.0 (a fraction of the "
            f"context window), got {section.threshold}"
        )
    if isinstance(section, StorageSettings) and section.write_attempts > 10:
        raise StartupError("memoryd.storage.write_attempts must be at most 10")


def is_loopback(listen: str) -> bool:
    """Whether HOST:PORT only listens on this machine (127.0.0.0/8, ::1, localhost)."""
    host = listen.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def check_exposure(settings: Settings) -> None:
    """Without authentication (tokens, or client certificates under mutual TLS), memoryd serves
    only this machine unless told otherwise; and tokens, like everything a call carries, cross
    a network only inside TLS. TLS alone authenticates the server, not callers."""
    server = settings.server
    if server.insecure or is_loopback(server.listen):
        return
    if not (settings.auth.tokens or server.tls_client_ca):
        raise StartupError(
            f"refusing to serve {server.listen} without authentication: anyone who can reach "
            "it could read and erase every conversation. Configure [[memoryd.auth.tokens]] (or "
            "mutual TLS, [memoryd.server] tls_client_ca), listen on a loopback address "
            "(127.0.0.1), or start with --insecure if that is really wanted"
        )
    if not server.tls_cert:
        raise StartupError(
            f"refusing to serve {server.listen} with tokens but without TLS: every bearer token "
            "and every conversation would cross the network in clear text, for anyone on the "
            "path to read and replay. Set [memoryd.server] tls_cert and tls_key, listen on a "
            "loopback address behind a TLS-terminating proxy, or start with --insecure if that "
            "is really wanted"
        )


def check_private_settings(settings: Settings) -> None:
    """Refuse, as ssh does, files whose secrets or powers others could take: a config file
    others can write (they could add their own admin token), a config file holding a token that
    others can read, and a TLS private key others can read. Each refusal names the file and the
    chmod that fixes it."""
    path = settings.config_path
    if path is not None:
        mode = _mode(path)
        folder = _mode(path.parent)
        if mode & 0o022:
            raise StartupError(
                f"config file {path} can be written by other users (mode {mode:04o}): they "
                f"could give themselves a token. Run: chmod go-w {path}"
            )
        if folder & 0o022 and not folder & 0o1000:
            raise StartupError(
                f"config file {path} is in a folder other users can write (mode {folder:04o}): "
                f"they could replace it. Run: chmod go-w {path.parent}"
            )
        if settings.auth.tokens_in_file and mode & 0o044:
            raise StartupError(
                f"config file {path} holds a token and other users can read it (mode "
                f"{mode:04o}). Run: chmod 600 {path} (or keep the token in the environment, "
                "token_env)"
            )
    key = settings.server.tls_key
    if key:
        key_path = Path(key).expanduser()
        mode = _mode(key_path)
        if mode & 0o077:
            raise StartupError(
                f"memoryd.server.tls_key {key_path} can be read or written by other users "
                f"(mode {mode:04o}): anyone who reads it can impersonate this server. Run: "
                f"chmod 600 {key_path}"
            )


def _mode(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o7777
    except OSError:  # unreadable or gone: the read that follows says so
        return 0


def _check_tls(server: ServerSettings) -> None:
    if bool(server.tls_cert) != bool(server.tls_key):
        raise StartupError("memoryd.server.tls_cert and tls_key go together: set both or neither")
    if server.tls_client_ca and not server.tls_cert:
        raise StartupError(
            "memoryd.server.tls_client_ca needs tls_cert and tls_key (mutual TLS is TLS first)"
        )
    for name in ("tls_cert", "tls_key", "tls_client_ca"):
        value = getattr(server, name)
        if value and not Path(value).expanduser().is_file():
            raise StartupError(f"memoryd.server.{name}: {value} is not a readable file")


def _check_listen(value: str, label: str) -> str:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise StartupError(
            f"{label} must be HOST:PORT (for example 127.0.0.1:50051), got {value!r}"
        )
    return value


def _where(path: Path | None) -> str:
    return f"config file {path}: " if path is not None else ""
