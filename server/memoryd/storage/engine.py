"""The engine: what differs between SQLite and PostgreSQL, chosen once when the database opens
(`engine_for`) and carried by every transaction (`engine_of`).

Storage's repository functions write one text per statement. Where the engines spell a piece of
SQL differently, the statement asks the engine for it (`greatest`, `json_rows`, ...); where they
differ in what they can do, it reads a capability flag (`remote`, `replicas`, `one_file`) or
calls a named method (`problems`, `index_vectors`, ...). Word search goes through the engine's
`WordIndex` (FTS5 on SQLite, a tsvector column on PostgreSQL). Nothing outside the engine
modules (`memoryd.storage.sqlite_engine`, `memoryd.storage.postgres.engine` and the word indexes
they hold) asks which engine it is: `tests/server/test_layers.py` keeps it so.

The one text transformation left is the driver's: statements mark their parameters `?` and
`:name` (SQLite's), which the PostgreSQL transaction passes to psycopg as `%s` and `%(name)s`
(`memoryd.storage.postgres.paramstyle`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from memoryd.storage.transaction import Transaction

if TYPE_CHECKING:
    from memoryd.storage.background_lock import BackgroundLock
    from memoryd.storage.database import OpenedDatabase
    from memoryd.storage.location import DatabaseLocation
    from memoryd.storage.scrub import Scrubbed
    from memoryd.storage.vector_store import EmbeddingModel

WordTable = Literal["messages", "memories"]
VectorTable = Literal["message_vectors", "memory_vectors"]


@dataclasses.dataclass(frozen=True, slots=True)
class WordMatch:
    """The rows of a table holding a word expression, as pieces of one statement: `tables` for
    its FROM list (the table under the alias asked for, joined with what the index needs),
    `condition` for its WHERE clause, `score` for its select list (lower is better, as bm25's)
    with its `score_params`, and `params`, the parameters of `tables` then of `condition`: a
    statement of SELECT score ... FROM tables WHERE condition binds `score_params`, then
    `params`."""

    tables: str
    condition: str
    score: str
    params: list[Any]
    score_params: list[Any] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, slots=True)
class SubstringMatch:
    """Messages (alias m) whose content holds pieces of text, through a trigram index: `tables`
    for the FROM list, `condition` and its `params`, and the `order` (newest first) that lets
    the index drive the statement."""

    tables: str
    condition: str
    params: list[Any]
    order: str


class WordIndex(Protocol):
    """A backend's index of whole words, over messages (content and sender) and memory rows
    (category, key and value). Expressions are quoted FTS5 phrases joined by spaces (every
    phrase) or OR (any phrase): memoryd.domain.search_query builds them."""

    # Whether the index holds each row's scope token, so that a search can be narrowed by it in
    # the index itself, and whether it can be read on its own, best first, before the join.
    scoped: bool

    def match_messages(
        self,
        connection: Transaction,
        expression: str,
        scope_token: str | None,
        *,
        scored: bool = True,
        counted: Mapping[str, float] | None = None,
    ) -> WordMatch:
        """Messages (alias m) holding the expression, scored (unless only whether any does
        matters); narrowed by `scope_token` in the index when given and the index is
        `scoped`. `counted`: the rows of the index holding each of its words, as the search
        read them, given when the scope is small (SQLite scores its few rows with them rather
        than counting each word's rows again)."""
        ...

    def match_memories(
        self,
        connection: Transaction,
        expression: str,
        scope_token: str,
        *,
        scored: bool = True,
        counted: Mapping[str, float] | None = None,
    ) -> WordMatch:
        """Memory rows (alias r) of the owner of `scope_token` holding the expression, scored
        unless only whether any does matters (with `counted`, as match_messages)."""
        ...

    def best_messages(
        self, connection: Transaction, expression: str, limit: int
    ) -> list[tuple[int, float]]:
        """The index's own best `limit` messages for the expression, as (id, score), without
        reading a message (only a `scoped` index answers; others return [])."""
        ...

    def counts(
        self, connection: Transaction, table: WordTable, terms: Sequence[str]
    ) -> tuple[float, list[float]]:
        """The rows of `table`, and how many hold each term (unquoted; a term of several
        words, as many as its rarest word)."""
        ...


class Engine(Protocol):
    """One backend's SQL and abilities (module docstring)."""

    name: str
    words: WordIndex

    def __hash__(self) -> int:
        """Engines are kept by identity: statements built for one are cached by it."""
        ...

    # Each statement is a round trip to a server: answers worth remembering for a while.
    remote: bool
    # Several servers may share the store, each with a data directory of its own.
    replicas: bool
    # The store is one file in the data directory (backup, restore, its size on disk).
    one_file: bool

    # --- pieces of statements ---

    def greatest(self, *values: str) -> str:
        """The largest of two or more values."""
        ...

    def position(self, haystack: str, needle: str) -> str:
        """Where `needle` starts in `haystack`, from 1 (0: not in it)."""
        ...

    def octet_length(self, value: str) -> str:
        """How many bytes a text takes in UTF-8."""
        ...

    def json_rows(self, source: str, alias: str) -> str:
        """A FROM item of a JSON array's elements: `alias.value` each element (read its members
        with `->>`), `alias.key` its place (ascending in the array's order)."""
        ...

    def json_values(self, source: str, alias: str, member: str | None = None) -> str:
        """A FROM item of the scalars of a JSON array (`member`: the array in that member of
        an object), each as `alias.value`, compared with values of the same JSON."""
        ...

    def json_text(self, column: str, member: str) -> str:
        """A member of a JSON object, as a value to compare with NULL or CAST."""
        ...

    def json_kind(self, column: str, member: str) -> str:
        """The JSON type of a member ('array', 'object', ...; NULL when absent)."""
        ...

    def json_true(self, column: str, member: str) -> str:
        """Whether a member is true, 1 or "true" (false when absent)."""
        ...

    # The planner hints of SQLite: read this table without its indexes, join in this order.
    not_indexed: str
    join_in_order: str

    # --- what only one engine does, or each does its own way ---

    def match_substrings(
        self, pieces: Sequence[str], small: Callable[[], bool]
    ) -> SubstringMatch | None:
        """Messages holding every piece (of three characters or more), ignoring case, through
        the engine's trigram index; None when the scope is better scanned (`small` says whether
        it is small enough to be)."""
        ...

    def forget_erased(self, connection: Transaction) -> None:
        """In an erasure's transaction: drop what the indexes and the planner's samples keep
        of erased rows (PostgreSQL's go with the VACUUM after the commit)."""
        ...

    def has_table(self, connection: Transaction, name: str) -> bool:
        """Whether the database has this table (read without writing: read-only too)."""
        ...

    def problems(self, connection: Transaction) -> list[str]:
        """What is wrong with the database (empty when it is healthy)."""
        ...

    def database_bytes(self, connection: Transaction) -> int | None:
        """The database's size, when the engine says it (None: read the file)."""
        ...

    def index_vectors(self, connection: Transaction, model: EmbeddingModel) -> None:
        """Whatever index a new embedding model's vectors need."""
        ...

    def replace_vector(self, table: VectorTable, columns: str, select: str) -> str:
        """INSERT INTO `table` (`columns`) `select`, replacing the vector of the same row and
        model when there is one (a message's gets a new seq, so that caches loading what is
        newer than theirs see it)."""
        ...

    def after_import(self, connection: Transaction, table: str) -> None:
        """After an import stored rows with their own ids: the next id drawn is past them."""
        ...

    def column_types(self, connection: Transaction) -> dict[tuple[str, str], str]:
        """The type of every column of memoryd's tables, by (table, column), in lower case."""
        ...

    def json_pick(self, kind: str, index: int) -> str:
        """Element `index` of a JSON array row `j`, as a value of a column of type `kind`."""
        ...

    def lock_migrations(self, connection: Transaction) -> None:
        """Inside a migration's write transaction: make a second server migrating at the same
        moment wait for this one."""
        ...

    bookkeeping_options: str

    def erasure_wait(self, count: int, since: str, database: str) -> str:
        """The note of `memoryd check` for erasures whose text the engine may still hold."""
        ...

    # --- the store, before any transaction ---

    def open(self, location: DatabaseLocation) -> OpenedDatabase:
        """Open and migrate the database; StartupError when it cannot be."""
        ...

    def read_snapshot(
        self, location: DatabaseLocation
    ) -> contextlib.AbstractContextManager[Transaction]:
        """A read-only connection of its own, in one read transaction."""
        ...

    def scrub_erased(self, location: DatabaseLocation) -> Scrubbed:
        """One attempt to scrub what erasures left after their commits."""
        ...

    def background_lock(self, location: DatabaseLocation) -> BackgroundLock:
        """The lock one process of those sharing the store holds to run background work."""
        ...

    def describe(self, location: DatabaseLocation) -> str:
        """Where the database is, for messages and logs (never a password)."""
        ...

    def files(self, location: DatabaseLocation) -> tuple[Path, ...]:
        """The files of the store in the data directory: the database, then its WAL (none on
        a server's)."""
        ...


def engine_of(connection: Transaction) -> Engine:
    """The engine of an open transaction."""
    engine: Engine = connection.engine
    return engine


def engine_for(location: DatabaseLocation) -> Engine:
    """The engine of a configured store: chosen here, once, by what the settings name."""
    from memoryd.storage.postgres.settings import PostgresSettings  # noqa: PLC0415

    if isinstance(location, PostgresSettings):
        from memoryd.storage.postgres.engine import POSTGRES  # noqa: PLC0415 - no driver unless used

        return POSTGRES
    from memoryd.storage.sqlite_engine import SQLITE  # noqa: PLC0415

    return SQLITE
