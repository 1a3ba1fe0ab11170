"""Connection policy: small named functions, applied to every connection in one place.

The writer and the readers share the policy; the writer alone sets journal mode (WAL persists in
the database file) and secure_delete (so erased rows are overwritten, not left in free pages).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import apsw

from memoryd.storage import fts5_scores
from memoryd.storage.sqlite_engine import SQLITE, SqliteEngine

Policy = Callable[[apsw.Connection], None]


class SqliteConnection(apsw.Connection):
    """An apsw connection that knows its engine: storage's Transaction on SQLite."""

    engine: SqliteEngine = SQLITE

    def begin_write(self) -> None:
        """IMMEDIATE takes the write lock at once: a second writer waits here (its busy
        timeout) rather than failing at its first write."""
        self.execute("BEGIN IMMEDIATE")


@dataclasses.dataclass(frozen=True, slots=True)
class ConnectionSettings:
    """What the connection policy depends on."""

    path: Path
    busy_timeout_ms: int
    synchronous: Literal["normal", "full"]
    secure_delete: bool


FOLD_FUNCTION = "memoryd_fold"


def wal(connection: apsw.Connection) -> None:
    """Write-ahead logging: readers never block the writer, nor the writer readers."""
    mode = connection.execute("PRAGMA journal_mode = WAL").fetchall()[0][0]
    if str(mode).lower() != "wal":
        raise apsw.CantOpenError(f"could not switch {connection.filename} to WAL (got {mode})")


def busy_timeout(milliseconds: int) -> Policy:
    """Wait this long for a lock before SQLITE_BUSY."""

    def apply(connection: apsw.Connection) -> None:
        connection.set_busy_timeout(milliseconds)

    return apply


def foreign_keys(connection: apsw.Connection) -> None:
    """Enforce foreign keys (SQLite leaves them off by default)."""
    connection.execute("PRAGMA foreign_keys = ON")


def synchronous(level: Literal["normal", "full"]) -> Policy:
    """NORMAL is durable across application crashes in WAL mode; FULL also across power loss."""

    def apply(connection: apsw.Connection) -> None:
        connection.execute(f"PRAGMA synchronous = {level.upper()}")

    return apply


def secure_delete(*, enabled: bool) -> Policy:
    """Overwrite deleted content with zeros, so a purge leaves nothing readable in the file."""

    def apply(connection: apsw.Connection) -> None:
        connection.execute(f"PRAGMA secure_delete = {'ON' if enabled else 'OFF'}")

    return apply


def no_double_quoted_strings(connection: apsw.Connection) -> None:
    """A misspelled identifier in "quotes" is an error, not a silent string literal."""
    connection.config(apsw.SQLITE_DBCONFIG_DQS_DML, 0)
    connection.config(apsw.SQLITE_DBCONFIG_DQS_DDL, 0)


def unicode_case_folding(connection: apsw.Connection) -> None:
    """`memoryd_fold(text)`: Unicode case folding, which SQLite's lower() does only for ASCII.

    Substring searches call it only for words with non-ASCII cased letters (memoryd.storage.
    substrings): in Python it costs several times lower()'s price per row.
    """
    connection.create_scalar_function(FOLD_FUNCTION, _fold, 1, deterministic=True)


def _fold(*values: object) -> str | None:
    (value,) = values  # registered with exactly one argument
    return value.casefold() if isinstance(value, str) else None


def word_scores(connection: apsw.Connection) -> None:
    """`memoryd_bm25`: bm25 of a small scope's word search, with the counts the search read
    (memoryd.storage.fts5_scores)."""
    fts5_scores.register(connection)


def writer_policy(settings: ConnectionSettings) -> list[Policy]:
    """The policy of the one connection that writes."""
    return [
        busy_timeout(settings.busy_timeout_ms),
        wal,
        synchronous(settings.synchronous),
        foreign_keys,
        secure_delete(enabled=settings.secure_delete),
        no_double_quoted_strings,
        unicode_case_folding,
        word_scores,
    ]


def checkpoint_policy(settings: ConnectionSettings) -> list[Policy]:
    """The policy of the connection that checkpoints the WAL (memoryd.storage.checkpoints): its
    synchronous level decides how the checkpoint syncs the file."""
    return [synchronous(settings.synchronous)]


def reader_policy(settings: ConnectionSettings) -> list[Policy]:
    """The policy of read-only connections."""
    return [
        busy_timeout(settings.busy_timeout_ms),
        foreign_keys,
        no_double_quoted_strings,
        unicode_case_folding,
        word_scores,
    ]


def open_connection(
    settings: ConnectionSettings, policy: list[Policy], *, read_only: bool = False
) -> SqliteConnection:
    """Open the database with `policy` applied, read-only or read-write (creating it)."""
    flags = (
        apsw.SQLITE_OPEN_READONLY
        if read_only
        else apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    )
    connection = SqliteConnection(str(settings.path), flags=flags)
    try:
        for apply in policy:
            apply(connection)
    except BaseException:
        connection.close()
        raise
    return connection
