"""[memoryd.auth]: the bearer tokens callers present, and the file the CLI reads its own from.

A token is checked once, at start-up (length, role, agents, trust cap), and kept only as its
SHA-256: memoryd.api.auth compares digests, and logs name a token by its fingerprint.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from typing import Any, Literal

from memoryd.config.secret_files import read_secret_file
from memoryd.errors import StartupError

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


def token_digest(token: str) -> bytes:
    """The SHA-256 a token is kept and compared as."""
    return hashlib.sha256(token.encode("utf-8")).digest()


def auth_settings(table: Any, env: Mapping[str, str], where: str) -> AuthSettings:
    """[memoryd.auth]: the tokens, each checked; a token is never kept in plain text."""
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
    return AuthSettings(tokens=tuple(tokens), cli_token_file=cli_file)


def _token(entry: dict[str, Any], index: int, env: Mapping[str, str], where: str) -> TokenSettings:
    label = f"{where}memoryd.auth.tokens[{index}]"
    unknown = sorted(
        set(entry) - {"token", "token_env", "token_file", "role", "agents", "max_trust"}
    )
    if unknown:
        raise StartupError(f"{label}: unknown setting {unknown[0]}")
    token, source = _token_value(entry, label, env)
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


def _token_value(entry: dict[str, Any], label: str, env: Mapping[str, str]) -> tuple[str, str]:
    """The token of an entry (from itself, the environment or a file), and where it came from
    for messages."""
    if sum(name in entry for name in ("token", "token_env", "token_file")) != 1:
        raise StartupError(f"{label}: set exactly one of token, token_env and token_file")
    if "token_file" in entry:
        named = entry["token_file"]
        if not isinstance(named, str) or not named:
            raise StartupError(f"{label}.token_file must name a file")
        token = read_secret_file(named, f"{label}.token_file")
        source = f"{label}.token_file"
    elif "token_env" in entry:
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
    return token, source
