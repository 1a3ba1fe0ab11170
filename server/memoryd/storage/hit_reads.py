"""What a ranked message comes with: the rows of the hits by id, who said each and when with the
start of what it said (what a hit is judged by), and the messages before and after it in its
conversation. Each is looked up by id only (memoryd.storage.search_reads ranks)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memoryd.domain.conversation import (
    ConversationKey,
    HistoryScope,
)
from memoryd.domain.fusion import Said
from memoryd.domain.messages import StoredMessage
from memoryd.domain.timestamps import from_text
from memoryd.storage.engine import engine_of
from memoryd.storage.message_rows import (
    MESSAGE_COLUMNS,
    message_from_row,
)
from memoryd.storage.search_reads import add_scope
from memoryd.storage.sql import (
    KEY_COLUMNS,
    Row,
    add_kinds,
    placeholders,
    rows,
)
from memoryd.storage.transaction import Transaction


def messages_by_ids(
    connection: Transaction,
    scope: HistoryScope,
    message_ids: Sequence[int],
    kinds: tuple[str, ...],
) -> dict[int, StoredMessage]:
    """The messages of the scope (and kinds) among these ids, by id. Looked up by id only: left
    to itself, SQLite's planner (which has no statistics) reads an agent's whole index instead
    of 50 rows by id (140 ms in an agent of 1,000,000 messages)."""
    if not message_ids:
        return {}
    sql = [
        (
            f"SELECT {MESSAGE_COLUMNS} FROM messages AS m{engine_of(connection).not_indexed} "
            f"WHERE m.id IN ({placeholders(len(message_ids))})"
        )
    ]
    params: list[Any] = list(message_ids)
    add_scope(sql, params, scope)
    add_kinds(sql, params, kinds)
    names: dict[Row, ConversationKey] = {}
    found = (message_from_row(row, names) for row in rows(connection, " ".join(sql), params))
    return {message.id: message for message in found}


# The start of a ranked message read to judge it (memoryd.domain.relevance: a longer message
# holds more words than it takes to judge it).
SAID_CHARS = 4000


def said(connection: Transaction, message_ids: Sequence[int]) -> dict[int, Said]:
    """Who said each message and when, the start of what it said, and its conversation: what
    a ranked message is judged and weighed by. Looked up by id only (as messages_by_ids)."""
    if not message_ids:
        return {}
    sql = [
        (
            f"SELECT m.id, m.sender, m.created_at, substr(m.content, 1, {SAID_CHARS}), "
            f"{', '.join(f'm.{column}' for column in KEY_COLUMNS)} "
            f"FROM messages AS m{engine_of(connection).not_indexed} "
            f"WHERE m.id IN ({placeholders(len(message_ids))})"
        )
    ]
    params: list[Any] = list(message_ids)
    return {
        int(row[0]): Said(str(row[1]), from_text(str(row[2])), str(row[3]), tuple(row[4:]))
        for row in rows(connection, " ".join(sql), params)
    }


def neighbours(
    connection: Transaction, message_ids: Sequence[int]
) -> dict[int, tuple[int | None, int | None]]:
    """The message before and the one after each message, in its own conversation."""
    if not message_ids:
        return {}
    same = " AND ".join(f"n.{column} = m.{column}" for column in KEY_COLUMNS)
    before = f"SELECT max(n.id) FROM messages AS n WHERE {same} AND n.id < m.id"
    after = f"SELECT min(n.id) FROM messages AS n WHERE {same} AND n.id > m.id"
    found = rows(
        connection,
        f"SELECT m.id, ({before}), ({after}) "
        f"FROM messages AS m WHERE m.id IN ({placeholders(len(message_ids))})",
        list(message_ids),
    )
    return {int(row[0]): (row[1], row[2]) for row in found}
