"""The database's own secret keys (table server_keys, made by migration 0004)."""

from __future__ import annotations

import apsw

from memoryd.storage.sql import one


def page_token_key(connection: apsw.Connection) -> bytes:
    """The key that signs page tokens."""
    value = one(connection, "SELECT value FROM server_keys WHERE name = 'page_tokens'")[0]
    return bytes(value)
