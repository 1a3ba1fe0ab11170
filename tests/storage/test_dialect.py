"""The rewriting of storage's SQL into PostgreSQL's spelling, rule by rule, as a pure function
(the statements themselves run against a real PostgreSQL in the rest of the suite)."""

from __future__ import annotations

import pytest

from memoryd.storage.postgres.dialect import translate

RULES = [
    ("SELECT a FROM t WHERE b = ? AND c = ?", "SELECT a FROM t WHERE b = %s AND c = %s"),
    ("WHERE agent_id = :agent", "WHERE agent_id = %(agent)s"),
    ("SELECT x::text WHERE y LIKE ?", "SELECT x::text WHERE y LIKE %s"),
    (
        "SELECT j.value ->> 0 FROM json_each(?) AS j ORDER BY j.key",
        (
            "SELECT j.value ->> 0 FROM jsonb_array_elements(CAST(%s AS jsonb)) WITH ORDINALITY "
            "AS j(value, key) ORDER BY j.key"
        ),
    ),
    (
        "m.id NOT IN (SELECT CAST(value AS BIGINT) FROM json_each(?))",
        (
            "m.id NOT IN (SELECT CAST(value AS BIGINT) FROM jsonb_array_elements_text("
            "CAST(%s AS jsonb)) AS value)"
        ),
    ),
    ("SET a = max(a, min(b, ?)), c = max(c)", "SET a = GREATEST(a, LEAST(b, %s)), c = max(c)"),
    ("WHERE instr(lower(x), lower(?)) > 0", "WHERE strpos(lower(x), lower(%s)) > 0"),
    ("length(CAST(m.content AS BLOB)) + 1", "octet_length(m.content) + 1"),
    (
        "WHERE json_extract(t.provenance_json, '$.checkpoint_id') IS NULL",
        "WHERE (CAST(t.provenance_json AS jsonb) ->> 'checkpoint_id') IS NULL",
    ),
    ("FROM messages AS m NOT INDEXED WHERE 1 AND x", "FROM messages AS m WHERE true AND x"),
    ("FROM t CROSS JOIN m ON m.id = t.rowid", "FROM t JOIN m ON m.id = t.rowid"),
    ("BEGIN IMMEDIATE", "BEGIN"),
]


@pytest.mark.parametrize(("sqlite", "postgres"), RULES)
def test_each_spelling_is_rewritten(sqlite: str, postgres: str) -> None:
    assert translate(sqlite) == postgres


def test_literals_comments_and_bodies_are_left_as_written() -> None:
    sql = "SELECT 'it''s ? :x max(a, b)' -- a comment's ? and :y\nFROM t WHERE a = ? $$ body ? $$"
    assert translate(sql) == (
        "SELECT 'it''s ? :x max(a, b)' -- a comment's ? and :y\nFROM t WHERE a = %s $$ body ? $$"
    )


def test_a_percent_is_doubled_only_for_a_statement_sent_with_parameters() -> None:
    assert translate("SELECT '50%' WHERE a LIKE ?") == "SELECT '50%%' WHERE a LIKE %s"
    assert translate("SELECT '50%'", parameters=False) == "SELECT '50%'"


def test_an_unterminated_literal_is_a_defect_not_a_guess() -> None:
    with pytest.raises(ValueError, match="unterminated literal"):
        translate("SELECT 'open")
