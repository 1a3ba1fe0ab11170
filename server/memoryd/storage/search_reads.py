"""Searches of conversation history (words, substrings, the neighbours of hits), run on reader
connections inside one read transaction.

Searches always filter by the key columns too: the scope tokens in the word index only narrow
the candidates, the columns decide.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from memoryd.domain.conversation import (
    AgentKey,
    ConversationKey,
    HistoryScope,
    OwnerKey,
    scope_token,
)
from memoryd.domain.history import (
    SearchHit,
)
from memoryd.domain.search_query import SearchPlan
from memoryd.storage.engine import engine_of
from memoryd.storage.message_rows import (
    MESSAGE_COLUMNS,
    message_from_row,
)
from memoryd.storage.sql import (
    KEY_MATCH,
    Row,
    add_kinds,
    one,
    placeholders,
    rows,
)
from memoryd.storage.substrings import contains
from memoryd.storage.transaction import Transaction

# Words in at most this many messages of the whole index are searched without the scope's token
# in a large scope (see services.word_search.WordSearch).
RARE_WORDS = 20_000

# A large scope's word searches first read this many of the whole index's best matches (see
# rank_words), checked against the scope IN_SCOPE_CHUNK at a time.
INDEX_FIRST = 1000
IN_SCOPE_CHUNK = 100

# Scopes up to this many messages are searched for substrings by scanning them (~1 us a row).
SCAN_LIMIT = 5000
# PostgreSQL: how long, and for how many scopes, scope_is_small's answers are remembered.
SCOPE_SECONDS = 10.0
SCOPES_REMEMBERED = 4096
_SCOPES: collections.OrderedDict[tuple[str, HistoryScope], tuple[float, bool]] = (
    collections.OrderedDict()
)
_SCOPES_LOCK = threading.Lock()


def rank_words(
    connection: Transaction,
    scope: HistoryScope,
    expression: str,
    kinds: tuple[str, ...],
    limit: int,
    *,
    exclude_ids: Iterable[int] = (),
    narrow: bool = True,
    index_first: bool = False,
    counted: Mapping[str, float] | None = None,
) -> list[tuple[int, float]]:
    """Whole-word matches of `expression` (already quoted) in the content or the sender, best
    bm25 first, then newest, as (message id, bm25): no message read (a search shows few of
    them; messages_by_ids reads those). The sender weighs as the word index says
    (memoryd.storage.fts5_words.SENDER_WEIGHT).

    With `narrow` the word index itself is narrowed to the scope by its token (cheap for a
    scope of a few thousand messages); without, only the join is (cheaper for a large scope and
    words in few messages: intersecting a 100,000-message scope's token costs 10 ms).

    With `index_first` (for a large scope), the word index's own best INDEX_FIRST matches are
    read without the join first, then checked against the scope: when `limit` of them are in
    it, or the index had no more, they are exactly the scope's best, at half the cost of
    joining every match (bm25 is the same in both, and ties go newest first in both).
    Otherwise the join answers.

    `counted` (the rows of the whole index holding each word, as the search read them), for a
    small scope narrowed in the index: its few matches are scored with them (engine.WordIndex).
    """
    excluded = set(exclude_ids)
    if index_first:  # a scoped index only (large_scope_reads)
        best = engine_of(connection).words.best_messages(connection, expression, INDEX_FIRST)
        candidates = [entry for entry in best if entry[0] not in excluded]
        found = _in_scope(connection, scope, candidates, kinds, limit)
        if len(found) >= limit or len(best) < INDEX_FIRST:
            return found
    sql, params = _word_query(
        connection,
        "m.id",
        scope,
        expression,
        kinds=kinds,
        limit=limit,
        exclude_ids=excluded,
        narrow=narrow,
        counted=counted,
    )
    return [(int(row[0]), float(row[1])) for row in rows(connection, sql, params)]


def _in_scope(
    connection: Transaction,
    scope: HistoryScope,
    ranked: list[tuple[int, float]],
    kinds: tuple[str, ...],
    limit: int,
) -> list[tuple[int, float]]:
    """The first `limit` of `ranked` that are messages of the scope and kinds, in order; read
    a chunk at a time (most searches need the first chunk only)."""
    found: list[tuple[int, float]] = []
    for start in range(0, len(ranked), IN_SCOPE_CHUNK):
        chunk = ranked[start : start + IN_SCOPE_CHUNK]
        sql = [
            (
                f"SELECT m.id FROM messages AS m{engine_of(connection).not_indexed} "
                f"WHERE m.id IN ({placeholders(len(chunk))})"
            )
        ]
        params: list[Any] = [item for item, _ in chunk]
        add_scope(sql, params, scope)
        add_kinds(sql, params, kinds)
        inside = {int(row[0]) for row in rows(connection, " ".join(sql), params)}
        found += [entry for entry in chunk if entry[0] in inside]
        if len(found) >= limit:
            break
    return found[:limit]


def _word_query(
    connection: Transaction,
    columns: str,
    scope: HistoryScope,
    expression: str,
    *,
    kinds: tuple[str, ...],
    limit: int,
    exclude_ids: Iterable[int],
    narrow: bool,
    counted: Mapping[str, float] | None,
) -> tuple[str, list[Any]]:
    """The SQL of rank_words: `columns`, then the word index's score (bm25 on SQLite)."""
    match = engine_of(connection).words.match_messages(
        connection, expression, scope_token(scope) if narrow else None, counted=counted
    )
    sql = [f"SELECT {columns}, {match.score} AS score FROM {match.tables} WHERE {match.condition}"]
    params = [*match.score_params, *match.params]
    add_scope(sql, params, scope)
    add_kinds(sql, params, kinds)
    _add_excluded(sql, params, exclude_ids)
    sql.append("ORDER BY score, m.id DESC LIMIT ?")
    params.append(limit)
    return " ".join(sql), params


def held_in_scope(
    connection: Transaction, scope: HistoryScope, expressions: Sequence[str]
) -> list[bool]:
    """Whether any message of the scope holds each expression (a quoted phrase): one lookup a
    phrase, which stops at the first message."""
    words = engine_of(connection).words
    found = []
    for expression in expressions:
        match = words.match_messages(connection, expression, scope_token(scope), scored=False)
        sql = [f"SELECT 1 FROM {match.tables} WHERE {match.condition}"]
        params = list(match.params)
        add_scope(sql, params, scope)
        sql.append("LIMIT 1")
        found.append(bool(rows(connection, " ".join(sql), params)))
    return found


def search_substrings(
    connection: Transaction,
    scope: HistoryScope,
    plan: SearchPlan,
    kinds: tuple[str, ...],
    *,
    exclude_ids: Iterable[int],
    limit: int,
    small: bool | None = None,
) -> list[SearchHit]:
    """Messages containing every word of the query as a substring, newest first. `small` is
    scope_is_small's answer when the caller has it.

    A scope of at most SCAN_LIMIT messages (a conversation, usually an owner) is scanned
    directly: cheaper than any index. A larger one goes through the trigram index, which only
    pays off when it drives the query: its candidates newest first, each checked against the
    scope, stopping at the limit. Left to itself, SQLite's planner prefers the scope's index and
    runs the whole trigram search again for every message of the scope.
    """
    engine = engine_of(connection)
    indexed = engine.match_substrings(
        plan.trigram_pieces,
        lambda: scope_is_small(connection, scope) if small is None else small,
    )
    if indexed is None:  # scanned: every word is checked on the content
        sql = [f"SELECT {MESSAGE_COLUMNS} FROM messages AS m WHERE true"]
        params: list[Any] = []
        order = "m.id DESC"
        exact_words = plan.words
    else:
        sql = [f"SELECT {MESSAGE_COLUMNS} FROM {indexed.tables} WHERE {indexed.condition}"]
        params = list(indexed.params)
        order = indexed.order
        exact_words = plan.exact_words
    for word in exact_words:
        condition, param = contains(engine, "m.content", word)
        sql.append(f"AND {condition}")
        params.append(param)
    add_scope(sql, params, scope)
    add_kinds(sql, params, kinds)
    _add_excluded(sql, params, exclude_ids)
    sql.append(f"ORDER BY {order} LIMIT ?")
    params.append(limit)
    names: dict[Row, ConversationKey] = {}
    return [
        SearchHit(message_from_row(row, names), snippet=None, rank=0.0, word_match=False)
        for row in rows(connection, " ".join(sql), params)
    ]


def large_scope_reads(connection: Transaction, matches: float) -> tuple[bool, bool]:
    """How a large scope's word search reads an expression that about `matches` messages of
    the whole index hold (storage.terms.counts): (narrow the word index by the scope's token,
    rank in the index first). Both are SQLite's: PostgreSQL's index holds no scope token and
    its planner chooses the order of a search itself."""
    if not engine_of(connection).words.scoped:
        return False, False
    return matches > RARE_WORDS, matches > INDEX_FIRST


def scope_is_small(connection: Transaction, scope: HistoryScope) -> bool:
    """Whether the scope holds at most SCAN_LIMIT messages (counting stops just past it). On
    PostgreSQL the answer is remembered SCOPE_SECONDS: there the count is a round trip, and
    visits up to SCAN_LIMIT rows (a millisecond in a large scope); SQLite's costs microseconds.
    A scope crossing the line meanwhile is only read one way longer."""
    key = (str(getattr(connection, "database", "")), scope)
    remember = engine_of(connection).remote
    if remember:
        with _SCOPES_LOCK:
            known = _SCOPES.get(key)
        if known is not None and time.monotonic() - known[0] < SCOPE_SECONDS:
            return known[1]
    small = scope_message_count(connection, scope, SCAN_LIMIT + 1) <= SCAN_LIMIT
    if remember:
        with _SCOPES_LOCK:
            _SCOPES[key] = (time.monotonic(), small)
            _SCOPES.move_to_end(key)
            while len(_SCOPES) > SCOPES_REMEMBERED:
                _SCOPES.popitem(last=False)
    return small


def scope_message_count(connection: Transaction, scope: HistoryScope, stop_at: int) -> int:
    """How many messages the scope holds, counting up to `stop_at` (its index alone)."""
    sql = ["SELECT count(*) FROM (SELECT 1 FROM messages AS m WHERE true"]
    params: list[Any] = []
    add_scope(sql, params, scope)
    sql.append("LIMIT ?)")
    params.append(stop_at)
    return int(one(connection, " ".join(sql), params)[0])


# --- helpers ----------------------------------------------------------------------------------


def add_scope(sql: list[str], params: list[Any], scope: HistoryScope) -> None:
    """Hold a statement to the scope: its conversation, owner or agent."""
    if isinstance(scope, ConversationKey):
        sql.append(f"AND {KEY_MATCH}")
        params.extend(scope.as_row())
    elif isinstance(scope, OwnerKey):
        sql.append("AND m.agent_id = ? AND m.owner_id = ?")
        params.extend((scope.agent_id, scope.owner_id))
    elif isinstance(scope, AgentKey):
        sql.append("AND m.agent_id = ?")
        params.append(scope.agent_id)


def _add_excluded(sql: list[str], params: list[Any], exclude_ids: Iterable[int]) -> None:
    excluded = list(exclude_ids)
    if excluded:
        sql.append(f"AND m.id NOT IN ({placeholders(len(excluded))})")
        params.extend(excluded)
