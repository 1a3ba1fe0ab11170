"""The effective settings as a document an operator may read (`memoryd config show`, and
GetServerInfo): every secret masked by the one rule of memoryd.config.secrets (passwords of the
connection string and of URLs, key-like query values), API keys shown as set or not, tokens by
their fingerprints only."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from memoryd.config.secrets import MASK, mask_setting, mask_url
from memoryd.config.settings import SECTIONS, Settings


def effective(settings: Settings, env: Mapping[str, str]) -> dict[str, Any]:
    """The settings as a document, secrets masked."""
    memoryd: dict[str, Any] = {
        "home": str(settings.home),
        "config_file": str(settings.config_path) if settings.config_path else "(none)",
    }
    for name in SECTIONS:
        section = getattr(settings, name)
        memoryd[name] = {
            field.name: _shown(field, getattr(section, field.name)) for field in section.fields()
        }
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


def _shown(field: dataclasses.Field[Any], value: Any) -> Any:
    if value is None:
        return "unbounded"
    return mask_setting(field, value)
