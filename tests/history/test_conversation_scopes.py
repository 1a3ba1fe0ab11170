"""Two conversations never share a scope: conversation scope ids escape ':' and '%', and a
database written with the old ids is migrated (0005)."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

import memoryd_client as md
from memoryd.storage.connection import SqliteConnection
from memoryd.storage.migrations import bundled_migrations, migrate
from memoryd.testing.server_process import ServerProcess
from tests.helpers import fresh_conversation, owner_of, rpc_error, store

# Matrix room ids hold ':'; a thread id may too.
ROOM = "!room:example.org"


def colliding_pair() -> tuple[md.Conversation, md.Conversation]:
    """Two conversations whose old scope ids were both `matrix:!room:example.org:root`."""
    base = fresh_conversation()
    first = md.Conversation(agent_id=base.agent_id, channel="matrix", chat_id=ROOM)
    second = md.Conversation(
        agent_id=base.agent_id, channel="matrix", chat_id="!room", thread_scope="example.org:root"
    )
    return first, second


async def note(memory: md.Stubs, chat: md.Conversation, key: str) -> str:
    found = await memory.memory.GetMemory(
        md.GetMemoryRequest(conversation=chat, scope_type=md.SCOPE_TYPE_CONVERSATION, key=key)
    )
    return found.memory.value


async def test_conversations_whose_parts_join_alike_keep_their_own_notes(
    memory: md.Stubs,
) -> None:
    first, second = colliding_pair()
    a = await store(memory, first, "n", "A's note")
    b = await store(memory, second, "n", "B's note")
    assert a.id != b.id
    assert a.scope_id == "matrix:!room%3Aexample.org:root"
    assert b.scope_id == "matrix:!room:example.org%3Aroot"
    assert await note(memory, first, "n") == "A's note"
    assert await note(memory, second, "n") == "B's note"

    recalled = await memory.memory.Recall(
        md.RecallRequest(conversation=first, query="note", mode=md.SEARCH_MODE_LEXICAL)
    )
    assert [hit.memory.value for hit in recalled.hits] == ["A's note"]
    listed = await memory.memory.ListMemories(
        md.ListMemoriesRequest(conversation=second, scope_type=md.SCOPE_TYPE_CONVERSATION)
    )
    assert [item.memory.value for item in listed.memories] == ["B's note"]
    sources = await memory.memory.ListMemorySources(
        md.ListMemorySourcesRequest(owner=owner_of(first))
    )
    assert sorted(source.id for source in sources.sources) == [
        "conversation:matrix:!room%3Aexample.org:root",
        "conversation:matrix:!room:example.org%3Aroot",
    ]

    purged = await memory.conversations.PurgeConversation(
        md.PurgeConversationRequest(conversation=second)
    )
    assert purged.memories_deleted == 1
    assert await note(memory, first, "n") == "A's note"
    error = await rpc_error(note(memory, second, "n"))
    assert error.code() == grpc.StatusCode.NOT_FOUND


async def test_a_percent_sign_is_escaped_too(memory: md.Stubs) -> None:
    base = fresh_conversation()
    literal = md.Conversation(agent_id=base.agent_id, channel="t", chat_id="a%3Ab")
    colon = md.Conversation(agent_id=base.agent_id, channel="t", chat_id="a:b")
    assert (await store(memory, literal, "n", "literal")).scope_id == "t:a%253Ab:root"
    assert (await store(memory, colon, "n", "colon")).scope_id == "t:a%3Ab:root"
    assert await note(memory, literal, "n") == "literal"


CREATED = "2026-01-01T00:00:00.000Z"
COLLIDED = "matrix:!room:example.org:root"
OLD_ROWS = [
    # (id, scope_type, scope_id, key, the conversation it was written from); main, default.
    (1, "conversation", COLLIDED, "shared", COLLIDED),
    (2, "conversation", "t:a%b:root", "percent", "t:a%b:root"),
    (3, "conversation", "slack:C1:thread:7", "orphan", "slack:C1:thread:7"),
    (4, "owner", "default", "name", COLLIDED),
    (5, "conversation", "telegram:42:root", "plain", "telegram:42:root"),
]


def old_database(path: Path) -> SqliteConnection:
    """A version-4 database holding rows written with the old, ambiguous scope ids."""
    connection = SqliteConnection(str(path))
    migrations = bundled_migrations()
    migrate(connection, migrations[:4])
    with connection:
        for index, (channel, chat, thread) in enumerate(
            [
                ("matrix", ROOM, "root"),
                ("matrix", "!room", "example.org:root"),
                ("t", "a%b", "root"),
            ]
        ):
            connection.execute(
                "INSERT INTO conversations (id, agent_id, owner_id, channel, chat_id, "
                "thread_scope, history_version, search_scope, created_at) "
                "VALUES (?, 'main', 'default', ?, ?, ?, 1, '', ?)",
                (index + 1, channel, chat, thread, CREATED),
            )
        for memory_id, scope_type, scope_id, key, source in OLD_ROWS:
            connection.execute(
                "INSERT INTO memories (id, agent_id, owner_id, scope_type, scope_id, category, "
                "key, value, trust, source_id, source_type, source_name, search_scope, "
                "promote_target, created_at, updated_at) VALUES (?, 'main', 'default', ?, ?, "
                "?, ?, 'v', 'operator', ?, 'conversation', ?, '', 'none', ?, ?)",
                (
                    memory_id,
                    scope_type,
                    scope_id,
                    "identity" if scope_type == "owner" else "fact",
                    key,
                    f"conversation:{source}",
                    source,
                    CREATED,
                    CREATED,
                ),
            )
        for scope in {row[4] for row in OLD_ROWS}:
            connection.execute(
                "INSERT INTO memory_sources (agent_id, owner_id, id, source_type, name, "
                "memory_scope, created_at, updated_at) "
                "VALUES ('main', 'default', ?, 'conversation', ?, ?, ?, ?)",
                (f"conversation:{scope}", scope, scope, CREATED, CREATED),
            )
    return connection


def test_old_scope_ids_are_rewritten_from_their_conversations(tmp_path: Path) -> None:
    connection = old_database(tmp_path / "memory.db")
    assert migrate(connection, bundled_migrations()) == list(
        range(5, len(bundled_migrations()) + 1)
    )
    rows = {
        key: (scope_id, source_id, source_name)
        for key, scope_id, source_id, source_name in connection.execute(
            "SELECT key, scope_id, source_id, source_name FROM memories"
        )
    }
    shared = "matrix:!room%3Aexample.org:root"  # the conversation created first keeps it

    def written_in(scope: str) -> tuple[str, str, str]:
        return (scope, f"conversation:{scope}", scope)

    assert rows == {
        "shared": written_in(shared),
        "percent": written_in("t:a%25b:root"),
        "orphan": written_in("slack:C1%3Athread:7"),
        "name": ("default", f"conversation:{shared}", shared),
        "plain": written_in("telegram:42:root"),
    }
    sources = sorted(connection.execute("SELECT id, name, memory_scope FROM memory_sources"))
    assert sources == sorted(
        (f"conversation:{scope}", scope, scope)
        for scope in (shared, "t:a%25b:root", "slack:C1%3Athread:7", "telegram:42:root")
    )
    assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    connection.close()


@pytest.mark.sqlite_only("an old SQLite schema migrated")
async def test_a_migrated_database_serves_each_conversation_its_own_rows(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    old_database(home / "memory.db").close()
    server = start_server(home).start()
    async with md.connect(server.address) as channel:
        stub = md.Stubs(channel)
        first = md.Conversation(channel="matrix", chat_id=ROOM)
        second = md.Conversation(channel="matrix", chat_id="!room", thread_scope="example.org:root")
        assert await note(stub, first, "shared") == "v"
        error = await rpc_error(note(stub, second, "shared"))
        assert error.code() == grpc.StatusCode.NOT_FOUND
        assert await note(stub, md.Conversation(channel="t", chat_id="a%b"), "percent") == "v"
        orphan = md.Conversation(channel="slack", chat_id="C1:thread", thread_scope="7")
        assert await note(stub, orphan, "orphan") == "v"
