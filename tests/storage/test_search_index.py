"""The full-text indexes stay exact through set-based appends, deletes and edits."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryd.domain.conversation import ConversationKey
from memoryd.domain.messages import NewMessage, Role, Trust
from memoryd.storage.connection import SqliteConnection
from memoryd.storage.history_writes import AppendRequest, append_batch, purge_conversation
from memoryd.storage.migrations import bundled_migrations, migrate

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


@pytest.fixture
def database(tmp_path: Path) -> Iterator[SqliteConnection]:
    """A migrated database, as the writer's connection sees it."""
    connection = SqliteConnection(str(tmp_path / "memory.db"))
    connection.execute("PRAGMA foreign_keys = ON")
    migrate(connection, bundled_migrations())
    yield connection
    connection.close()


def key(chat: str) -> ConversationKey:
    return ConversationKey("main", "default", "t", chat, "root")


def message(content: str, client_id: str | None = None) -> NewMessage:
    return NewMessage(
        sender="ada",
        role=Role.USER,
        kind="chat_message",
        content=content,
        metadata_json="{}",
        client_message_id=client_id,
        created_at=None,
        trust=Trust.OPERATOR,
        tokens=len(content.split()),
    )


def word_hits(connection: SqliteConnection, word: str) -> list[int]:
    found = connection.execute(
        "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rowid", (word,)
    )
    return [row[0] for row in found]


def substring_hits(connection: SqliteConnection, piece: str) -> list[int]:
    found = connection.execute(
        "SELECT rowid FROM messages_trigram WHERE content LIKE ? ORDER BY rowid", (f"%{piece}%",)
    )
    return [row[0] for row in found]


def check_integrity(connection: SqliteConnection) -> None:
    for table in ("messages_fts", "messages_trigram"):
        connection.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('integrity-check', 1)")


def test_a_batch_of_appends_is_indexed_with_ids_in_request_order(
    database: SqliteConnection,
) -> None:
    requests = [
        AppendRequest(key("a"), (message("walrus one"), None, message("walrus two")), NOW),
        AppendRequest(key("b"), (message("walrus three", "x"), message("dup", "x")), NOW),
    ]
    with database:
        results = append_batch(database, requests)
    stored = [item.message for result in results for item in result.messages if item.message]
    assert [m.content for m in stored] == [
        "walrus one",
        "walrus two",
        "walrus three",
        "walrus three",
    ]
    ids = [m.id for m in stored[:3]]
    assert ids == sorted(ids)
    assert stored[3].id == stored[2].id  # the duplicate in the same batch is the first row
    rows = {
        int(row[0]): str(row[1]) for row in database.execute("SELECT id, content FROM messages")
    }
    assert all(rows[m.id] == m.content for m in stored)
    assert word_hits(database, "walrus") == ids
    assert substring_hits(database, "alru") == ids
    check_integrity(database)


def test_purge_and_edits_keep_the_indexes_exact(database: SqliteConnection) -> None:
    with database:
        (kept,), (_gone,) = (
            result.stored
            for result in append_batch(
                database,
                [
                    AppendRequest(key("keep"), (message("old narwhal"),), NOW),
                    AppendRequest(key("gone"), (message("secret platypus"),), NOW),
                ],
            )
        )
    with database:
        purge_conversation(database, key("gone"))
        database.execute("UPDATE messages SET content = 'new narwhal' WHERE id = ?", (kept.id,))
    assert word_hits(database, "platypus") == []
    assert substring_hits(database, "platyp") == []
    assert word_hits(database, "old") == []
    assert word_hits(database, "new") == [kept.id]
    check_integrity(database)
