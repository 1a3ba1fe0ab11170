"""Choosing how storage's SQL reaches PostgreSQL: memoryd's own rewriting
(memoryd.storage.postgres.dialect) against a maintained transpiler, sqlglot.

    python bench/dialect_choice.py

The statements are storage's own: every string constant in server/memoryd/storage (outside
storage/postgres) that starts a SELECT, INSERT, UPDATE, DELETE or WITH. Some are whole
statements, some the first part of one that storage completes at run time (a list of
placeholders, a clause chosen by the call). For each, both turn the SQLite text into
PostgreSQL's; reported:
- the time per statement of each (dialect.py uncached; sqlglot's transpile);
- how many sqlglot cannot parse (a statement's first part, or SQLite's planner hints);
- of those it parses, how many come out still holding SQLite's spelling that PostgreSQL
  refuses or psycopg cannot bind (`json_each`, `NOT INDEXED`, `?` parameters, `CROSS JOIN ...
  ON`, an ordering inside `ON CONFLICT (...)`), or with JSON access rewritten to functions of
  type `json` where memoryd passes `jsonb`;
- a few statements side by side.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import time
from pathlib import Path

from memoryd.storage.postgres.dialect import translate

ROOT = Path(__file__).resolve().parent.parent
STORAGE = ROOT / "server" / "memoryd" / "storage"
STATEMENT = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\s")
# What PostgreSQL (or psycopg's parameters) would refuse in a transpiled statement.
REFUSED = {
    "json_each": re.compile(r"\bjson_each\(", re.IGNORECASE),
    "NOT INDEXED": re.compile(r"\bNOT INDEXED\b", re.IGNORECASE),
    "? parameter": re.compile(r"\?"),
    "CROSS JOIN with ON": re.compile(r"CROSS JOIN [^()]*? ON ", re.IGNORECASE),
    "NULLS FIRST in ON CONFLICT": re.compile(r"ON CONFLICT\s*\([^)]*NULLS (FIRST|LAST)", re.I),
}
JSON_FUNCTIONS = re.compile(r"\bJSON_EXTRACT_PATH(_TEXT)?\(", re.IGNORECASE)


def statements() -> list[str]:
    """Storage's SQL string constants, each once."""
    found: set[str] = set()
    for path in sorted(STORAGE.rglob("*.py")):
        if "postgres" in path.relative_to(STORAGE).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and STATEMENT.match(node.value)
            ):
                found.add(node.value)
    return sorted(found)


def one_line(sql: str) -> str:
    return " ".join(sql.split())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=4, help="statements shown side by side")
    args = parser.parse_args()
    import sqlglot  # noqa: PLC0415 - the alternative measured, not memoryd's dependency

    texts = statements()
    began = time.perf_counter()
    ours = {sql: translate.__wrapped__(sql) for sql in texts}  # type: ignore[attr-defined]
    ours_seconds = time.perf_counter() - began
    theirs: dict[str, str | None] = {}
    began = time.perf_counter()
    for sql in texts:
        try:
            theirs[sql] = sqlglot.transpile(sql, read="sqlite", write="postgres")[0]
        except sqlglot.errors.ParseError:
            theirs[sql] = None
    sqlglot_seconds = time.perf_counter() - began
    parsed = {sql: out for sql, out in theirs.items() if out is not None}
    refused = {
        name: sum(1 for out in parsed.values() if pattern.search(out))
        for name, pattern in REFUSED.items()
    }
    unusable = [sql for sql, out in parsed.items() if any(p.search(out) for p in REFUSED.values())]
    json_typed = sum(1 for out in parsed.values() if JSON_FUNCTIONS.search(out))
    ours_left = sum(1 for out in ours.values() if any(p.search(out) for p in REFUSED.values()))
    samples = [
        {"sqlite": one_line(sql), "dialect.py": one_line(ours[sql]), "sqlglot": one_line(out)}
        for sql, out in list(parsed.items())
        if "json_each" in sql or "CROSS JOIN" in sql or "max(" in sql
    ][: args.samples]
    result = {
        "benchmark": "dialect_choice",
        "sqlglot_version": sqlglot.__version__,
        "statements": len(texts),
        "dialect_py_us_per_statement": round(ours_seconds * 1e6 / len(texts), 1),
        "sqlglot_ms_per_statement": round(sqlglot_seconds * 1e3 / len(texts), 2),
        "sqlglot_parse_errors": len(texts) - len(parsed),
        "sqlglot_parsed_but_refused_by_postgres_or_psycopg": len(unusable),
        "sqlglot_refusals_by_kind": refused,
        "sqlglot_json_access_as_json_functions": json_typed,
        "dialect_py_left_with_sqlite_spelling": ours_left,
        "samples": samples,
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
