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
from pathlib import Path

from memoryd.config.memory_settings import (
    CompactionSettings,
    HistorySettings,
    ProviderSettings,
    RealtimeSettings,
    ReviewSettings,
    SearchSettings,
)
from memoryd.config.section import (
    Section,
)
from memoryd.config.serving_settings import (
    HttpSettings,
    MetricsSettings,
    ServerSettings,
    StorageSettings,
    TracingSettings,
)
from memoryd.config.tokens import AuthSettings
from memoryd.data_directory import DATABASE_FILE


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Everything memoryd is configured with."""

    home: Path
    config_path: Path | None = None
    server: ServerSettings = dataclasses.field(default_factory=ServerSettings)
    storage: StorageSettings = dataclasses.field(default_factory=StorageSettings)
    history: HistorySettings = dataclasses.field(default_factory=HistorySettings)
    memory: ReviewSettings = dataclasses.field(default_factory=ReviewSettings)
    compaction: CompactionSettings = dataclasses.field(default_factory=CompactionSettings)
    realtime: RealtimeSettings = dataclasses.field(default_factory=RealtimeSettings)
    search: SearchSettings = dataclasses.field(default_factory=SearchSettings)
    http: HttpSettings = dataclasses.field(default_factory=HttpSettings)
    metrics: MetricsSettings = dataclasses.field(default_factory=MetricsSettings)
    tracing: TracingSettings = dataclasses.field(default_factory=TracingSettings)
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
