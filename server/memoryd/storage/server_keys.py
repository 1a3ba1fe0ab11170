"""The database's own secret keys (table server_keys, made by migration 0004)."""

from __future__ import annotations

from memoryd.storage.sql import one
from memoryd.storage.transaction import Transaction


def page_token_key(connection: Transaction) -> bytes:
    """The key that signs page tokens."""
    return _key(connection, "page_tokens")


def log_names_key(connection: Transaction) -> bytes:
    """The key of the hashed identifiers in the log (memoryd.log_names)."""
    return _key(connection, "log_names")


def _key(connection: Transaction, name: str) -> bytes:
    value = one(connection, "SELECT value FROM server_keys WHERE name = ?", (name,))[0]
    return bytes(value)
