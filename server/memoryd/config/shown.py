"""The effective settings as a document an operator may read (`memoryd setup show`, and
GetServerInfo): API keys masked, passwords and key-like query values in URLs masked, tokens by
their fingerprints only."""

from __future__ import annotations

import dataclasses
import urllib.parse
from collections.abc import Mapping
from typing import Any

from memoryd.config.settings import SECTIONS, Settings

MASK = "********"


def effective(settings: Settings, env: Mapping[str, str]) -> dict[str, Any]:
    """The settings as a document, secrets masked."""
    memoryd: dict[str, Any] = {
        "home": str(settings.home),
        "config_file": str(settings.config_path) if settings.config_path else "(none)",
    }
    for name in SECTIONS:
        section = dataclasses.asdict(getattr(settings, name))
        memoryd[name] = {k: ("unbounded" if v is None else v) for k, v in section.items()}
    memoryd["providers"] = [
        {
            "name": p.name,
            "base_url": mask_url(p.base_url),
            "model": p.model,
            "api_key_env": p.api_key_env or "(none)",
            "api_key": (MASK if env.get(p.api_key_env) else "(not set)")
            if p.api_key_env
            else "(none)",
            "context_window": p.context_window,
            "timeout_seconds": p.timeout_seconds,
        }
        for p in settings.providers
    ]
    # Tokens are never shown, not even masked: each by its fingerprint (as the RPC log names it).
    memoryd["auth"] = {
        "cli_token_file": settings.auth.cli_token_file or "(none)",
        "tokens": [
            {
                "fingerprint": token.fingerprint,
                "role": token.role,
                "agents": sorted(token.agents) if token.agents is not None else ["*"],
                "max_trust": token.max_trust or "(any)",
            }
            for token in settings.auth.tokens
        ],
    }
    return {"memoryd": memoryd}


def mask_url(url: str) -> str:
    """A URL with any password (and key-like query values) masked."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        netloc = netloc.replace(f":{parts.password}@", f":{MASK}@")
    query = urllib.parse.urlencode(
        [
            (k, MASK if any(s in k.lower() for s in ("key", "token", "secret")) else v)
            for k, v in urllib.parse.parse_qsl(parts.query)
        ]
    )
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
