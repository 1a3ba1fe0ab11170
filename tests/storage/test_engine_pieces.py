"""Each piece of SQL the engines spell differently (memoryd.storage.engine) means the same on
both: every piece, run on a real SQLite and a real PostgreSQL, gives the same answers. The
statements that use them run on both backends in the rest of the suite; this holds each piece to
its meaning where its edge cases are easy to state."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memoryd.storage.connection import SqliteConnection
from memoryd.storage.engine import Engine, engine_of
from memoryd.storage.postgres.transaction import PostgresTransaction
from memoryd.storage.sql import rows
from memoryd.storage.transaction import Transaction
from memoryd.testing.postgres import database_dsn

pytestmark = pytest.mark.storage

# A piece, the statement that uses it, its parameters, and what both engines answer.
Case = tuple[str, Callable[[Engine], str], tuple[Any, ...], list[tuple[Any, ...]]]
CASES: list[Case] = [
    ("greatest, the parameter", lambda e: f"SELECT {e.greatest('3', '?')}", (5,), [(5,)]),
    ("greatest, the value", lambda e: f"SELECT {e.greatest('7', '?')}", (5,), [(7,)]),
    ("greatest of three", lambda e: f"SELECT {e.greatest('1', '?', '2')}", (0,), [(2,)]),
    ("position, found", lambda e: f"SELECT {e.position('?', '?')}", ("hello", "ll"), [(3,)]),
    ("position, absent", lambda e: f"SELECT {e.position('?', '?')}", ("hello", "z"), [(0,)]),
    (
        "position, by character",
        lambda e: f"SELECT {e.position('?', '?')}",
        ("Москва", "ква"),
        [(4,)],
    ),
    ("octet_length, ASCII", lambda e: f"SELECT {e.octet_length('?')}", ("hello",), [(5,)]),
    ("octet_length, UTF-8", lambda e: f"SELECT {e.octet_length('?')}", ("Москва",), [(12,)]),
    (
        "json_rows keeps the array's order",
        lambda e: f"SELECT j.value ->> 1 FROM {e.json_rows('?', 'j')} ORDER BY j.key",
        (json.dumps([["a", "x"], ["b", "y"], ["c", "z"]]),),
        [("x",), ("y",), ("z",)],
    ),
    (
        "json_rows of an empty array",
        lambda e: f"SELECT j.value ->> 0 FROM {e.json_rows('?', 'j')}",
        ("[]",),
        [],
    ),
    (
        "json_values",
        lambda e: f"SELECT e.value FROM {e.json_values('?', 'e')} ORDER BY 1",
        (json.dumps(["b", "a"]),),
        [("a",), ("b",)],
    ),
    (
        "json_values of a member",
        lambda e: (
            "SELECT CAST(r.value AS BIGINT) FROM (SELECT CAST(? AS TEXT) AS p) AS t, "
            f"{e.json_values('t.p', 'r', 'rendered')} ORDER BY 1"
        ),
        (json.dumps({"rendered": [3, 1, 2]}),),
        [(1,), (2,), (3,)],
    ),
    (
        "json_values: members compared with a parameter's",
        lambda e: (
            "SELECT count(*) FROM (SELECT CAST(? AS TEXT) AS p) AS t, "
            f"{e.json_values('t.p', 'r', 'rendered')} "
            f"WHERE r.value IN (SELECT x.value FROM {e.json_values('?', 'x')})"
        ),
        (json.dumps({"rendered": [3, 1, 2]}), json.dumps([2, 3, 9])),
        [(2,)],
    ),
]
# A member of a JSON object, read by each piece: (piece, object, answer).
MEMBERS: list[tuple[str, dict[str, Any], Any]] = [
    ("json_text", {"name": "x"}, "x"),
    ("json_text", {}, None),
    ("json_text", {"name": None}, None),
    ("json_kind", {"name": [1]}, "array"),
    ("json_kind", {"name": {"a": 1}}, "object"),
    ("json_kind", {}, None),
    ("json_true", {"name": True}, True),
    ("json_true", {"name": 1}, True),
    ("json_true", {"name": "true"}, True),
    ("json_true", {"name": False}, False),
    ("json_true", {"name": 0}, False),
    ("json_true", {"name": "yes"}, False),
    ("json_true", {"name": None}, False),
    ("json_true", {}, False),
]


@pytest.fixture(scope="module")
def engines(
    postgres_base: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[Transaction]]:
    """A SQLite and a PostgreSQL connection (neither needs a table)."""
    folder: Path = tmp_path_factory.mktemp("pieces")
    sqlite = SqliteConnection(str(folder / "memoryd.db"))
    postgres = PostgresTransaction(
        psycopg.connect(database_dsn(postgres_base, folder), autocommit=True)
    )
    try:
        yield [sqlite, postgres]
    finally:
        sqlite.close()
        postgres.close()


@pytest.mark.parametrize("case", CASES, ids=[case[0] for case in CASES])
def test_each_piece_answers_alike_on_both_engines(case: Case, engines: list[Transaction]) -> None:
    _, statement, params, expected = case
    for connection in engines:
        found = rows(connection, statement(engine_of(connection)), params)
        assert [tuple(row) for row in found] == expected, engine_of(connection).name


@pytest.mark.parametrize(
    ("piece", "value", "expected"),
    MEMBERS,
    ids=[f"{piece} {json.dumps(value)}" for piece, value, _ in MEMBERS],
)
def test_each_member_piece_reads_json_alike(
    piece: str, value: dict[str, Any], expected: Any, engines: list[Transaction]
) -> None:
    for connection in engines:
        read = getattr(engine_of(connection), piece)
        sql = f"SELECT {read('t.p', 'name')} FROM (SELECT CAST(? AS TEXT) AS p) AS t"
        (answer,) = rows(connection, sql, (json.dumps(value),))[0]
        if piece == "json_true":
            answer = bool(answer)  # SQLite's truth is 1 or 0
        assert answer == expected, engine_of(connection).name


def test_the_planner_hints_are_sqlites_alone(engines: list[Transaction]) -> None:
    for connection in engines:
        engine = engine_of(connection)
        sql = (
            f"SELECT count(*) FROM (SELECT 1 AS id) AS a {engine.join_in_order} "
            "(SELECT 1 AS id) AS b ON a.id = b.id"
        )
        assert rows(connection, sql)[0][0] == 1, engine.name
    assert [engine_of(connection).not_indexed for connection in engines] == [" NOT INDEXED", ""]


def test_a_table_is_known_only_when_it_is_there(engines: list[Transaction]) -> None:
    for connection in engines:
        engine = engine_of(connection)
        assert not engine.has_table(connection, "memoryd_piece_check")
        connection.execute("CREATE TABLE memoryd_piece_check (id INTEGER)")
        try:
            assert engine.has_table(connection, "memoryd_piece_check")
        finally:
            connection.execute("DROP TABLE memoryd_piece_check")
