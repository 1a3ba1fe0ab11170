"""The secrets settings may hold, and the one rule that masks them wherever settings are shown or
quoted: `memoryd config show`, GetServerInfo (the console's settings page), start-up errors and
the log.

What is secret:
- a token: never shown at all, only its fingerprint (memoryd.config.tokens);
- a provider's API key: read from the environment only, shown as set or not;
- the password of a PostgreSQL connection string (`[memoryd.storage] dsn`), in either of its
  forms: a URI (`postgresql://user:PASSWORD@host/db`, or `?password=`) or libpq's keywords
  (`host=... password=PASSWORD`, quoted or not), and its `sslpassword`;
- the password in any URL setting (a provider's base_url, the OTLP endpoint), and query values
  whose names say key, token, secret or password.

Each setting that can hold one says how it is masked (`secret` in its field's metadata, read by
`mask_setting`). `Redactor` replaces the secrets of the running settings in any text (log lines,
start-up errors), for what a library quotes that memoryd did not write itself.
"""

from __future__ import annotations

import contextlib
import json
import re
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from memoryd.config.secret_files import read_secret_file
from memoryd.errors import StartupError

MASK = "********"
# The libpq keywords whose values are secrets.
DSN_SECRETS = ("password", "sslpassword")
# Query parameters whose values are secrets, by what their names contain.
SECRET_NAMES = ("key", "token", "secret", "password")
_URI = re.compile(r"^postgres(ql)?://", re.IGNORECASE)
# One libpq `keyword = value` pair: a value is single-quoted (\\ and \' escaped) or bare.
_PAIR = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*('(?:[^'\\]|\\.)*'|[^\s']*)")
# A double-quoted fragment of an error message (libpq quotes the text it could not read).
_QUOTED = re.compile(r'"([^"]*)"')


def mask_url(url: str) -> str:
    """A URL with any password, and key-like query values, masked."""
    try:
        parts = urllib.parse.urlsplit(url)
        password = parts.password
    except ValueError:  # not a URL that can be read: show none of it
        return MASK if url else url
    netloc = parts.netloc
    if password is not None:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.partition(':')[0]}:{MASK}@{host}"
    query = urllib.parse.urlencode(
        [
            (name, MASK if _secret_name(name) else value)
            for name, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
        ],
        safe="*",
    )
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def mask_dsn(dsn: str) -> str:
    """A PostgreSQL connection string with its password(s) masked, in either form."""
    if _URI.match(dsn.strip()):
        return mask_url(dsn)
    masked, position = [], 0
    for match in _PAIR.finditer(dsn):
        if match.start() != position:  # text libpq could not read either: show none of it
            return MASK
        keyword, value = match.group(1), match.group(2)
        if keyword.lower() in DSN_SECRETS:
            value = MASK
        masked.append(f"{keyword}={value}")
        position = match.end()
    if dsn[position:].strip():
        return MASK
    return " ".join(masked)


def dsn_secrets(dsn: str) -> list[str]:
    """The secret values a connection string holds (its passwords), as written."""
    if _URI.match(dsn.strip()):
        return url_secrets(dsn)
    found = []
    for match in _PAIR.finditer(dsn):
        if match.group(1).lower() in DSN_SECRETS and match.group(2):
            value = match.group(2)
            if value.startswith("'"):
                value = re.sub(r"\\(.)", r"\1", value[1:-1])
            found.append(value)
    return found


def url_secrets(url: str) -> list[str]:
    """The secret values a URL holds: its password, key-like query values."""
    try:
        parts = urllib.parse.urlsplit(url)
        password = parts.password
    except ValueError:
        return [url] if url else []
    found = [urllib.parse.unquote(password)] if password else []
    found += [
        value
        for name, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
        if _secret_name(name) and value
    ]
    return found


def holds_secret(value: str, masker: Callable[[str], str]) -> bool:
    """Whether a setting's value holds a secret (masking it changes it)."""
    return bool(value) and masker(value) != value


def mask_setting(field: Any, value: Any) -> Any:
    """A setting's value as it may be shown: masked when its field says it can hold a
    secret."""
    masker = field.metadata.get("secret") if hasattr(field, "metadata") else None
    return masker(value) if masker is not None and isinstance(value, str) else value


def mask_quoted(text: str, keep: Iterable[str] = ()) -> str:
    """`text` with every double-quoted fragment masked but those in `keep` (libpq's keywords):
    a parser's error quotes what it could not read, which may be a piece of a password."""
    kept = frozenset(keep)
    return _QUOTED.sub(lambda m: m.group(0) if m.group(1) in kept else f'"{MASK}"', text)


def _secret_name(name: str) -> bool:
    return any(part in name.lower() for part in SECRET_NAMES)


class Redactor:
    """Replaces known secret values in any text (their JSON-escaped forms too)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        found: set[str] = set()
        for secret in secrets:
            if len(secret) >= 3:  # shorter would mask ordinary text, and hides nothing
                found |= {secret, json.dumps(secret, ensure_ascii=False)[1:-1]}
        # Longest first: a secret that contains another is masked whole.
        self._secrets = sorted(found, key=len, reverse=True)

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def redact(self, text: str) -> str:
        """`text` with every known secret masked."""
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return text

    @classmethod
    def of_settings(cls, settings: Any, env: Mapping[str, str]) -> Redactor:
        """The secrets of the running settings: the database's password(s), URL passwords and
        key-like query values, and the providers' API keys from the environment."""
        secrets = dsn_secrets(settings.storage.dsn)
        if settings.storage.dsn_env:
            secrets += dsn_secrets(env.get(settings.storage.dsn_env, ""))
        if settings.storage.password_file:
            with contextlib.suppress(StartupError):  # unreadable: no line can hold it
                secrets.append(read_secret_file(settings.storage.password_file, "password_file"))
        secrets += url_secrets(settings.tracing.otlp_endpoint)
        for provider in settings.providers:
            secrets += url_secrets(provider.base_url)
            if provider.api_key_env and env.get(provider.api_key_env):
                secrets.append(env[provider.api_key_env])
        return cls(secrets)
