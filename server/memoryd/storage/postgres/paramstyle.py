"""Statements' parameters, as psycopg takes them: the driver's one difference from apsw that
every statement meets.

Storage writes its statements once, with SQLite's markers: `?` and `:name`. psycopg takes `%s`
and `%(name)s`, and reads any other `%` as the start of one. So, in a statement sent with
parameters, `?` becomes `%s`, `:name` becomes `%(name)s` (a `::` cast stays), and `%` becomes
`%%`. Nothing inside a quoted literal, a comment or a $$ body is touched (but a literal's `%` is
doubled too). What the engines spell differently is never rewritten here: statements ask the
engine for it (memoryd.storage.engine). The conversion is pure, and cached by text: storage
builds a bounded number of distinct statements.
"""

from __future__ import annotations

import functools
import re

_UNTOUCHABLE = re.compile(r"'|--|\$\$")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@functools.lru_cache(maxsize=4096)
def format_style(sql: str, *, parameters: bool = True) -> str:
    """`sql`, with SQLite's parameter markers, in psycopg's (module docstring). Without
    parameters psycopg reads no `%`: only then is nothing doubled."""
    if not parameters:
        return sql
    pieces = []
    for code, untouched in _split_literals(sql):
        pieces.append(_markers(code.replace("%", "%%")))
        pieces.append(untouched.replace("%", "%%") if untouched.startswith("'") else untouched)
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


def _markers(code: str) -> str:
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
