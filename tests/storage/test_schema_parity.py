"""The SQLite and PostgreSQL schemas describe the same database: after every migration, the same
tables, the same columns (by what their type means, and whether they take NULL), the same primary
and unique keys, and the same indexes the queries rely on. What differs by design (each backend's
word and substring index) is listed once, with why, and the comparison must find exactly that."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import apsw
import psycopg
import pytest

from memoryd.storage.connection import SqliteConnection
from memoryd.storage.migrations import bundled_migrations, migrate
from memoryd.storage.postgres.transaction import PostgresTransaction
from memoryd.testing.postgres import database_dsn

# What a declared type means, on each backend.
SQLITE_TYPES = {"INTEGER": "integer", "TEXT": "text", "REAL": "real", "BLOB": "bytes"}
POSTGRES_TYPES = {
    "bigint": "integer",
    "integer": "integer",
    "smallint": "integer",
    "text": "text",
    "double precision": "real",
    "bytea": "bytes",
    "tsvector": "words",
    "halfvec": "half vector",
}
# The differences by design. Words: FTS5 tables on SQLite (messages_fts, memories_fts, kept by
# triggers), a generated tsvector column with a GIN index on PostgreSQL. Substrings: an FTS5
# trigram table on SQLite, a pg_trgm GIN index over the folded content on PostgreSQL. Vectors:
# the same int8 components and scale on both; PostgreSQL adds a generated halfvec column, which
# the HNSW index it makes for each embedding model takes.
BY_DESIGN = {
    "column memory_vectors.embedding (half vector, null) on PostgreSQL only",
    "column message_vectors.embedding (half vector, null) on PostgreSQL only",
    "column memories.words (words, null) on PostgreSQL only",
    "column messages.words (words, null) on PostgreSQL only",
    "index memories_words on memories (words) on PostgreSQL only",
    "index messages_words on messages (words) on PostgreSQL only",
    "index messages_trigrams on messages (expression) on PostgreSQL only",
}


@dataclasses.dataclass(frozen=True)
class Schema:
    """One backend's schema, in terms both backends share."""

    # table -> {column: (meaning of its type, "null" or "not null")}
    columns: dict[str, dict[str, tuple[str, str]]]
    primary_keys: dict[str, tuple[str, ...]]
    # (table, columns, partial): unique keys other than the primary key
    unique: set[tuple[str, tuple[str, ...], bool]]
    # name -> (table, columns, partial): the named indexes that are not unique keys
    indexes: dict[str, tuple[str, tuple[str, ...], bool]]


def sqlite_schema(connection: apsw.Connection) -> Schema:
    """The schema of a SQLite database, without FTS5's virtual tables and their shadow tables
    (the word index) and SQLite's own bookkeeping tables."""
    rows = list(connection.execute("SELECT name, type, sql FROM sqlite_schema"))
    virtual = {name for name, kind, sql in rows if kind == "table" and "VIRTUAL TABLE" in sql}
    tables = sorted(
        name
        for name, kind, _ in rows
        if kind == "table"
        and name not in virtual
        and not name.startswith("sqlite_")
        and not any(name.startswith(f"{table}_") for table in virtual)
    )
    columns: dict[str, dict[str, tuple[str, str]]] = {}
    primary_keys: dict[str, tuple[str, ...]] = {}
    unique: set[tuple[str, tuple[str, ...], bool]] = set()
    indexes: dict[str, tuple[str, tuple[str, ...], bool]] = {}
    for table in tables:
        info = list(connection.execute(f"PRAGMA table_info({table})"))
        columns[table] = {
            name: (SQLITE_TYPES.get(kind.upper(), kind), "not null" if notnull or pk else "null")
            for _, name, kind, notnull, _, pk in info
        }
        primary_keys[table] = tuple(name for *_, name, _, _, _, pk in sorted(info, key=_pk) if pk)
        for _, index, is_unique, origin, partial in connection.execute(
            f"PRAGMA index_list({table})"
        ):
            named = tuple(row[2] for row in connection.execute(f"PRAGMA index_info({index})"))
            if origin == "pk":
                continue
            if is_unique:
                unique.add((table, named, bool(partial)))
            else:
                indexes[index] = (table, named, bool(partial))
    return Schema(columns, primary_keys, unique, indexes)


def _pk(row: tuple[Any, ...]) -> int:
    return int(row[5])


def postgres_schema(connection: psycopg.Connection[Any]) -> Schema:
    """The schema of a PostgreSQL database's public tables."""
    columns: dict[str, dict[str, tuple[str, str]]] = {}
    for table, name, declared, defined, nullable in connection.execute(
        "SELECT table_name, column_name, data_type, udt_name, is_nullable "
        "FROM information_schema.columns WHERE table_schema = 'public' "
        "ORDER BY table_name, ordinal_position"
    ):
        kind = defined if declared == "USER-DEFINED" else declared
        meaning = POSTGRES_TYPES.get(kind, kind)
        columns.setdefault(table, {})[name] = (meaning, "null" if nullable == "YES" else "not null")
    primary_keys: dict[str, tuple[str, ...]] = {}
    unique: set[tuple[str, tuple[str, ...], bool]] = set()
    indexes: dict[str, tuple[str, tuple[str, ...], bool]] = {}
    for table, index, primary, is_unique, partial, named in connection.execute(
        "SELECT t.relname, i.relname, x.indisprimary, x.indisunique, x.indpred IS NOT NULL, "
        "  array(SELECT coalesce(a.attname, 'expression') FROM unnest(x.indkey) "
        "        WITH ORDINALITY AS k(number, position) "
        "        LEFT JOIN pg_attribute AS a ON a.attrelid = t.oid AND a.attnum = k.number "
        "        ORDER BY k.position) "
        "FROM pg_index AS x JOIN pg_class AS t ON t.oid = x.indrelid "
        "JOIN pg_class AS i ON i.oid = x.indexrelid "
        "JOIN pg_namespace AS n ON n.oid = t.relnamespace WHERE n.nspname = 'public'"
    ):
        if primary:
            primary_keys[table] = tuple(named)
        elif is_unique:
            unique.add((table, tuple(named), partial))
        else:
            indexes[index] = (table, tuple(named), partial)
    for table in columns:
        primary_keys.setdefault(table, ())
    return Schema(columns, primary_keys, unique, indexes)


def differences(sqlite: Schema, postgres: Schema) -> set[str]:
    """Every way the two schemas differ, one line each."""
    return _tables(sqlite, postgres) | _keys(sqlite, postgres) | _indexes(sqlite, postgres)


def _tables(sqlite: Schema, postgres: Schema) -> set[str]:
    found: set[str] = set()
    for table in sorted(sqlite.columns.keys() ^ postgres.columns.keys()):
        side = "SQLite" if table in sqlite.columns else "PostgreSQL"
        found.add(f"table {table} on {side} only")
    for table in sorted(sqlite.columns.keys() & postgres.columns.keys()):
        mine, theirs = sqlite.columns[table], postgres.columns[table]
        for column in mine.keys() | theirs.keys():
            if column not in theirs:
                found.add(f"column {table}.{column} ({', '.join(mine[column])}) on SQLite only")
            elif column not in mine:
                found.add(
                    f"column {table}.{column} ({', '.join(theirs[column])}) on PostgreSQL only"
                )
            elif mine[column] != theirs[column]:
                found.add(
                    f"column {table}.{column} is {', '.join(mine[column])} on SQLite, "
                    f"{', '.join(theirs[column])} on PostgreSQL"
                )
    return found


def _keys(sqlite: Schema, postgres: Schema) -> set[str]:
    found: set[str] = set()
    for table in sorted(sqlite.primary_keys.keys() & postgres.primary_keys.keys()):
        if sqlite.primary_keys[table] != postgres.primary_keys[table]:
            found.add(
                f"primary key of {table} is {sqlite.primary_keys[table]} on SQLite, "
                f"{postgres.primary_keys[table]} on PostgreSQL"
            )
    for table, columns, partial in sqlite.unique ^ postgres.unique:
        side = "SQLite" if (table, columns, partial) in sqlite.unique else "PostgreSQL"
        kind = "partial unique key" if partial else "unique key"
        found.add(f"{kind} {table} ({', '.join(columns)}) on {side} only")
    return found


def _indexes(sqlite: Schema, postgres: Schema) -> set[str]:
    found: set[str] = set()
    for name in sqlite.indexes.keys() | postgres.indexes.keys():
        mine, theirs = sqlite.indexes.get(name), postgres.indexes.get(name)
        if mine == theirs:
            continue
        if mine is None or theirs is None:
            table, columns, _ = mine or theirs or ("", (), False)
            side = "SQLite" if theirs is None else "PostgreSQL"
            found.add(f"index {name} on {table} ({', '.join(columns)}) on {side} only")
        else:
            found.add(f"index {name} is {mine} on SQLite, {theirs} on PostgreSQL")
    return found


@pytest.fixture(scope="module")
def migrated(
    postgres_base: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[apsw.Connection, psycopg.Connection[Any]]]:
    """A SQLite and a PostgreSQL database, each after all of its backend's migrations."""
    folder = tmp_path_factory.mktemp("parity")
    sqlite = SqliteConnection(str(folder / "memoryd.db"))
    migrate(sqlite, bundled_migrations())
    postgres = psycopg.connect(database_dsn(postgres_base, folder), autocommit=True)
    migrate(PostgresTransaction(postgres), bundled_migrations("postgres"))
    try:
        yield sqlite, postgres
    finally:
        sqlite.close()
        postgres.close()


def test_both_backends_have_the_same_schema_but_for_their_word_indexes(
    migrated: tuple[apsw.Connection, psycopg.Connection[Any]],
) -> None:
    sqlite, postgres = migrated
    assert differences(sqlite_schema(sqlite), postgres_schema(postgres)) == BY_DESIGN


def test_a_column_added_to_one_backend_only_is_found(
    migrated: tuple[apsw.Connection, psycopg.Connection[Any]],
) -> None:
    # Both changes are rolled back: DDL is transactional on both backends.
    sqlite, postgres = migrated
    sqlite.execute("BEGIN")
    try:
        sqlite.execute("ALTER TABLE messages ADD COLUMN mood TEXT")
        sqlite.execute("CREATE INDEX messages_by_mood ON messages (mood)")
        on_sqlite = differences(sqlite_schema(sqlite), postgres_schema(postgres)) - BY_DESIGN
    finally:
        sqlite.execute("ROLLBACK")
    with postgres.transaction(force_rollback=True):
        postgres.execute("ALTER TABLE memories ADD COLUMN weight BIGINT NOT NULL DEFAULT 0")
        postgres.execute("ALTER TABLE memories ALTER COLUMN category DROP NOT NULL")
        postgres.execute("ALTER TABLE counters ADD UNIQUE (value)")
        on_postgres = differences(sqlite_schema(sqlite), postgres_schema(postgres)) - BY_DESIGN
    assert on_sqlite == {
        "column messages.mood (text, null) on SQLite only",
        "index messages_by_mood on messages (mood) on SQLite only",
    }
    assert on_postgres == {
        "column memories.weight (integer, not null) on PostgreSQL only",
        "column memories.category is text, not null on SQLite, text, null on PostgreSQL",
        "unique key counters (value) on PostgreSQL only",
    }
    assert differences(sqlite_schema(sqlite), postgres_schema(postgres)) == BY_DESIGN


def test_the_schema_readers_see_what_they_compare(
    migrated: tuple[apsw.Connection, psycopg.Connection[Any]],
) -> None:
    # The comparison is not vacuous: both readers see every table, key and index kind.
    for schema in (sqlite_schema(migrated[0]), postgres_schema(migrated[1])):
        assert len(schema.columns) >= 20
        assert schema.columns["messages"]["id"] == ("integer", "not null")
        assert schema.primary_keys["memory_sources"] == ("agent_id", "owner_id", "id")
        assert (
            "messages",
            ("agent_id", "owner_id", "channel", "chat_id", "thread_scope", "client_message_id"),
            True,
        ) in schema.unique
        assert schema.indexes["memory_review_pending"] == (
            "memory_review_state",
            ("last_reviewed_at",),
            True,
        )
