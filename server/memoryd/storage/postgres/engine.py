"""PostgreSQL's engine (memoryd.storage.engine): a store shared by replicas over the network,
searched through a tsvector column (memoryd.storage.postgres.words) and pg_trgm.

Nothing here imports psycopg: the methods that open or lock the store import the modules that
do, when they are called. (storage/errors.py still imports the driver, when it is installed, for
its table of transient errors: 78 ms of every start, SQLite's too.)
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from memoryd.domain.search_query import like_pattern
from memoryd.storage.connection import FOLD_FUNCTION
from memoryd.storage.engine import SubstringMatch, VectorTable, WordIndex
from memoryd.storage.postgres.words import TsvectorWords
from memoryd.storage.sql import rows
from memoryd.storage.transaction import Transaction

if TYPE_CHECKING:
    from memoryd.storage.background_lock import BackgroundLock
    from memoryd.storage.database import OpenedDatabase
    from memoryd.storage.location import DatabaseLocation
    from memoryd.storage.postgres.settings import PostgresSettings
    from memoryd.storage.scrub import Scrubbed
    from memoryd.storage.vector_store import EmbeddingModel

# pg_advisory_xact_lock's key while a migration runs: "memoryd" in ASCII, as an integer.
MIGRATION_LOCK = 0x6D656D6F727964
# A JSON true, the number 1 or the string "true" (what SQLite's json_extract compares equal to
# 1 or 'true').
_TRUE = "('1', 'true', '\"true\"')"
# Rows whose parent is gone: (what, the query counting them). Foreign keys forbid them; a
# constraint dropped or disabled by hand (session_replication_role) would let them in.
_ORPHANS = (
    (
        "messages of no conversation",
        (
            "SELECT count(*) FROM messages AS m WHERE NOT EXISTS (SELECT 1 FROM conversations AS c "
            "WHERE (c.agent_id, c.owner_id, c.channel, c.chat_id, c.thread_scope) = "
            "(m.agent_id, m.owner_id, m.channel, m.chat_id, m.thread_scope))"
        ),
    ),
    (
        "memory rows citing a message that is gone",
        (
            "SELECT count(*) FROM memories AS r WHERE r.source_message_id IS NOT NULL "
            "AND NOT EXISTS (SELECT 1 FROM messages AS m WHERE m.id = r.source_message_id)"
        ),
    ),
    (
        "revisions of no resource",
        (
            "SELECT count(*) FROM resource_revisions AS v WHERE NOT EXISTS "
            "(SELECT 1 FROM resources AS s WHERE s.id = v.resource_id)"
        ),
    ),
)


class PostgresEngine:
    """The Engine of PostgreSQL."""

    name = "postgres"
    words: WordIndex = TsvectorWords()
    remote = True
    replicas = True
    one_file = False
    not_indexed = ""
    join_in_order = "JOIN"
    # The column types, read once (column_types): the schema is the migrations'. The engine is
    # one object for the process.
    _types: dict[tuple[str, str], str] | None = None
    _types_lock = threading.Lock()
    bookkeeping_options = ""

    # --- pieces of statements ---

    def greatest(self, *values: str) -> str:
        return f"GREATEST({', '.join(values)})"

    def position(self, haystack: str, needle: str) -> str:
        return f"strpos({haystack}, {needle})"

    def octet_length(self, value: str) -> str:
        return f"octet_length({value})"

    def json_rows(self, source: str, alias: str) -> str:
        # ORDINALITY counts from 1, not 0: `key` is only ever used to keep the array's order.
        return (
            f"jsonb_array_elements(CAST({source} AS jsonb)) WITH ORDINALITY AS {alias}(value, key)"
        )

    def json_values(self, source: str, alias: str, member: str | None = None) -> str:
        json = (
            f"CAST({source} AS jsonb)"
            if member is None
            else f"(CAST({source} AS jsonb) -> '{member}')"
        )
        return f"jsonb_array_elements_text({json}) AS {alias}(value)"

    def json_text(self, column: str, member: str) -> str:
        return f"(CAST({column} AS jsonb) ->> '{member}')"

    def json_kind(self, column: str, member: str) -> str:
        return f"jsonb_typeof(CAST({column} AS jsonb) -> '{member}')"

    def json_true(self, column: str, member: str) -> str:
        return f"coalesce(CAST({column} AS jsonb) -> '{member}' IN {_TRUE}, false)"

    # --- what PostgreSQL does its own way ---

    def match_substrings(
        self, pieces: Sequence[str], small: Callable[[], bool]
    ) -> SubstringMatch | None:
        """pg_trgm's index of the folded content answers LIKE '%piece%' where the planner
        finds it pays. A backslash is LIKE's escape character: doubled, it is itself."""
        return SubstringMatch(
            "messages AS m",
            " AND ".join(
                ["true", *(f"{FOLD_FUNCTION}(m.content) LIKE {FOLD_FUNCTION}(?)" for _ in pieces)]
            ),
            [like_pattern(piece.replace("\\", "\\\\")) for piece in pieces],
            "m.id DESC",
        )

    def forget_erased(self, connection: Transaction) -> None:
        return None  # the VACUUM, ANALYZE and REINDEX after the commit (postgres.scrubbing)

    def has_table(self, connection: Transaction, name: str) -> bool:
        return bool(rows(connection, "SELECT to_regclass(?) IS NOT NULL", (name,))[0][0])

    def problems(self, connection: Transaction) -> list[str]:
        """Indexes left invalid, constraints not validated, and orphaned rows."""
        found = [
            f"index {name} is not valid (a CREATE INDEX or REINDEX that failed): "
            f"REINDEX INDEX {name}"
            for (name,) in rows(
                connection,
                "SELECT c.relname FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid "
                "JOIN pg_namespace AS n ON n.oid = c.relnamespace "
                "WHERE n.nspname = current_schema() AND NOT (i.indisvalid AND i.indisready) "
                "ORDER BY 1",
            )
        ]
        found += [
            f"constraint {name} of {table} is not validated: rows may break it"
            for name, table in rows(
                connection,
                "SELECT con.conname, cls.relname FROM pg_constraint AS con "
                "JOIN pg_class AS cls ON cls.oid = con.conrelid "
                "JOIN pg_namespace AS n ON n.oid = con.connamespace "
                "WHERE n.nspname = current_schema() AND NOT con.convalidated ORDER BY 1",
            )
        ]
        for what, sql in _ORPHANS:
            count = int(rows(connection, sql)[0][0])
            if count:
                found.append(f"orphaned rows: {count} {what}")
        return found

    def database_bytes(self, connection: Transaction) -> int | None:
        return int(rows(connection, "SELECT pg_database_size(current_database())")[0][0])

    def index_vectors(self, connection: Transaction, model: EmbeddingModel) -> None:
        """An HNSW index of the model's vectors. The model's id and dimension are integers of
        our own row: safe to spell out, and spelled out they let the planner match a search to
        this partial index."""
        from memoryd.storage.vector_store import embedding_expression, index_name  # noqa: PLC0415

        connection.execute(
            f"CREATE INDEX IF NOT EXISTS {index_name(model.id)} ON message_vectors "
            f"USING hnsw ({embedding_expression(model, 'message_vectors')} halfvec_cosine_ops) "
            f"WHERE model_id = {model.id}"
        )

    def replace_vector(self, table: VectorTable, columns: str, select: str) -> str:
        key = "message_id" if table == "message_vectors" else "memory_id"
        seq = (
            "seq = nextval(pg_get_serial_sequence('message_vectors', 'seq')), "
            if table == "message_vectors"
            else ""
        )
        return (
            f"INSERT INTO {table} ({columns}) {select} ON CONFLICT ({key}, model_id) DO UPDATE "
            f"SET {seq}scale = excluded.scale, vector = excluded.vector"
        )

    def after_import(self, connection: Transaction, table: str) -> None:
        """The id sequence of `table` past every id the import stored, never back, so that the
        next row gets an id never used (SQLite's AUTOINCREMENT does this by itself)."""
        if self.column_types(connection).get((table, "id")) != "bigint":
            return
        sequence = f"pg_get_serial_sequence('{table}', 'id')"
        connection.execute(
            f"SELECT setval({sequence}, GREATEST((SELECT coalesce(max(id), 0) FROM {table}), "
            f"coalesce(pg_sequence_last_value(CAST({sequence} AS regclass)), 0), 1))"
        )

    def column_types(self, connection: Transaction) -> dict[tuple[str, str], str]:
        """information_schema's data types, read once: the schema is the migrations'."""
        with self._types_lock:
            if self._types is None:
                found = rows(
                    connection,
                    "SELECT table_name, column_name, data_type FROM information_schema.columns "
                    "WHERE table_schema = current_schema()",
                )
                self._types = {(str(row[0]), str(row[1])): str(row[2]) for row in found}
            return self._types

    def json_pick(self, kind: str, index: int) -> str:
        # `->>` gives text: cast to the column's type.
        return f"j.value ->> {index}" if kind == "text" else f"CAST(j.value ->> {index} AS {kind})"

    def lock_migrations(self, connection: Transaction) -> None:
        """An advisory lock held by the migration's transaction: a second server starting at
        the same moment waits, then finds the migration recorded."""
        connection.execute("SELECT pg_advisory_xact_lock(?)", (MIGRATION_LOCK,))

    def erasure_wait(self, count: int, since: str, database: str) -> str:
        return (
            f"{count} erasure(s) since {since} wait for a VACUUM: until transactions on an "
            "older snapshot (an open export) end, PostgreSQL keeps the erased rows as dead "
            "tuples; the server retries, and vacuums at its next start"
        )

    # --- the store ---

    def open(self, location: DatabaseLocation) -> OpenedDatabase:
        from memoryd.errors import StartupError  # noqa: PLC0415

        try:
            from memoryd.storage.postgres import database  # noqa: PLC0415 - loads the driver
        except ImportError as error:
            raise StartupError(
                'memoryd.storage.backend = "postgres" needs the PostgreSQL driver: '
                "pip install 'memoryd[postgres]' (psycopg 3)"
            ) from error
        return database.PostgresDatabase.open(_server(location))

    @contextlib.contextmanager
    def read_snapshot(self, location: DatabaseLocation) -> Iterator[Transaction]:
        from memoryd.storage.postgres import database  # noqa: PLC0415 - loads the driver

        with database.read_snapshot(_server(location)) as transaction:
            yield transaction

    def scrub_erased(self, location: DatabaseLocation) -> Scrubbed:
        """A VACUUM of the erased tables, their statistics and word indexes rebuilt (not when
        a reader's snapshot kept it from removing every erased row)."""
        from memoryd.storage.postgres import scrubbing  # noqa: PLC0415 - loads the driver

        return scrubbing.vacuum(_server(location))

    def background_lock(self, location: DatabaseLocation) -> BackgroundLock:
        from memoryd.storage.postgres.advisory_lock import AdvisoryLock  # noqa: PLC0415

        return AdvisoryLock(_server(location))

    def describe(self, location: DatabaseLocation) -> str:
        return _server(location).target

    def files(self, location: DatabaseLocation) -> tuple[Path, ...]:
        return ()


def _server(location: DatabaseLocation) -> PostgresSettings:
    from memoryd.storage.postgres.settings import PostgresSettings  # noqa: PLC0415

    if not isinstance(location, PostgresSettings):  # engine_for chose this engine
        raise TypeError(f"not PostgreSQL's settings: {location!r}")
    return location


POSTGRES = PostgresEngine()
