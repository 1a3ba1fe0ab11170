"""The store's clock (migration 0015): one number that every write group advances.

Several processes may share one store. Each group of writes advances the clock in its own
transaction, so the versions follow commit order; a process that reads a version it did not
write knows another process committed (memoryd.services.coherence).
"""

from __future__ import annotations

from memoryd.storage.sql import one
from memoryd.storage.transaction import Transaction

ADVANCE = "UPDATE store_clock SET version = version + 1 WHERE id = 1 RETURNING version"


def advance(transaction: Transaction) -> int:
    """Advance the clock inside the writer's open transaction; the version this group commits."""
    return int(one(transaction, ADVANCE)[0])


def read(connection: Transaction) -> int:
    """The version of the last commit the connection's snapshot holds."""
    return int(one(connection, "SELECT version FROM store_clock WHERE id = 1")[0])
