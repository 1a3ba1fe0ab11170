"""The SQLite and PostgreSQL schemas keep the same rules: after every migration, the same
triggers (by table, moment, event and columns), the same functions a statement may call, the
same CHECK constraints (by table and the columns they read) and the same column defaults. What
differs by design (each engine's word index, PostgreSQL's vector index) is listed once, with why,
and the comparison must find exactly that. Tables, columns, keys and indexes:
tests/storage/test_schema_parity.py."""

from __future__ import annotations

import collections
import dataclasses
import re
from pathlib import Path
from typing import Any

import apsw
import psycopg
import pytest

from memoryd.storage.connection import (
    ConnectionSettings,
    SqliteConnection,
    open_connection,
    writer_policy,
)
from tests.storage.test_schema_parity import migrated

__all__ = ["migrated"]  # the fixture, shared with the table comparison

# The differences by design. Words: SQLite's FTS5 tables are kept by triggers on messages and
# memories; PostgreSQL's tsvector columns are generated. Vectors: PostgreSQL's HNSW index takes
# a halfvec made by memoryd_halfvec from the stored int8 components (SQLite searches vectors in
# memory).
BY_DESIGN = {
    "trigger AFTER INSERT on memories: 1 on SQLite, 0 on PostgreSQL",
    "trigger AFTER DELETE on memories: 1 on SQLite, 0 on PostgreSQL",
    (
        "trigger AFTER UPDATE OF category, key, search_scope, value on memories: 1 on SQLite, "
        "0 on PostgreSQL"
    ),
    "trigger AFTER INSERT on messages: 2 on SQLite, 1 on PostgreSQL",
    "trigger AFTER DELETE on messages: 1 on SQLite, 0 on PostgreSQL",
    "trigger AFTER UPDATE OF content, sender on messages: 2 on SQLite, 1 on PostgreSQL",
    "function memoryd_halfvec on PostgreSQL only",
    # bm25 of a small scope's few word matches, with the counts the search read: FTS5's.
    "function memoryd_bm25 on SQLite only",
}
_SQLITE_TRIGGER = re.compile(
    r"CREATE TRIGGER\s+\w+\s+(AFTER|BEFORE|INSTEAD OF)\s+(INSERT|DELETE|UPDATE)"
    r"(?:\s+OF\s+([\w\s,]+?))?\s+ON\s+(\w+)",
    re.IGNORECASE,
)
_LITERAL = re.compile(r"'(?:[^']|'')*'")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# pg_trigger.tgtype's bits.
_BEFORE, _INSERT, _DELETE, _UPDATE, _INSTEAD = 2, 4, 8, 16, 64

# (table, moment, event, columns an UPDATE trigger watches)
Trigger = tuple[str, str, str, tuple[str, ...]]


@dataclasses.dataclass(frozen=True)
class Rules:
    """One engine's rules, in terms both engines share."""

    triggers: collections.Counter[Trigger]
    # What statements may call beyond the engine's own: PostgreSQL's functions of the schema
    # (not an extension's, not a trigger's), SQLite's registered by every connection.
    functions: set[str]
    # (table, the columns a CHECK reads), counted
    checks: collections.Counter[tuple[str, tuple[str, ...]]]
    # (table, column) -> the default, as a value
    defaults: dict[tuple[str, str], str]
    # PostgreSQL's trigger functions that no trigger runs (a trigger dropped, its body left).
    idle: set[str] = dataclasses.field(default_factory=set)


def sqlite_rules(connection: apsw.Connection, home: Path) -> Rules:
    """The rules of a SQLite database, and the functions its connections register."""
    entries = list(connection.execute("SELECT type, name, sql FROM sqlite_schema"))
    triggers: collections.Counter[Trigger] = collections.Counter()
    for kind, _, sql in entries:
        if kind == "trigger":
            found = _SQLITE_TRIGGER.search(sql)
            assert found, sql
            moment, event, watched, table = found.groups()
            triggers[(table, moment.upper(), event.upper(), _columns(watched))] += 1
    tables = {
        name: sql
        for kind, name, sql in entries
        if kind == "table" and not name.startswith("sqlite_") and "VIRTUAL TABLE" not in sql
    }
    checks: collections.Counter[tuple[str, tuple[str, ...]]] = collections.Counter()
    defaults: dict[tuple[str, str], str] = {}
    for table, sql in tables.items():
        names = {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}
        for expression in _checks(sql):
            read = {word for word in _NAME.findall(_LITERAL.sub("", expression)) if word in names}
            checks[(table, tuple(sorted(read)))] += 1
        for row in connection.execute(f"PRAGMA table_info({table})"):
            if row[4] is not None:
                defaults[(table, row[1])] = _value(row[4])
    settings = ConnectionSettings(home / "functions.db", 1000, "normal", secure_delete=False)
    plain = SqliteConnection(":memory:")
    policed = open_connection(settings, writer_policy(settings))
    try:
        functions = _sqlite_functions(policed) - _sqlite_functions(plain)
    finally:
        plain.close()
        policed.close()
    return Rules(triggers, functions, checks, defaults)


def _sqlite_functions(connection: apsw.Connection) -> set[str]:
    return {str(row[0]) for row in connection.execute("SELECT name FROM pragma_function_list")}


def _checks(sql: str) -> list[str]:
    """The expression of every CHECK in a CREATE TABLE statement."""
    found = []
    for start in (match.end() for match in re.finditer(r"\bCHECK\s*\(", sql, re.IGNORECASE)):
        depth = 0
        for index in range(start, len(sql)):
            if sql[index] == "(":
                depth += 1
            elif sql[index] == ")":
                if depth == 0:
                    found.append(sql[start:index])
                    break
                depth -= 1
    return found


def postgres_rules(connection: psycopg.Connection[Any]) -> Rules:
    """The rules of a PostgreSQL database's public schema."""
    triggers: collections.Counter[Trigger] = collections.Counter()
    used: set[str] = set()
    for table, kind, watched, function in connection.execute(
        "SELECT c.relname, t.tgtype, array(SELECT a.attname FROM unnest(t.tgattr) AS k(n) "
        "  JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attnum = k.n), p.proname "
        "FROM pg_trigger AS t JOIN pg_class AS c ON c.oid = t.tgrelid "
        "JOIN pg_proc AS p ON p.oid = t.tgfoid "
        "JOIN pg_namespace AS n ON n.oid = c.relnamespace "
        "WHERE n.nspname = 'public' AND NOT t.tgisinternal"
    ):
        used.add(function)
        moment = "INSTEAD OF" if kind & _INSTEAD else "BEFORE" if kind & _BEFORE else "AFTER"
        for bit, event in ((_INSERT, "INSERT"), (_DELETE, "DELETE"), (_UPDATE, "UPDATE")):
            if kind & bit:
                columns = tuple(sorted(watched)) if event == "UPDATE" else ()
                triggers[(table, moment, event, columns)] += 1
    functions = set()
    idle = set()
    for name, returns in connection.execute(
        "SELECT p.proname, CAST(CAST(p.prorettype AS regtype) AS text) FROM pg_proc AS p "
        "JOIN pg_namespace AS n ON n.oid = p.pronamespace WHERE n.nspname = 'public' "
        "AND NOT EXISTS (SELECT 1 FROM pg_depend AS d WHERE d.objid = p.oid AND d.deptype = 'e')"
    ):
        if returns != "trigger":
            functions.add(name)
        elif name not in used:
            idle.add(name)
    checks: collections.Counter[tuple[str, tuple[str, ...]]] = collections.Counter()
    for table, read in connection.execute(
        "SELECT c.relname, array(SELECT a.attname FROM unnest(con.conkey) AS k(n) "
        "  JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attnum = k.n ORDER BY 1) "
        "FROM pg_constraint AS con JOIN pg_class AS c ON c.oid = con.conrelid "
        "JOIN pg_namespace AS n ON n.oid = c.relnamespace "
        "WHERE n.nspname = 'public' AND con.contype = 'c'"
    ):
        checks[(table, tuple(sorted(read)))] += 1
    defaults = {
        (table, column): _value(default)
        for table, column, default in connection.execute(
            "SELECT table_name, column_name, column_default FROM information_schema.columns "
            "WHERE table_schema = 'public' AND column_default IS NOT NULL"
        )
        # An id drawn from a sequence is SQLite's rowid, which needs no default.
        if not default.startswith("nextval(")
    }
    return Rules(triggers, functions, checks, defaults, idle)


def _columns(watched: str | None) -> tuple[str, ...]:
    return tuple(sorted(part.strip() for part in watched.split(","))) if watched else ()


def _value(default: str) -> str:
    """A default as a value: PostgreSQL's casts and parentheses gone, numbers as numbers."""
    text = re.sub(r"::[a-z ]+(\[\])?", "", default).strip()
    while text.startswith("(") and text.endswith(")"):
        text = text[1:-1].strip()
    try:
        return repr(float(text))
    except ValueError:
        return text


def differences(sqlite: Rules, postgres: Rules) -> set[str]:
    """Every way the two engines' rules differ, one line each."""
    found: set[str] = set()
    for trigger in sqlite.triggers.keys() | postgres.triggers.keys():
        mine, theirs = sqlite.triggers[trigger], postgres.triggers[trigger]
        if mine != theirs:
            table, moment, event, columns = trigger
            of = f" OF {', '.join(columns)}" if columns else ""
            found.add(
                f"trigger {moment} {event}{of} on {table}: {mine} on SQLite, {theirs} on PostgreSQL"
            )
    found |= {f"trigger function {name} is run by no trigger" for name in postgres.idle}
    for name in sqlite.functions ^ postgres.functions:
        side = "SQLite" if name in sqlite.functions else "PostgreSQL"
        found.add(f"function {name} on {side} only")
    for check in sqlite.checks.keys() | postgres.checks.keys():
        mine, theirs = sqlite.checks[check], postgres.checks[check]
        if mine != theirs:
            table, read = check
            found.add(
                f"CHECK on {table} ({', '.join(read)}): {mine} on SQLite, {theirs} on PostgreSQL"
            )
    for column in sqlite.defaults.keys() | postgres.defaults.keys():
        default, other = sqlite.defaults.get(column), postgres.defaults.get(column)
        if default != other:
            found.add(f"default of {'.'.join(column)}: {default} on SQLite, {other} on PostgreSQL")
    return found


@pytest.fixture(scope="module")
def rules(
    migrated: tuple[apsw.Connection, psycopg.Connection[Any]],
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Rules, Rules]:
    sqlite, postgres = migrated
    return sqlite_rules(sqlite, tmp_path_factory.mktemp("rules")), postgres_rules(postgres)


def test_both_engines_keep_the_same_rules_but_for_their_indexes(
    rules: tuple[Rules, Rules],
) -> None:
    assert differences(*rules) == BY_DESIGN


def test_the_rule_readers_see_what_they_compare(rules: tuple[Rules, Rules]) -> None:
    # Not vacuous: each reader sees triggers, functions, checks and defaults of each kind.
    for engine in rules:
        assert engine.triggers[("model_calls", "AFTER", "INSERT", ())] == 1
        assert "memoryd_fold" in engine.functions
        assert engine.checks[("store_clock", ("id",))] == 1
        assert engine.defaults[("messages", "metadata_json")] == "'{}'"
        assert engine.defaults[("memories", "confidence")] == "1.0"
    assert len(rules[0].checks) >= 20


def test_a_rule_changed_on_one_engine_only_is_found(
    migrated: tuple[apsw.Connection, psycopg.Connection[Any]], rules: tuple[Rules, Rules]
) -> None:
    # Rolled back: DDL is transactional on PostgreSQL.
    postgres = migrated[1]
    with postgres.transaction(force_rollback=True):
        postgres.execute("ALTER TABLE memories ALTER COLUMN confidence SET DEFAULT 0.5")
        postgres.execute("ALTER TABLE memories ADD CHECK (length(key) < 500)")
        postgres.execute("DROP TRIGGER activity_after_model_call ON model_calls")
        postgres.execute(
            "CREATE FUNCTION memoryd_extra() RETURNS integer AS 'SELECT 1' LANGUAGE sql"
        )
        changed = differences(rules[0], postgres_rules(postgres)) - BY_DESIGN
    assert changed == {
        "default of memories.confidence: 1.0 on SQLite, 0.5 on PostgreSQL",
        "CHECK on memories (key): 0 on SQLite, 1 on PostgreSQL",
        "trigger AFTER INSERT on model_calls: 1 on SQLite, 0 on PostgreSQL",
        "trigger function activity_after_model_call is run by no trigger",
        "function memoryd_extra on PostgreSQL only",
    }
    assert differences(rules[0], postgres_rules(postgres)) == BY_DESIGN
