"""What the history SQL modules share: the message column list and row mapping."""

from __future__ import annotations

from memoryd.domain.conversation import ConversationKey
from memoryd.domain.history import WindowState
from memoryd.domain.messages import Role, StoredMessage, Trust
from memoryd.domain.timestamps import from_text
from memoryd.storage.sql import KEY_COLUMNS, Columns, Row

MESSAGE = Columns(
    "m",
    (
        "id",
        *KEY_COLUMNS,
        "sender",
        "role",
        "kind",
        "content",
        "metadata_json",
        "client_message_id",
        "created_at",
        "trust",
    ),
)
MESSAGE_COLUMNS = MESSAGE.select


def message_key_row(row: Row) -> Row:
    """The conversation key columns of a MESSAGE_COLUMNS row."""
    return tuple(row[1 : 1 + len(KEY_COLUMNS)])


def message_from_row(row: Row, keys: dict[Row, ConversationKey]) -> StoredMessage:
    """A StoredMessage from MESSAGE_COLUMNS; `keys` shares key objects between rows."""
    key_row = message_key_row(row)
    key = keys.get(key_row)
    if key is None:
        key = keys[key_row] = ConversationKey(*key_row)
    column = MESSAGE.named(row)
    return StoredMessage(
        id=column["id"],
        key=key,
        sender=column["sender"],
        role=Role(column["role"]),
        kind=column["kind"],
        content=column["content"],
        metadata_json=column["metadata_json"],
        client_message_id=column["client_message_id"],
        created_at=from_text(column["created_at"]),
        trust=Trust(column["trust"]),
    )


def window_state_from_row(row: Row) -> WindowState:
    """A WindowState from (window_start_id, window_started_at, history_version)."""
    return WindowState(
        window_start_id=int(row[0]),
        window_started_at=from_text(row[1]) if row[1] else None,
        history_version=int(row[2]),
    )
