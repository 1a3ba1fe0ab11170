"""Typed, frozen settings, loaded once at start-up.

settings   every section together (start here for what can be set); serving_settings and
           memory_settings hold the sections' dataclasses and their rules, section what they share
document   the one reader of the config file
loading    defaults, then the file, the environment and flags, typed and checked
tokens     [memoryd.auth]: bearer tokens, kept only as digests
exposure   the refusals that keep an exposed or readable setup from starting
"""

from memoryd.config.exposure import check_exposure, check_private_settings, is_loopback
from memoryd.config.loading import (
    cli_token,
    data_home,
    data_storage,
    load_settings,
    setting_origins,
)
from memoryd.config.memory_settings import (
    CompactionSettings,
    HistorySettings,
    ProviderSettings,
    RealtimeSettings,
    ReviewSettings,
    SearchSettings,
    review_providers,
)
from memoryd.config.section import DEFAULT_HOME, KIB, MAX_MESSAGE_BYTES, MIB, UNBOUNDED
from memoryd.config.serving_settings import (
    HttpSettings,
    MetricsSettings,
    ServerSettings,
    StorageSettings,
    TracingSettings,
)
from memoryd.config.settings import SECTIONS, Settings, embedding_provider
from memoryd.config.tokens import (
    ANY_AGENT,
    MIN_TOKEN_CHARS,
    AuthSettings,
    TokenSettings,
    token_digest,
)

__all__ = [
    "ANY_AGENT",
    "DEFAULT_HOME",
    "KIB",
    "MAX_MESSAGE_BYTES",
    "MIB",
    "MIN_TOKEN_CHARS",
    "SECTIONS",
    "UNBOUNDED",
    "AuthSettings",
    "CompactionSettings",
    "HistorySettings",
    "HttpSettings",
    "MetricsSettings",
    "ProviderSettings",
    "RealtimeSettings",
    "ReviewSettings",
    "SearchSettings",
    "ServerSettings",
    "Settings",
    "StorageSettings",
    "TokenSettings",
    "TracingSettings",
    "check_exposure",
    "check_private_settings",
    "cli_token",
    "data_home",
    "data_storage",
    "embedding_provider",
    "is_loopback",
    "load_settings",
    "review_providers",
    "setting_origins",
    "token_digest",
]
