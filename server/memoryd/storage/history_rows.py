"""What the history SQL modules share: column lists, key filters, row mapping, query helpers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw

from memoryd.domain.conversation import ConversationKey
from memoryd.domain.history import WindowState
from memoryd.domain.messages import Role, StoredMessage, Trust
from memoryd.domain.timestamps import from_text

KEY_COLUMNS = ("agent_id", "owner_id", "channel", "chat_id", "thread_scope")
# A message alias `m` restricted to one conversation (five parameters, in KEY_COLUMNS order).
KEY_MATCH = " AND ".join(f"m.{column} = ?" for column in KEY_COLUMNS)
# The conversations row of one conversation (five parameters).
CONVERSATION_MATCH = "(agent_id, owner_id, channel, chat_id, thread_scope) = (?, ?, ?, ?, ?)"
MESSAGE_COLUMNS = (
    "m.id, m.agent_id, m.owner_id, m.channel, m.chat_id, m.thread_scope, m.sender, m.role, "
    "m.kind, m.content, m.metadata_json, m.client_message_id, m.created_at, m.trust"
)
MESSAGE_COLUMN_COUNT = 14
Row = tuple[Any, ...]


def rows(connection: apsw.Connection, sql: str, params: Sequence[Any] = ()) -> list[Row]:
    """Every row of a statement."""
    found: list[Row] = connection.execute(sql, params).fetchall()
    return found


def one(connection: apsw.Connection, sql: str, params: Sequence[Any] = ()) -> Row:
    """The single row a statement always returns (an aggregate, a RETURNING of a known row)."""
    return rows(connection, sql, params)[0]


def message_from_row(row: Row, keys: dict[Row, ConversationKey]) -> StoredMessage:
    """A StoredMessage from MESSAGE_COLUMNS; `keys` shares key objects between rows."""
    key_row = tuple(row[1:6])
    key = keys.get(key_row)
    if key is None:
        key = keys[key_row] = ConversationKey(*key_row)
    return StoredMessage(
        id=row[0],
        key=key,
        sender=row[6],
        role=Role(row[7]),
        kind=row[8],
        content=row[9],
        metadata_json=row[10],
        client_message_id=row[11],
        created_at=from_text(row[12]),
        trust=Trust(row[13]),
    )


def window_state_from_row(row: Row) -> WindowState:
    """A WindowState from (window_start_id, window_started_at, history_version)."""
    return WindowState(
        window_start_id=int(row[0]),
        window_started_at=from_text(row[1]) if row[1] else None,
        history_version=int(row[2]),
    )
