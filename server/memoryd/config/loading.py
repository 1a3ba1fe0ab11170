"""Building the settings: defaults, then the config file, then the environment, then flags.

Every setting `[memoryd.<section>] <key>` can be overridden by `MEMORYD_<SECTION>_<KEY>`; the
data directory by `MEMORYD_HOME`. Values are typed from the dataclasses' annotations, then each
section checks its own rules (`Section.validate`). Unknown keys and variables are refused, so a
typo never silently does nothing. Providers and tokens come from the file only.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from memoryd.config.document import Document, read_document
from memoryd.config.memory_settings import ProviderSettings, SearchSettings
from memoryd.config.secrets import holds_secret, mask_url
from memoryd.config.section import DEFAULT_HOME, UNBOUNDED, ZERO_ALLOWED, Section, check_listen
from memoryd.config.serving_settings import StorageSettings
from memoryd.config.settings import SECTIONS, Settings
from memoryd.config.tokens import auth_settings
from memoryd.errors import StartupError


def load_settings(
    env: Mapping[str, str],
    *,
    config_path: str | None = None,
    home: str | None = None,
    listen: str | None = None,
    document: Document | None = None,
) -> Settings:
    """Build the settings from defaults, the config file, `env` and command-line values.
    `document`: the config file as already read (config_document; a worker's snapshot)."""
    home_text = home or env.get("MEMORYD_HOME")
    if document is None:
        document = config_document(env, config_path=config_path, home=home)
    table = document.table
    chosen_home = _home(document, home_text)
    unknown = sorted(set(table) - {"home", "providers", "auth", *SECTIONS})
    if unknown:
        raise StartupError(f"{document.where}unknown setting memoryd.{unknown[0]}")
    sections: dict[str, Any] = {
        name: _build_section(name, cls, document, env) for name, cls in SECTIONS.items()
    }
    if listen is not None:
        sections["server"] = dataclasses.replace(
            sections["server"], listen=check_listen(listen, "--listen")
        )
    providers = _providers(table.get("providers", []), document.where)
    _check_embedding_provider(sections["search"], providers, document.where)
    sections["http"].check_workers(sections["server"].workers, document.where)
    sections["metrics"].check_workers(sections["server"].workers, document.where)
    if sections["memory"].model and not providers:
        raise StartupError(
            f"{document.where}memoryd.memory.model is {sections['memory'].model!r}, but no "
            "[[memoryd.providers]] is configured to run it"
        )
    return Settings(
        home=chosen_home.resolve(),
        config_path=document.path,
        providers=providers,
        auth=auth_settings(table.get("auth", {}), env, document.where),
        secrets_in_file=secrets_in_file(document),
        **sections,
    )


def secrets_in_file(document: Document) -> tuple[str, ...]:
    """The settings whose value in the config file itself holds a secret (a token, a password
    of the connection string or of a URL): then the file must be its owner's alone
    (memoryd.config.exposure.check_private_settings)."""
    found = []
    for name, cls in SECTIONS.items():
        values = document.section(name)
        for field in cls.fields():
            value = values.get(field.name)
            masker = field.metadata.get("secret")
            if masker is not None and isinstance(value, str) and holds_secret(value, masker):
                found.append(f"memoryd.{name}.{field.name}")
    for index, entry in enumerate(_tables(document.table.get("providers"))):
        value = entry.get("base_url")
        if isinstance(value, str) and holds_secret(value, mask_url):
            found.append(f"memoryd.providers[{index}].base_url")
    auth = document.table.get("auth")
    tokens = auth.get("tokens") if isinstance(auth, dict) else None
    found += [
        f"memoryd.auth.tokens[{index}].token"
        for index, entry in enumerate(_tables(tokens))
        if "token" in entry
    ]
    return tuple(found)


def _tables(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


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
    document = _document(env, config_path, Path(home_text or DEFAULT_HOME).expanduser())
    if home:
        home_origin = "flag"
    elif env.get("MEMORYD_HOME"):
        home_origin = "environment"
    else:
        home_origin = "file" if "home" in document.table else "default"
    origins = {"memoryd.home": home_origin}
    for name, cls in SECTIONS.items():
        values = document.section(name)
        for field in cls.fields():
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


def data_home(env: Mapping[str, str], *, home: str | None, config_path: str | None) -> Path:
    """The data directory, as `serve` would find it (--home, $MEMORYD_HOME, [memoryd] home in
    the config file, ~/.memoryd), without checking the rest of the settings."""
    chosen = home or env.get("MEMORYD_HOME")
    if chosen:
        return Path(chosen).expanduser().resolve()
    default = Path(DEFAULT_HOME).expanduser()
    return _home(_document(env, config_path, default), None).resolve()


def data_storage(
    env: Mapping[str, str], *, home: str | None, config_path: str | None
) -> tuple[Path, StorageSettings]:
    """The data directory and [memoryd.storage], as `serve` would find them, without checking
    the rest of the settings (the CLI's data commands have no server's token variables)."""
    chosen = home or env.get("MEMORYD_HOME")
    document = _document(env, config_path, Path(chosen or DEFAULT_HOME).expanduser())
    storage = _build_section("storage", StorageSettings, document, env)
    if not isinstance(storage, StorageSettings):  # pragma: no cover - built from that class
        raise TypeError("memoryd.storage")
    return _home(document, chosen).expanduser().resolve(), storage


def cli_token(env: Mapping[str, str]) -> str | None:
    """The token the CLI sends: $MEMORYD_TOKEN, else the file named by [memoryd.auth]
    cli_token_file in the config file ($MEMORYD_CONFIG, else <home>/config.toml). The config is
    read without checking the server's own tokens, whose variables the CLI does not have."""
    if env.get("MEMORYD_TOKEN"):
        return env["MEMORYD_TOKEN"].strip()
    home = Path(env.get("MEMORYD_HOME") or DEFAULT_HOME).expanduser()
    try:
        auth = _document(env, None, home).section("auth")
    except StartupError:
        return None
    named = auth.get("cli_token_file")
    if not isinstance(named, str) or not named:
        return None
    try:
        return Path(named).expanduser().read_text(encoding="utf-8").strip() or None
    except OSError as error:
        raise StartupError(
            f"memoryd.auth.cli_token_file {named} cannot be read: {error.strerror}"
        ) from None


def config_document(
    env: Mapping[str, str], *, config_path: str | None = None, home: str | None = None
) -> Document:
    """The config file load_settings would read (--config, $MEMORYD_CONFIG, <home>/config.toml)."""
    chosen = Path(home or env.get("MEMORYD_HOME") or DEFAULT_HOME).expanduser()
    return _document(env, config_path, chosen)


def _document(env: Mapping[str, str], config_path: str | None, home: Path) -> Document:
    return read_document(config_path or env.get("MEMORYD_CONFIG"), home)


def _home(document: Document, chosen: str | None) -> Path:
    """The data directory: `chosen` (flag or environment), else the file's, else the default."""
    if chosen:
        return Path(chosen).expanduser()
    if "home" not in document.table:
        return Path(DEFAULT_HOME).expanduser()
    value = document.table["home"]
    if not isinstance(value, str) or not value.strip():
        raise StartupError(f"{document.where}memoryd.home must be a non-empty string")
    return Path(value).expanduser()


def _build_section(
    name: str, cls: type[Section], document: Document, env: Mapping[str, str]
) -> Section:
    values = document.section(name)
    hints = typing.get_type_hints(cls)
    fields = {field.name for field in cls.fields()}
    for key in values:
        if key not in fields:
            raise StartupError(f"{document.where}unknown setting memoryd.{name}.{key}")
    prefix = f"MEMORYD_{name.upper()}_"
    for variable in env:
        if variable.startswith(prefix) and variable[len(prefix) :].lower() not in fields:
            raise StartupError(f"unknown environment setting {variable}")
    chosen: dict[str, Any] = {}
    for key in sorted(fields):
        variable = prefix + key.upper()
        if variable in env:
            chosen[key] = _coerce(_parse_env(env[variable]), hints[key], variable)
        elif key in values:
            chosen[key] = _coerce(values[key], hints[key], f"{document.where}memoryd.{name}.{key}")
    section = cls(**chosen)
    _check_numbers(name, section)
    try:
        section.validate()
    except StartupError as error:
        raise StartupError(f"{document.where}{error}") from None
    return section


def _check_numbers(name: str, section: Section) -> None:
    """Counts and sizes are positive; durations (_ms, _seconds) may be 0, never negative."""
    for field in section.fields():
        value = getattr(section, field.name)
        label = f"memoryd.{name}.{field.name}"
        is_number = isinstance(value, int | float) and not isinstance(value, bool)
        if is_number and (field.name.endswith(("_ms", "_seconds")) or field.name in ZERO_ALLOWED):
            if value < 0:
                raise StartupError(f"{label} must not be negative, got {value}")
        elif is_number and value <= 0:
            raise StartupError(f"{label} must be positive, got {value}")


def _check_embedding_provider(
    search: SearchSettings, providers: tuple[ProviderSettings, ...], where: str
) -> None:
    if search.embeddings != "provider":
        return
    label = f"{where}memoryd.search"
    if not search.embedding_model.strip():
        raise StartupError(
            f'{label}.embedding_model must name the model for embeddings = "provider"'
        )
    names = [provider.name for provider in providers]
    if not names:
        raise StartupError(
            f'{label}.embeddings = "provider" needs a [[memoryd.providers]] entry to call'
        )
    if search.embedding_provider and search.embedding_provider not in names:
        raise StartupError(
            f"{label}.embedding_provider {search.embedding_provider!r} is not a provider's name "
            f"({', '.join(names)})"
        )


def _providers(entries: Any, where: str) -> tuple[ProviderSettings, ...]:
    """[[memoryd.providers]]: every entry typed and checked; names unique."""
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise StartupError(f"{where}memoryd.providers must be an array of tables")
    hints = typing.get_type_hints(ProviderSettings)
    fields = {field.name for field in dataclasses.fields(ProviderSettings)}
    required = {"name", "base_url", "model"}
    providers: list[ProviderSettings] = []
    for index, entry in enumerate(entries):
        label = f"{where}memoryd.providers[{index}]"
        unknown = sorted(set(entry) - fields)
        if unknown:
            raise StartupError(f"{label}: unknown setting {unknown[0]}")
        missing = sorted(required - set(entry))
        if missing:
            raise StartupError(f"{label}: {missing[0]} is required")
        values = {key: _coerce(value, hints[key], f"{label}.{key}") for key, value in entry.items()}
        provider = ProviderSettings(**values)
        provider.validate(label)
        providers.append(provider)
    names = [provider.name for provider in providers]
    for name in names:
        if names.count(name) > 1:
            raise StartupError(f"{where}memoryd.providers: name {name!r} is used twice")
    return tuple(providers)


def _parse_env(text: str) -> Any:
    """Environment values are strings; read numbers and booleans as TOML would."""
    try:
        return tomllib.loads(f"value = {text}")["value"]
    except tomllib.TOMLDecodeError:
        return text


def _coerce_union(value: Any, args: tuple[Any, ...], label: str) -> Any:
    """A limit that may be "unbounded" (`int | None`), or a value that may be a named choice
    (`float | Literal["model"]`)."""
    if type(None) in args:
        # Optional limits are written as "unbounded" (or 0) for "no limit".
        if value in (UNBOUNDED, 0):
            return None
        inner = next(arg for arg in args if arg is not type(None))
        return _coerce(value, inner, f"{label} (a positive integer or {UNBOUNDED!r})")
    named = next(arg for arg in args if typing.get_origin(arg) is Literal)
    if value in typing.get_args(named):
        return value
    inner = next(arg for arg in args if arg is not named)
    choices = ", ".join(repr(arg) for arg in typing.get_args(named))
    return _coerce(value, inner, f"{label} (or {choices})")


def _coerce(value: Any, hint: Any, label: str) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is Literal:
        if value not in args:
            choices = ", ".join(repr(arg) for arg in args)
            raise StartupError(f"{label} must be one of {choices}, got {value!r}")
        return value
    if origin in (types.UnionType, typing.Union):
        return _coerce_union(value, args, label)
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
