"""SQLite's engine (memoryd.storage.engine): the embedded store, one file in the data directory,
searched through FTS5.

The store's modules (database, locks, scrubbing) import the connection module, which gives every
connection this engine: the methods that open or lock the store import them when called.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import apsw

from memoryd.domain.search_query import like_pattern
from memoryd.storage.engine import SubstringMatch, VectorTable, WordIndex
from memoryd.storage.fts5_words import INDEXES, Fts5Words
from memoryd.storage.sql import rows
from memoryd.storage.transaction import Transaction

if TYPE_CHECKING:
    from memoryd.storage.background_lock import BackgroundLock
    from memoryd.storage.connection import ConnectionSettings
    from memoryd.storage.database import OpenedDatabase
    from memoryd.storage.location import DatabaseLocation
    from memoryd.storage.scrub import Scrubbed
    from memoryd.storage.vector_store import EmbeddingModel


class SqliteEngine:
    """The Engine of SQLite."""

    name = "sqlite"
    words: WordIndex = Fts5Words()
    remote = False
    replicas = False
    one_file = True
    not_indexed = " NOT INDEXED"
    join_in_order = "CROSS JOIN"
    # The column types, read once (column_types): the schema is the migrations'. The engine is
    # one object for the process.
    _types: dict[tuple[str, str], str] | None = None
    _types_lock = threading.Lock()
    bookkeeping_options = " STRICT"

    # --- pieces of statements ---

    def greatest(self, *values: str) -> str:
        return f"max({', '.join(values)})"

    def position(self, haystack: str, needle: str) -> str:
        return f"instr({haystack}, {needle})"

    def octet_length(self, value: str) -> str:
        return f"length(CAST({value} AS BLOB))"

    def json_rows(self, source: str, alias: str) -> str:
        return f"json_each({source}) AS {alias}"

    def json_values(self, source: str, alias: str, member: str | None = None) -> str:
        path = "" if member is None else f", '$.{member}'"
        return f"json_each({source}{path}) AS {alias}"

    def json_text(self, column: str, member: str) -> str:
        return f"json_extract({column}, '$.{member}')"

    def json_kind(self, column: str, member: str) -> str:
        return f"json_type({column}, '$.{member}')"

    def json_true(self, column: str, member: str) -> str:
        return f"coalesce(json_extract({column}, '$.{member}'), 0) IN (1, 'true')"

    # --- what SQLite does its own way ---

    def match_substrings(
        self, pieces: Sequence[str], small: Callable[[], bool]
    ) -> SubstringMatch | None:
        """The FTS5 trigram table, which only pays off when it drives the query: its
        candidates newest first, each checked against the scope. Left to itself, SQLite's
        planner prefers the scope's index and runs the whole trigram search again for every
        message of the scope; a scope of a few thousand messages is cheaper to scan. LIKE
        '%piece%' without ESCAPE: an ESCAPE clause would keep FTS5 from using the index."""
        if not pieces or small():
            return None
        return SubstringMatch(
            "messages_trigram AS t CROSS JOIN messages AS m ON m.id = t.rowid",
            " AND ".join("t.content LIKE ?" for _ in pieces),
            [like_pattern(piece) for piece in pieces],
            "t.rowid DESC",
        )

    def forget_erased(self, connection: Transaction) -> None:
        """Merge every FTS5 index into one segment (dropping deleted entries from the file), and
        drop the planner's sampled keys, which may quote erased rows (sqlite_stat4:
        sqlite_stat1 keeps counts only, and the planner does without samples until the next
        ANALYZE)."""
        for index in INDEXES:
            connection.execute(f"INSERT INTO {index} ({index}) VALUES ('optimize')")
        if rows(connection, "SELECT 1 FROM sqlite_schema WHERE name = 'sqlite_stat4'"):
            connection.execute("DELETE FROM sqlite_stat4")

    def has_table(self, connection: Transaction, name: str) -> bool:
        return bool(
            rows(
                connection, "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?", (name,)
            )
        )

    def problems(self, connection: Transaction) -> list[str]:
        """SQLite's integrity check, every FTS5 index's own, and rows that refer to rows that
        are not there."""
        found = [
            f"integrity: {row[0]}"
            for row in rows(connection, "PRAGMA integrity_check")
            if row[0] != "ok"
        ]
        for index in INDEXES:
            try:
                connection.execute(f"INSERT INTO {index} ({index}) VALUES ('integrity-check')")
            except apsw.Error as error:
                found.append(f"word index {index}: {error}")
        for table, rowid, parent, _ in rows(connection, "PRAGMA foreign_key_check"):
            found.append(f"orphaned row: {table} rowid {rowid} refers to a missing {parent} row")
        return found

    def database_bytes(self, connection: Transaction) -> int | None:
        return None  # the file's size says it, and the WAL's beside it

    def index_vectors(self, connection: Transaction, model: EmbeddingModel) -> None:
        return None  # vectors are searched in memory (memoryd.storage.vector_reads)

    def replace_vector(self, table: VectorTable, columns: str, select: str) -> str:
        # REPLACE deletes the old row and inserts a new one: a new seq (AUTOINCREMENT).
        return f"INSERT OR REPLACE INTO {table} ({columns}) {select}"

    def after_import(self, connection: Transaction, table: str) -> None:
        return None  # AUTOINCREMENT stays past every id stored

    def column_types(self, connection: Transaction) -> dict[tuple[str, str], str]:
        """The declared types, read once: the schema is the migrations'."""
        with self._types_lock:
            if self._types is None:
                found = rows(
                    connection,
                    "SELECT t.name, c.name, lower(c.type) FROM sqlite_schema AS t, "
                    "pragma_table_info(t.name) AS c WHERE t.type = 'table'",
                )
                self._types = {(str(row[0]), str(row[1])): str(row[2]) for row in found}
            return self._types

    def json_pick(self, kind: str, index: int) -> str:
        return f"j.value ->> {index}"  # `->>` gives the element its own type

    def lock_migrations(self, connection: Transaction) -> None:
        return None  # the write transaction's lock is the database's

    def erasure_wait(self, count: int, since: str, database: str) -> str:
        return (
            f"{count} erasure(s) since {since} wait for the WAL to be truncated: until readers "
            "on an older snapshot (an open export) let go, the erased text may still be in "
            f"{database}-wal; the server retries, and truncates at its next start"
        )

    # --- the store ---

    def open(self, location: DatabaseLocation) -> OpenedDatabase:
        from memoryd.storage.database import Database  # noqa: PLC0415 - it imports this module

        return Database.open(_file(location))

    @contextlib.contextmanager
    def read_snapshot(self, location: DatabaseLocation) -> Iterator[Transaction]:
        from memoryd.storage.connection import open_connection, reader_policy  # noqa: PLC0415
        from memoryd.storage.errors import translate_read_errors  # noqa: PLC0415

        settings = _file(location)
        connection = open_connection(settings, reader_policy(settings), read_only=True)
        try:
            with translate_read_errors():
                connection.execute("BEGIN")
                try:
                    yield connection
                finally:
                    connection.execute("COMMIT")
        finally:
            connection.close()

    def scrub_erased(self, location: DatabaseLocation) -> Scrubbed:
        """The WAL truncated (not when a writer or a reader is in the way); the statistics
        were dropped in the erasure's own transaction."""
        from memoryd.storage import scrub  # noqa: PLC0415
        from memoryd.storage.connection import open_connection, writer_policy  # noqa: PLC0415

        no_wait = dataclasses.replace(_file(location), busy_timeout_ms=0)
        connection = open_connection(no_wait, writer_policy(no_wait))
        try:
            return scrub.Scrubbed(
                wal_truncated=scrub.truncate_wal(connection), statistics_rebuilt=True
            )
        finally:
            connection.close()

    def background_lock(self, location: DatabaseLocation) -> BackgroundLock:
        from memoryd.storage.background_lock import FileLock  # noqa: PLC0415

        return FileLock(_file(location).path.parent)

    def describe(self, location: DatabaseLocation) -> str:
        return str(_file(location).path)

    def files(self, location: DatabaseLocation) -> tuple[Path, ...]:
        path = _file(location).path
        return path, path.with_name(path.name + "-wal")


def _file(location: DatabaseLocation) -> ConnectionSettings:
    from memoryd.storage.connection import ConnectionSettings  # noqa: PLC0415

    if not isinstance(location, ConnectionSettings):  # engine_for chose this engine
        raise TypeError(f"not SQLite's settings: {location!r}")
    return location


SQLITE = SqliteEngine()
