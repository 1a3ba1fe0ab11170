"""The full-text indexes stay exact: bulk indexing per group, deletes and edits of queued rows."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

import memoryd_client as md
from memoryd.storage.history_writes import index_queued_messages
from memoryd.storage.migrations import bundled_migrations, migrate
from tests.helpers import append, user
from tests.server_process import ServerProcess

INSERT = (
    "INSERT INTO messages (agent_id, owner_id, channel, chat_id, thread_scope, sender, role, kind, "
    "content, trust, created_at) VALUES ('main', 'default', 't', 'c', 'root', 'ada', 'user', "
    "'chat_message', ?, 'operator', '2026-01-01T00:00:00.000Z') RETURNING id"
)


@pytest.fixture
def database(tmp_path: Path) -> Iterator[apsw.Connection]:
    """A migrated database with one conversation."""
    connection = apsw.Connection(str(tmp_path / "memory.db"))
    connection.execute("PRAGMA foreign_keys = ON")
    migrate(connection, bundled_migrations())
    connection.execute(
        "INSERT INTO conversations (agent_id, owner_id, channel, chat_id, thread_scope, "
        "history_version, search_scope, created_at) "
        "VALUES ('main', 'default', 't', 'c', 'root', 0, 'c1 o1 a1', 'x')"
    )
    yield connection
    connection.close()


def insert(connection: apsw.Connection, content: str) -> int:
    return int(connection.execute(INSERT, (content,)).fetchall()[0][0])


def word_hits(connection: apsw.Connection, word: str) -> list[int]:
    return [
        r[0]
        for r in connection.execute(
            "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?", (word,)
        )
    ]


def substring_hits(connection: apsw.Connection, piece: str) -> list[int]:
    return [
        r[0]
        for r in connection.execute(
            "SELECT rowid FROM messages_trigram WHERE content LIKE ?", (f"%{piece}%",)
        )
    ]


def check_integrity(connection: apsw.Connection) -> None:
    for table in ("messages_fts", "messages_trigram"):
        connection.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('integrity-check', 1)")


def test_new_rows_are_queued_then_indexed_in_bulk(database: apsw.Connection) -> None:
    with database:
        ids = [insert(database, f"walrus number {n}") for n in range(5)]
        assert word_hits(database, "walrus") == []  # queued, not yet indexed
        assert index_queued_messages(database) == 5
    assert word_hits(database, "walrus") == ids
    assert substring_hits(database, "alru") == ids
    assert database.execute("SELECT count(*) FROM messages_index_queue").fetchall() == [(0,)]
    check_integrity(database)


def test_deleting_a_queued_row_leaves_the_indexes_exact(database: apsw.Connection) -> None:
    with database:
        kept = insert(database, "kept platypus")
        index_queued_messages(database)
        queued = insert(database, "queued platypus")
        database.execute("DELETE FROM messages WHERE id = ?", (queued,))
        indexed_then_deleted = kept
        database.execute("DELETE FROM messages WHERE id = ?", (indexed_then_deleted,))
        assert index_queued_messages(database) == 0
    assert word_hits(database, "platypus") == []
    check_integrity(database)


def test_editing_rows_reindexes_them(database: apsw.Connection) -> None:
    with database:
        indexed = insert(database, "old narwhal")
        index_queued_messages(database)
        queued = insert(database, "old beluga")
        database.execute("UPDATE messages SET content = 'new narwhal' WHERE id = ?", (indexed,))
        database.execute("UPDATE messages SET content = 'new beluga' WHERE id = ?", (queued,))
        index_queued_messages(database)
    assert word_hits(database, "old") == []
    assert word_hits(database, "new") == [indexed, queued]
    check_integrity(database)


async def test_rows_written_by_another_tool_are_indexed_at_start(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    first = start_server(home).start()
    conversation = md.Conversation(channel="t", chat_id="c")
    async with md.connect(first.address) as channel:
        await append(md.MemoryServiceStub(channel), conversation, user("written by memoryd"))
    assert first.stop() == 0

    database = sqlite3.connect(home / "memory.db")
    with database:
        database.execute(INSERT.removesuffix(" RETURNING id"), ("imported by hand: a manatee",))
    database.close()

    second = start_server(home).start()
    assert second.events("index_recovered")[0]["messages"] == 1
    async with md.connect(second.address) as channel:
        response = await md.MemoryServiceStub(channel).SearchHistory(
            md.SearchHistoryRequest(query="manatee", conversation=conversation)
        )
        assert [hit.message.content for hit in response.hits] == ["imported by hand: a manatee"]
