"""How log lines name agents, owners, conversations and model sessions.

An erasure (PurgeOwner, PurgeConversation) removes an owner's identifiers from every file memoryd
keeps, but the log is a stream memoryd has already written. With [memoryd.server]
log_identifiers = "plain" (the default) log lines name conversations as adapters do, which is
what debugging wants; with "hashed", every identifier in a log line is a keyed hash (HMAC-SHA256
under a key kept in the database, server_keys.log_names): the same id always gives the same
name, so lines still correlate, yet a name cannot be traced back to an id without the key.
`memoryd log-name ID ...` prints the names of given ids, to find their lines.

The choice is process-wide, made once when the server starts (`use`).
"""

from __future__ import annotations

import hashlib
import hmac

from memoryd.domain.conversation import ConversationKey

PREFIX = "h:"
_DIGITS = 16  # 64 bits: no two of a deployment's ids share a name in practice
_key: bytes | None = None


def use(key: bytes | None) -> None:
    """Name identifiers by keyed hashes under `key` from now on (None: as they are)."""
    global _key  # noqa: PLW0603 - one process-wide choice, made at start-up
    _key = key


def hashed(value: str, key: bytes) -> str:
    """The logged name of `value` under `key`."""
    digest = hmac.new(key, value.encode("utf-8"), hashlib.sha256).hexdigest()
    return PREFIX + digest[:_DIGITS]


def name(value: str) -> str:
    """An identifier (or a model session id) as log lines show it."""
    return value if _key is None else hashed(value, _key)


def conversation(key: ConversationKey) -> str:
    """A conversation as log lines show it."""
    if _key is None:
        return key.describe()
    return f"{name(key.scope_id)} (agent {name(key.agent_id)}, owner {name(key.owner_id)})"
