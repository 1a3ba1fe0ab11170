"""Statements' parameter markers in psycopg's style, as a pure function; and nothing else of a
statement touched (what the engines spell differently, statements ask the engine for:
tests/storage/test_engine_pieces.py runs each piece on both)."""

from __future__ import annotations

import pytest

from memoryd.storage.postgres.paramstyle import format_style

MARKERS = [
    ("SELECT a FROM t WHERE b = ? AND c = ?", "SELECT a FROM t WHERE b = %s AND c = %s"),
    ("WHERE agent_id = :agent", "WHERE agent_id = %(agent)s"),
    ("SELECT x::text WHERE y LIKE ?", "SELECT x::text WHERE y LIKE %s"),
]
# SQLite's own spellings: a statement holding one is a defect the PostgreSQL suite finds, not
# something to rewrite into a guess.
UNTOUCHED = [
    "SELECT j.value FROM json_each(?) AS j",
    "SET a = max(a, b)",
    "WHERE instr(lower(x), lower(?)) > 0",
    "FROM messages AS m NOT INDEXED WHERE 1",
    "FROM t CROSS JOIN m ON m.id = t.rowid",
    "BEGIN IMMEDIATE",
]


@pytest.mark.parametrize(("sqlite", "psycopg"), MARKERS)
def test_each_marker_becomes_psycopgs(sqlite: str, psycopg: str) -> None:
    assert format_style(sqlite) == psycopg


@pytest.mark.parametrize("sql", UNTOUCHED)
def test_nothing_but_the_markers_is_rewritten(sql: str) -> None:
    assert format_style(sql) == sql.replace("?", "%s")


def test_literals_comments_and_bodies_are_left_as_written() -> None:
    sql = "SELECT 'it''s ? :x max(a, b)' -- a comment's ? and :y\nFROM t WHERE a = ? $$ body ? $$"
    assert format_style(sql) == (
        "SELECT 'it''s ? :x max(a, b)' -- a comment's ? and :y\nFROM t WHERE a = %s $$ body ? $$"
    )


def test_a_percent_is_doubled_only_for_a_statement_sent_with_parameters() -> None:
    assert format_style("SELECT '50%' WHERE a LIKE ?") == "SELECT '50%%' WHERE a LIKE %s"
    assert format_style("SELECT '50%'", parameters=False) == "SELECT '50%'"


def test_an_unterminated_literal_is_a_defect_not_a_guess() -> None:
    with pytest.raises(ValueError, match="unterminated literal"):
        format_style("SELECT 'open")
