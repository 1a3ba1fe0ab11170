"""The SQL storage writes, said for PostgreSQL: the mechanical differences, rewritten once per
statement text.

Storage's repository functions keep one text per statement where the two engines agree on what
it means, and choose a text per backend (`memoryd.storage.sql.postgres`) where they do not (full
text, JSON paths, maintenance). What differs only in spelling is rewritten here:

- parameters: `?` and `:name` become `%s` and `%(name)s` (and `%` becomes `%%`);
- `json_each(X) AS j`, the table of a JSON array's elements, becomes
  `jsonb_array_elements(X) WITH ORDINALITY AS j(value, key)` (`j.key` counts from 1, not 0; it
  is only ever used to keep the array's order);
- `FROM json_each(X)` without an alias becomes `FROM jsonb_array_elements_text(X) AS value`
  (its one column is `value`);
- the two-argument scalar `max(a, b)` and `min(a, b)` become `GREATEST` and `LEAST`;
- `json_extract(column, '$.name')` becomes `(CAST(column AS jsonb) ->> 'name')` (text, where
  SQLite gives the JSON value's own type: only for comparisons with NULL and CASTs);
- `instr(a, b)` becomes `strpos(a, b)`, and `length(CAST(x AS BLOB))` `octet_length(x)`;
- SQLite's planner hints go: `NOT INDEXED` is dropped, and `CROSS JOIN ... ON` (join in this
  order) becomes `JOIN ... ON`; `WHERE 1` becomes `WHERE true`;
- `BEGIN IMMEDIATE` becomes `BEGIN` (PostgreSQL's row locks do what SQLite's write lock did).

Nothing inside a quoted literal, a comment or a $$ body is touched (but a literal's `%`, which
psycopg would read as a parameter, is doubled). The rewriting is pure, and cached by text: storage
builds a bounded number of distinct statements.
"""

from __future__ import annotations

import functools
import re

_UNTOUCHABLE = re.compile(r"'|--|\$\$")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_JSON_EACH_AS = re.compile(r"json_each\((.*?)\) AS (\w+)")
_JSON_EACH_VALUES = re.compile(r"FROM json_each\(([^()]*)\)(?! AS)")
_JSON_EXTRACT = re.compile(r"json_extract\(([\w.]+), '\$\.(\w+)'\)")
_OCTET_LENGTH = re.compile(r"length\(CAST\(([\w.]+) AS BLOB\)\)")
_WHERE_ONE = re.compile(r"\bWHERE 1\b(?!\s*[=<>!])")


@functools.lru_cache(maxsize=4096)
def translate(sql: str, *, parameters: bool = True) -> str:
    """`sql`, as written for SQLite, in PostgreSQL's spelling (see the module docstring).

    psycopg reads `%` as the start of a parameter only in a statement sent with parameters;
    only then is a literal `%` doubled."""
    percent = "%%" if parameters else "%"
    sql = _JSON_EXTRACT.sub(r"(CAST(\1 AS jsonb) ->> '\2')", sql)
    pieces = []
    for code, literal in _split_literals(sql):
        pieces.append(_rewrite(code.replace("%", percent)))
        pieces.append(literal.replace("%", percent) if literal.startswith("'") else literal)
    return "".join(pieces)


def _split_literals(sql: str) -> list[tuple[str, str]]:
    """(code, the untouchable text after it) pairs, in order: quoted literals, `--` comments
    and $$-quoted bodies are left as written. The last untouchable text may be empty."""
    parts: list[tuple[str, str]] = []
    position = 0
    while True:
        found = _UNTOUCHABLE.search(sql, position)
        if found is None:
            parts.append((sql[position:], ""))
            return parts
        start = found.start()
        end = _untouchable_end(sql, start, found.group())
        parts.append((sql[position:start], sql[start:end]))
        position = end


def _untouchable_end(sql: str, start: int, opener: str) -> int:
    if opener == "--":
        newline = sql.find("\n", start)
        return len(sql) if newline < 0 else newline
    if opener == "$$":
        close = sql.find("$$", start + 2)
        if close < 0:
            raise ValueError(f"unterminated $$ body in {sql!r}")
        return close + 2
    end = start + 1
    while True:
        end = sql.find("'", end)
        if end < 0:
            raise ValueError(f"unterminated literal in {sql!r}")
        if sql.startswith("''", end):
            end += 2
            continue
        return end + 1


def _rewrite(code: str) -> str:
    code = code.replace("BEGIN IMMEDIATE", "BEGIN").replace(" NOT INDEXED", "")
    code = code.replace("CROSS JOIN", "JOIN")
    code = _JSON_EACH_VALUES.sub(
        r"FROM jsonb_array_elements_text(CAST(\1 AS jsonb)) AS value", code
    )
    code = _JSON_EACH_AS.sub(
        r"jsonb_array_elements(CAST(\1 AS jsonb)) WITH ORDINALITY AS \2(value, key)", code
    )
    code = _OCTET_LENGTH.sub(r"octet_length(\1)", code)
    code = _WHERE_ONE.sub("WHERE true", code)
    code = re.sub(r"\binstr\(", "strpos(", code)
    code = _scalar_extremes(code)
    return _parameters(code)


def _parameters(code: str) -> str:
    out = []
    index = 0
    while index < len(code):
        char = code[index]
        if char == "?":
            out.append("%s")
        elif char == ":" and index + 1 < len(code) and code[index + 1] == ":":
            out.append("::")  # a cast, never a parameter
            index += 1
        elif char == ":" and (match := _IDENTIFIER.match(code, index + 1)):
            out.append(f"%({match.group()})s")
            index = match.end()
            continue
        else:
            out.append(char)
        index += 1
    return "".join(out)


def _scalar_extremes(code: str) -> str:
    """max(a, b) and min(a, b) with two or more arguments: GREATEST and LEAST."""
    out = []
    position = 0
    for match in re.finditer(r"\b(max|min)\(", code, flags=re.IGNORECASE):
        if match.start() < position:
            continue
        close, commas = _arguments(code, match.end())
        out.append(code[position : match.start()])
        if commas:
            name = "GREATEST" if match.group(1).lower() == "max" else "LEAST"
            inner = _scalar_extremes(code[match.end() : close])
            out.append(f"{name}({inner})")
            position = close + 1
        else:
            out.append(match.group())
            position = match.end()
    out.append(code[position:])
    return "".join(out)


def _arguments(code: str, start: int) -> tuple[int, int]:
    """The index of the parenthesis closing the call opened just before `start`, and how many
    commas separate its arguments at its own depth."""
    depth = 0
    commas = 0
    for index in range(start, len(code)):
        char = code[index]
        if char == "(":
            depth += 1
        elif char == ")":
            if depth == 0:
                return index, commas
            depth -= 1
        elif char == "," and depth == 0:
            commas += 1
    return len(code), commas
