"""Erasure leaves no statistics and no name of the chat: after PurgeOwner and PurgeConversation,
the planner's statistics (PostgreSQL's pg_statistic, taken before the purge as autovacuum takes
them; SQLite's sampled index keys) hold none of the erased values, and the receipt says so; a
purged conversation's memory source goes, and neither the revision its purge writes nor the
rows learnt in it name its chat any more."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

import memoryd_client as md
from memoryd.storage.connection import SqliteConnection
from memoryd.testing.postgres import database_dsn
from memoryd.testing.server_process import ServerProcess
from tests.backends import heap_tuples, on_postgres, postgres_rows

# Exercises storage: make test runs it on PostgreSQL too.
pytestmark = pytest.mark.storage

MESSAGES = 40


def sql(dsn: str, statement: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as connection:
        cursor = connection.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def statistics_holding(dsn: str, marker: str) -> int:
    """Rows of pg_statistic whose sampled values (any of its five slots) name `marker`, read
    as text, plus the row versions in its file that hold its bytes (the test's PostgreSQL is
    local, and we are its superuser): an ANALYZE leaves the rows it replaced in the file until
    pg_statistic is vacuumed."""
    slots = " || ' ' || ".join(f"coalesce(stavalues{n}::text, '')" for n in range(1, 6))
    live = sql(dsn, f"SELECT count(*) FROM pg_statistic WHERE {slots} LIKE %s", (f"%{marker}%",))
    sql(dsn, "CHECKPOINT")
    (data,) = sql(
        dsn,
        "SELECT pg_read_binary_file(pg_relation_filepath('pg_statistic'), 0, "
        "pg_relation_size('pg_statistic'), true)",
    )[0]
    stored = sum(marker.encode() in row for row in heap_tuples(bytes(data)))
    return int(live[0][0]) + stored


def fill(address: str, owner: str, chat: str) -> md.Conversation:
    """Messages naming `chat` in their words and in their chat id, a row learnt in the chat."""
    conversation = md.Conversation(owner_id=owner, channel="telegram", chat_id=chat)
    with md.connect_sync(address) as channel:
        memory = md.SyncStubs(channel)
        memory.conversations.AppendMessages(
            md.AppendMessagesRequest(
                conversation=conversation,
                messages=[
                    md.NewMessage(role=md.ROLE_USER, sender=owner, content=f"about {chat} {n}")
                    for n in range(MESSAGES)
                ],
            )
        )
        memory.memory.StoreMemory(
            md.StoreMemoryRequest(
                conversation=conversation,
                category=md.CATEGORY_PREFERENCE,
                key="pref",
                value=f"Likes tea ({owner})",
            )
        )
    return conversation


@pytest.mark.parametrize("first", ["owner", "conversation"])
def test_a_purge_leaves_no_value_in_postgres_statistics(
    postgres_base: str, tmp_path: Path, first: str
) -> None:
    """Two owners; statistics taken while both are there; the first erased (its tables keep
    the other's rows, so ANALYZE samples those), then the second (the tables are left empty,
    whose old statistics ANALYZE would keep)."""
    dsn = database_dsn(postgres_base, tmp_path / "db")
    server = ServerProcess(
        tmp_path / "home",
        env={"MEMORYD_STORAGE_BACKEND": "postgres", "MEMORYD_STORAGE_DSN": dsn},
    ).start()
    try:
        victim = f"v{uuid.uuid4().hex[:10]}"
        keeper = f"k{uuid.uuid4().hex[:10]}"
        chats = {victim: fill(server.address, victim, f"{victim}chat")}
        chats[keeper] = fill(server.address, keeper, f"{keeper}chat")
        sql(dsn, "ANALYZE")  # as autovacuum would, before the purge
        for owner in (victim, keeper):
            assert statistics_holding(dsn, f"{owner}chat") > 0
        with md.connect_sync(server.address) as channel:
            memory = md.SyncStubs(channel)
            for owner in (victim, keeper):
                receipt: md.PurgeOwnerResponse | md.PurgeConversationResponse
                if first == "owner":
                    receipt = memory.admin.PurgeOwner(md.PurgeOwnerRequest(owner_id=owner))
                else:
                    receipt = memory.conversations.PurgeConversation(
                        md.PurgeConversationRequest(conversation=chats[owner])
                    )
                assert receipt.statistics_rebuilt
                assert receipt.wal_truncated
                assert statistics_holding(dsn, f"{owner}chat") == 0, owner
    finally:
        assert server.stop() == 0, server.output


def test_sqlite_sampled_keys_of_an_erased_owner_are_dropped(tmp_path: Path) -> None:
    if on_postgres():
        pytest.skip("SQLite's own statistics (PostgreSQL's: the test above)")
    server = ServerProcess(tmp_path / "home").start()
    try:
        victim = f"v{uuid.uuid4().hex[:10]}"
        fill(server.address, victim, f"{victim}chat")
        fill(server.address, "keeper", "keeperchat")
        database = SqliteConnection(str(server.home / "memory.db"))
        database.set_busy_timeout(10_000)
        database.execute("ANALYZE")  # as `memoryd restore` does (PRAGMA optimize)
        samples = b"".join(row[0] for row in database.execute("SELECT sample FROM sqlite_stat4"))
        database.close()
        assert f"{victim}chat".encode() in samples
        with md.connect_sync(server.address) as channel:
            receipt = md.SyncStubs(channel).admin.PurgeOwner(md.PurgeOwnerRequest(owner_id=victim))
        assert receipt.statistics_rebuilt
        assert receipt.wal_truncated
        for name in ("memory.db", "memory.db-wal"):
            path = server.home / name
            assert not path.exists() or f"{victim}chat".encode() not in path.read_bytes()
    finally:
        assert server.stop() == 0, server.output


def test_a_purged_conversation_leaves_no_source_and_no_chat_id(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "home").start()
    chat = f"c{uuid.uuid4().hex[:12]}"
    try:
        conversation = md.Conversation(owner_id="ada", channel="telegram", chat_id=chat)
        owner = md.OwnerScope(owner_id="ada")
        with md.connect_sync(server.address) as channel:
            memory = md.SyncStubs(channel)
            memory.conversations.AppendMessages(
                md.AppendMessagesRequest(
                    conversation=conversation,
                    messages=[md.NewMessage(role=md.ROLE_USER, content="hello")],
                )
            )
            learnt = memory.memory.StoreMemory(
                md.StoreMemoryRequest(
                    conversation=conversation,
                    category=md.CATEGORY_PREFERENCE,
                    key="tea",
                    value="Drinks green tea",
                )
            ).memory
            # A conversation context row renders into MEMORY.md: the purge writes a revision.
            memory.memory.StoreMemory(
                md.StoreMemoryRequest(
                    conversation=conversation,
                    scope_type=md.SCOPE_TYPE_CONVERSATION,
                    category=md.CATEGORY_CONTEXT,
                    key="ctx",
                    value="Planning a move",
                )
            )
            sources = memory.memory.ListMemorySources(md.ListMemorySourcesRequest(owner=owner))
            assert any(chat in source.id for source in sources.sources)
            memory.conversations.PurgeConversation(
                md.PurgeConversationRequest(conversation=conversation)
            )
            sources = memory.memory.ListMemorySources(md.ListMemorySourcesRequest(owner=owner))
            assert not any(chat in source.id or chat in source.name for source in sources.sources)
            kept = memory.memory.GetMemory(md.GetMemoryRequest(owner=owner, id=learnt.id)).memory
            assert kept.value == "Drinks green tea"
            assert chat not in str(kept.provenance)
            assert kept.provenance.source_name == "an erased conversation"
            ref = md.ResourceRef(type=md.RESOURCE_TYPE_MEMORY_MD, scope_id="ada")
            written = memory.resources.GetRevision(md.GetRevisionRequest(ref=ref)).revision
            assert written.mutation_source == "conversation_purge"
            assert chat not in written.provenance
            assert json.loads(written.provenance)["memory_ids"]
        if on_postgres():
            tables = [row[0] for row in postgres_rows(server.home, _TABLES)]
            for table in tables:
                found = postgres_rows(
                    server.home,
                    f"SELECT count(*) FROM {table} AS t WHERE t::text LIKE %s",
                    (f"%{chat}%",),
                )
                assert found == [(0,)], table
        else:
            for name in ("memory.db", "memory.db-wal"):
                path = server.home / name
                assert not path.exists() or chat.encode() not in path.read_bytes()
    finally:
        assert server.stop() == 0, server.output


_TABLES = (
    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
    "AND tablename <> 'schema_migrations'"
)
