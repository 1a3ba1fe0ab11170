"""Migrations: empty -> latest, re-run is a no-op, newer or edited schemas are refused."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import apsw
import pytest

from memoryd.errors import StartupError
from memoryd.log_events import Event
from memoryd.storage import checkpoint_split
from memoryd.storage.connection import SqliteConnection
from memoryd.storage.migrations import (
    Migration,
    bundled_migrations,
    check_sequence,
    latest_version,
    migrate,
    migration_line,
)
from memoryd.storage.sqlite_engine import SQLITE
from memoryd.testing.server_process import ServerProcess


def test_bundled_migrations_are_numbered_from_one() -> None:
    migrations = bundled_migrations()
    assert [m.version for m in migrations] == list(range(1, len(migrations) + 1))
    assert migrations[0].name == "conversation_history"


def test_empty_to_latest_then_rerun_is_a_no_op(tmp_path: Path) -> None:
    connection = SqliteConnection(str(tmp_path / "m.db"))
    migrations = bundled_migrations()
    assert migrate(connection, migrations) == [m.version for m in migrations]
    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_schema")}
    assert {"messages", "conversations", "messages_fts", "messages_trigram", "counters"} <= tables
    recorded = list(connection.execute("SELECT version, name, checksum FROM schema_migrations"))
    assert recorded == [(m.version, m.name, m.checksum) for m in migrations]
    schema = list(connection.execute("SELECT sql FROM sqlite_schema ORDER BY name"))
    assert migrate(connection, migrations) == []
    assert list(connection.execute("SELECT sql FROM sqlite_schema ORDER BY name")) == schema
    connection.close()


def test_a_failing_migration_leaves_no_trace(tmp_path: Path) -> None:
    connection = SqliteConnection(str(tmp_path / "m.db"))
    good = Migration(1, "good", "CREATE TABLE a (x INTEGER) STRICT;")
    bad = Migration(2, "bad", "CREATE TABLE b (x INTEGER) STRICT; INSERT INTO nowhere VALUES (1);")
    with pytest.raises(apsw.SQLError):
        migrate(connection, [good, bad])
    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_schema")}
    assert "a" in tables
    assert "b" not in tables  # the failed file's statements rolled back with it
    assert list(connection.execute("SELECT version FROM schema_migrations")) == [(1,)]
    connection.close()


def test_gaps_in_numbering_are_refused() -> None:
    with pytest.raises(StartupError, match=r"expected 0002, found 0003_c\.sql"):
        check_sequence([Migration(1, "a", ""), Migration(3, "c", "")])


@pytest.mark.sqlite_only(
    "SQLite's migrations (PostgreSQL's: tests/storage/test_postgres_operations.py)"
)
async def test_the_server_migrates_an_empty_home_and_not_again(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    first = start_server(home).start()
    latest = len(bundled_migrations())
    assert first.events(Event.MIGRATED)[0]["versions"] == list(range(1, latest + 1))
    assert first.stop() == 0
    second = start_server(home).start()
    assert second.events(Event.MIGRATED) == []
    assert second.events(Event.SERVING)[0]["schema_version"] == latest


def restart_after(start_server: type[ServerProcess], home: Path, sql: str) -> ServerProcess:
    """Create a database with a real server, change it with `sql`, start a server on it again."""
    assert start_server(home).start().stop() == 0
    database = sqlite3.connect(home / "memory.db")
    with database:
        database.execute(sql)
    database.close()
    return start_server(home)


@pytest.mark.sqlite_only(
    "SQLite's migrations (PostgreSQL's: tests/storage/test_postgres_operations.py)"
)
async def test_a_newer_database_is_refused(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    server = restart_after(
        start_server,
        home,
        "INSERT INTO schema_migrations VALUES (99, 'from_the_future', 'x', '2030-01-01')",
    )
    assert server.wait_exit() == 1
    assert (
        f"database {home / 'memory.db'} has schema version 99, newer than this memoryd supports"
        in server.output
    )
    assert "upgrade memoryd or use another --home" in server.output


@pytest.mark.sqlite_only(
    "SQLite's migrations (PostgreSQL's: tests/storage/test_postgres_operations.py)"
)
async def test_an_edited_migration_is_refused(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    server = restart_after(
        start_server,
        tmp_path / "home",
        "UPDATE schema_migrations SET checksum = 'edited' WHERE version = 1",
    )
    assert server.wait_exit() == 1
    assert (
        "migration 0001_conversation_history.sql was changed after it was applied" in server.output
    )


def test_a_version_1_database_is_upgraded_in_place(tmp_path: Path) -> None:
    """A database written before long-term memory keeps its messages and gains the new tables."""
    connection = SqliteConnection(str(tmp_path / "memory.db"))
    first, *rest = bundled_migrations()
    assert migrate(connection, [first]) == [1]
    connection.execute(
        "INSERT INTO conversations (agent_id, owner_id, channel, chat_id, thread_scope, "
        "history_version, search_scope, created_at) "
        "VALUES ('main', 'default', 't', '1', 'root', 1, '', '2026-01-01T00:00:00.000Z')"
    )
    connection.execute(
        "INSERT INTO messages (agent_id, owner_id, channel, chat_id, thread_scope, sender, role, "
        "kind, content, trust, created_at) VALUES ('main', 'default', 't', '1', 'root', 'ada', "
        "'user', 'chat_message', 'kept across the upgrade', 'operator', '2026-01-01T00:00:00.000Z')"
    )
    assert migrate(connection, [first, *rest]) == [m.version for m in rest]
    assert list(connection.execute("SELECT content FROM messages")) == [
        ("kept across the upgrade",)
    ]
    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_schema")}
    assert {
        "memories",
        "memories_fts",
        "memory_sources",
        "resources",
        "resource_revisions",
        "scheduled_jobs",
        "job_runs",
    } <= tables
    connection.close()


def test_0009_splits_a_shared_checkpoint_resource_by_owner(tmp_path: Path) -> None:
    """Two owners in one chat shared a checkpoint resource; each gets its own, revision
    numbers kept, a rollback following the revision it went back to, an orphan dropped."""
    connection = SqliteConnection(str(tmp_path / "m.db"))
    migrations = bundled_migrations()
    migrate(connection, migrations[:8])
    stamp = "2026-11-30T10:00:00.000000Z"
    for owner in ("vic:tim", "keeper"):
        connection.execute(
            "INSERT INTO conversations (agent_id, owner_id, channel, chat_id, thread_scope, "
            "search_scope, history_version, created_at) "
            "VALUES ('main', ?, 'telegram', 'c', 'root', '', 1, ?)",
            (owner, stamp),
        )
    ids = {}
    for owner in ("vic:tim", "keeper"):
        connection.execute(
            "INSERT INTO messages (agent_id, owner_id, channel, chat_id, thread_scope, sender, "
            "role, kind, content, trust, created_at) VALUES ('main', ?, 'telegram', 'c', "
            "'root', 'compactor', 'system', 'checkpoint_summary', ?, 'operator', ?)",
            (owner, f"summary of {owner}", stamp),
        )
        ids[owner] = connection.last_insert_rowid()
    connection.execute(
        "INSERT INTO resources (agent_id, resource_type, scope_id, resource_path, "
        "current_revision, created_at, updated_at) VALUES ('main', 'checkpoint', "
        "'telegram:c:root', '', 4, ?, ?)",
        (stamp, stamp),
    )
    shared = connection.last_insert_rowid()
    revisions = [
        (1, None, f'{{"checkpoint_id":{ids["vic:tim"]}}}'),
        (2, 1, f'{{"checkpoint_id":{ids["keeper"]}}}'),
        (3, 2, '{"rolled_back_to":1}'),
        (4, 3, '{"checkpoint_id":999999}'),  # its message was erased
    ]
    for number, parent, provenance in revisions:
        connection.execute(
            "INSERT INTO resource_revisions (resource_id, revision, parent_revision, "
            "content_hash, content, byte_size, mutation_source, provenance_json, created_at) "
            "VALUES (?, ?, ?, 'h', ?, 1, 'compaction', ?, ?)",
            (shared, number, parent, f"content {number}", provenance, stamp),
        )
    assert migrate(connection, migrations) == [m.version for m in migrations[8:]]
    found = sorted(
        connection.execute(
            "SELECT s.scope_id, s.current_revision, v.revision, v.parent_revision FROM "
            "resources AS s JOIN resource_revisions AS v ON v.resource_id = s.id "
            "WHERE s.resource_type = 'checkpoint'"
        )
    )
    assert found == [
        ("keeper:telegram:c:root", 2, 2, None),
        ("vic%3Atim:telegram:c:root", 3, 1, None),
        ("vic%3Atim:telegram:c:root", 3, 3, 1),
    ]
    left = connection.execute("SELECT count(*) FROM resources WHERE id = ?", (shared,))
    assert left.fetchall() == [(0,)]
    connection.close()


def test_0019_counts_the_activity_stored_before_it(tmp_path: Path) -> None:
    """Messages, a compaction, review runs and their model calls stored before activity was
    kept are counted by conversation and by agent; what comes after is counted by the
    triggers, on top."""
    connection = SqliteConnection(str(tmp_path / "m.db"))
    migrations = bundled_migrations()
    migrate(connection, migrations[:18])
    key = ("main", "ada", "telegram", "c", "root")
    connection.execute(
        "INSERT INTO conversations (agent_id, owner_id, channel, chat_id, thread_scope, "
        "search_scope, history_version, created_at) VALUES (?, ?, ?, ?, ?, '', 1, ?)",
        (*key, "2026-11-30T10:00:00.000Z"),
    )
    for kind, stamp in (
        ("chat_message", "2026-11-30T10:05:00.000Z"),
        ("chat_message", "2026-11-30T10:59:59.999Z"),
        ("chat_message", "2026-12-01T08:00:00.000Z"),
        ("checkpoint_summary", "2026-12-01T08:30:00.000Z"),
    ):
        connection.execute(
            "INSERT INTO messages (agent_id, owner_id, channel, chat_id, thread_scope, sender, "
            "role, kind, content, trust, created_at) "
            "VALUES (?, ?, ?, ?, ?, 'ada', 'user', ?, 'text', 'operator', ?)",
            (*key, kind, stamp),
        )
    for status, added, skipped in (("ok", 2, 1), ("failed", 0, 0)):
        connection.execute(
            "INSERT INTO review_runs (agent_id, owner_id, channel, chat_id, thread_scope, status, "
            "max_message_id, ops_added, ops_skipped, started_at, completed_at) "
            "VALUES (?, ?, ?, ?, ?, ?, 3, ?, ?, '2026-12-01T08:10:00.000Z', "
            "'2026-12-01T08:10:01.000Z')",
            (*key, status, added, skipped),
        )
        connection.execute(
            "INSERT INTO model_calls (agent, session_id, provider, model, latency_ms, "
            "prompt_tokens, completion_tokens, error, review_run_id, created_at) "
            "VALUES ('memory_reviewer', 's', 'p', 'm', 1.0, 100, 20, ?, ?, "
            "'2026-12-01T08:10:01.000Z')",
            (None if status == "ok" else "HTTP 401", connection.last_insert_rowid()),
        )
    assert migrate(connection, migrations) == [m.version for m in migrations[18:]]
    columns = (
        "hour, messages, compactions, review_runs, review_failures, facts_added, facts_refused, "
        "model_tokens, model_errors"
    )
    expected = [
        ("2026-11-30T10", 2, 0, 0, 0, 0, 0, 0, 0),
        ("2026-12-01T08", 1, 1, 2, 1, 2, 1, 240, 1),
    ]
    by_conversation = f"SELECT {columns} FROM activity_hours ORDER BY hour"
    by_agent = f"SELECT {columns} FROM agent_activity_hours ORDER BY hour"
    assert list(connection.execute(by_conversation)) == expected
    assert list(connection.execute(by_agent)) == expected
    connection.execute(
        "INSERT INTO messages (agent_id, owner_id, channel, chat_id, thread_scope, sender, "
        "role, kind, content, trust, created_at) "
        "VALUES (?, ?, ?, ?, ?, 'ada', 'user', 'chat_message', 'later', 'operator', "
        "'2026-11-30T10:30:00.000Z')",
        key,
    )
    assert next(iter(connection.execute(by_agent)))[1] == 3
    assert next(iter(connection.execute(by_conversation)))[1] == 3
    connection.close()


def test_both_engines_migrate_along_one_line_to_the_same_version() -> None:
    sqlite, postgres = bundled_migrations("sqlite"), bundled_migrations("postgres")
    latest = latest_version()
    assert [m.version for m in sqlite] == list(range(1, latest + 1))
    # PostgreSQL came after SQLite's 0014: its first file makes all that SQLite's 1-14 made.
    assert [m.version for m in postgres] == list(range(14, latest + 1))
    assert (postgres[0].name, sqlite[13].name) == ("schema", "ended_sessions")
    assert [m.name for m in postgres[1:]] == [m.name for m in sqlite[14:]]


def test_a_line_takes_shared_files_and_each_engines_own() -> None:
    files = {
        "0001_start.sqlite.sql": "a",
        "0002_start.postgres.sql": "b",
        "0002_more.sqlite.sql": "c",
        "0003_index.sql": "d",
    }
    assert [(m.version, m.sql) for m in migration_line(files, "sqlite")] == [
        (1, "a"),
        (2, "c"),
        (3, "d"),
    ]
    assert [(m.version, m.sql) for m in migration_line(files, "postgres")] == [(2, "b"), (3, "d")]


@pytest.mark.parametrize(
    ("files", "refusal"),
    [
        ({"0001_a.sql": "", "0003_c.sql": ""}, r"expected 0002, found 0003"),
        ({"0001_a.sql": "", "0001_a.postgres.sql": ""}, r"0001 has a file for both engines"),
        (
            {"0001_a.postgres.sql": "", "0002_b.sqlite.sql": "", "0003_c.sql": ""},
            r"expected 0002, found 0003_c\.sql",
        ),
        ({"0001_a.sql": "", "0002_b.sqlite.sql": ""}, r"end before 0002"),
        ({"1_a.sql": ""}, r"is not named NNNN_name"),
    ],
)
def test_a_line_with_a_gap_or_a_double_is_refused(files: dict[str, str], refusal: str) -> None:
    with pytest.raises(StartupError, match=refusal):
        migration_line(files, "postgres")


def test_an_import_splits_checkpoints_with_migration_0009s_own_statements() -> None:
    migration = bundled_migrations()[8]
    assert migration.name == "checkpoints_per_owner"
    written = migration.sql[migration.sql.index("CREATE TEMP TABLE") :]
    # The same statements, but for line breaks.
    assert "".join(checkpoint_split.statements(SQLITE).split()) == "".join(written.split())
