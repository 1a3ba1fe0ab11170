"""Word search on PostgreSQL: the FTS5 expressions storage builds, as tsquery, and FTS5's
ranking in PostgreSQL's terms (snippets are built alike on both backends: memoryd.domain
.snippets).

memoryd.domain.search_query turns user text into quoted FTS5 phrases joined by spaces (every
phrase) or by OR (any phrase). Here each phrase goes to `phraseto_tsquery` as a parameter: it
builds lexemes from the text, so no character of it is ever tsquery syntax. The phrases are
joined with `&&` or `||`.

The text search configuration `memoryd_english` (the schema's) stems English with Snowball, as
FTS5's porter tokenizer does, and keeps stop words, as FTS5 does: the domain decides which
words count, not the index.

FTS5 ranks by bm25; PostgreSQL has no bm25, and ts_rank alone has no inverse document
frequency: a word in half the rows (a speaker's name, matched as a sender) counted as much as a
rare one, and LoCoMo's recall@10 of the words alone was 54 against SQLite's 62. So a ranked
search (`ranked`) weighs each phrase's ts_rank (the content weighted 1 and the sender
SENDER_WEIGHT, normalised by the document's length: 1 + log of its words; a saturating term
frequency) by bm25's idf of the phrase, ln((N - n + 0.5) / (n + 0.5)) with FTS5's floor of
1e-6, and sums them (LoCoMo: 61). N is the table's rows as the planner estimates them, and n
the planner's too, once the table has statistics: the share of the rows pg_stats holds for a
common word (the most common elements of the tsvector column), and for any other half the least
common one's, as the planner assumes; so a search counts nothing. Before the table was first
analyzed, n is counted through the GIN index (up to UNMEASURED_MATCHES rows).
Scores are negated so that lower is better, as bm25's are: callers sort and scale them the same
way on both backends.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import re
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from memoryd.storage.engine import WordMatch, WordTable
from memoryd.storage.sql import rows
from memoryd.storage.transaction import Transaction

CONFIG = "memoryd_english"
_PHRASE = re.compile(r'"((?:[^"]|"")*)"')
# ts_rank's weights of {D, C, B, A}: A is a message's content (or a memory's text), B its sender.
SENDER_WEIGHT = 1.0
_WEIGHTS = f"'{{0, 0, {SENDER_WEIGHT}, 1.0}}'"


# What a statement joins with its tsquery (`query_table`), and how it names it.
QUERY = "wq.q"
# Ends that one-row table's subquery: OFFSET 0 keeps PostgreSQL from pulling it up into the
# statement, where a generic plan (psycopg prepares a statement run five times) stemmed the
# phrases again for every row: 7 ms instead of 1 for a conversation of 2,000 messages.
ONCE = "OFFSET 0"
# FTS5's idf of a word in half the rows or more (where the formula gives 0 or less).
IDF_FLOOR = 1e-6
# Without statistics (a table never analyzed yet), a phrase is counted through the index up to
# this many rows; with them nothing is counted (a count visits the rows: up to 1,000 rows took
# 5 ms over 1,000,000 messages).
UNMEASURED_MATCHES = 5_000
# How long a table's statistics are used before they are read again.
STATISTICS_SECONDS = 30.0
_STATISTICS: dict[tuple[str, str], _Statistics] = {}
# A phrase's idf is remembered this long: a search reads its words twice (every word, then any
# word), and an agent often asks again. Counts move with every write, so not for long.
IDF_SECONDS = 10.0
REMEMBERED = 4096
# The reader threads share what is remembered.
_LOCK = threading.Lock()
_IDF: collections.OrderedDict[tuple[str, str, str], tuple[float, float]] = collections.OrderedDict()
# A phrase's lexemes (stemming never changes): a phrase known to be a common word is not
# counted again, since the statistics say how common it is.
_STEMS: collections.OrderedDict[str, tuple[str, ...] | None] = collections.OrderedDict()
# The tables with a `words` tsvector column.
_TABLES = frozenset({"messages", "memories"})
# The table's rows as the planner estimates them (its last count, scaled to the pages it has
# now); counted, up to 10,000, when it was never measured.
_ROWS = (
    "SELECT CASE WHEN c.relpages > 0 AND c.reltuples >= 0 THEN c.reltuples / c.relpages * "
    "(pg_relation_size(c.oid) / CAST(current_setting('block_size') AS float8)) "
    "ELSE (SELECT count(*) FROM (SELECT 1 FROM {table} LIMIT 10000) AS x) END AS n "
    "FROM pg_class AS c WHERE c.oid = CAST('{table}' AS regclass)"
)


def query_table(expression: str) -> tuple[str, list[str]]:
    """A one-row table holding the tsquery of an FTS5 expression of quoted phrases, for a
    statement's FROM list (`FROM messages AS m, {table}`; the query is QUERY), and its
    parameters: the query is built once, whatever the statement does with it."""
    phrases = _phrases(expression)
    if not phrases:
        return "(SELECT CAST('' AS tsquery) AS q) AS wq", []
    sql = _joiner(expression).join(f"phraseto_tsquery('{CONFIG}', ?)" for _ in phrases)
    return f"(SELECT {sql} AS q {ONCE}) AS wq", phrases


@dataclasses.dataclass(frozen=True, slots=True)
class Ranked:
    """A ranked word search of one table: the FROM-list table holding the whole tsquery
    (QUERY), each phrase's and its idf, with its parameters; and the SQL of a row's score."""

    table: str
    params: list[Any]
    phrases: int

    def score(self, column: str) -> str:
        """The SQL of a row's score (lower is better, as bm25's): each phrase's ts_rank
        against `column`, weighed by its idf, summed and negated."""
        if not self.phrases:
            return "0"
        terms = (
            f"wq.idf[{n}] * ts_rank({_WEIGHTS}, {column}, wq.qs[{n}], 1)"
            for n in range(1, self.phrases + 1)
        )
        return f"-({' + '.join(terms)})"


def ranked(connection: Transaction, table: str, expression: str) -> Ranked:
    """The ranked search of `expression` in `table` (messages or memories, whose tsvector
    column is `words`): the idf of each phrase read now, one statement (module docstring)."""
    phrases = _phrases(expression)
    if not phrases:
        return Ranked("(SELECT CAST('' AS tsquery) AS q) AS wq", [], 0)
    each = ", ".join(f"phraseto_tsquery('{CONFIG}', ?)" for _ in phrases)
    whole = _joiner(expression).join(f"t.qs[{n}]" for n in range(1, len(phrases) + 1))
    sql = (
        f"(SELECT {whole} AS q, t.qs, t.idf FROM (SELECT ARRAY[{each}] AS qs, "
        f"CAST(? AS float8[]) AS idf) AS t {ONCE}) AS wq"
    )
    return Ranked(sql, [*phrases, idf(connection, table, phrases)], len(phrases))


def idf(connection: Transaction, table: str, phrases: Sequence[str]) -> list[float]:
    """bm25's idf of each phrase in `table` (module docstring), remembered IDF_SECONDS."""
    if table not in _TABLES:
        raise ValueError(f"not a table with words: {table}")
    database = _database(connection)
    now = time.monotonic()
    with _LOCK:
        remembered = [_IDF.get((database, table, phrase)) for phrase in phrases]
    if all(entry is not None and now - entry[0] < IDF_SECONDS for entry in remembered):
        return [entry[1] for entry in remembered if entry is not None]
    total_rows, matching = rows_holding(connection, table, phrases)
    weights = []
    for matches in matching:
        total = max(total_rows, matches)
        weight = math.log((total - matches + 0.5) / (matches + 0.5))
        weights.append(weight if weight > 0 else IDF_FLOOR)
    with _LOCK:
        for phrase, weight in zip(phrases, weights, strict=True):
            _remember(_IDF, (database, table, phrase), (now, weight))
    return weights


def rows_holding(
    connection: Transaction, table: str, phrases: Sequence[str]
) -> tuple[float, list[float]]:
    """The table's rows, and how many hold each phrase (module docstring). With the planner's
    statistics, nothing is counted (a phrase not yet stemmed is, in one statement that reads no
    table); without them, one statement counts every phrase through the index."""
    if table not in _TABLES:
        raise ValueError(f"not a table with words: {table}")
    with _LOCK:
        stems = {phrase: _STEMS.get(phrase) for phrase in phrases}
    measured = _statistics(connection, table)
    if measured.common:
        stems |= _stems(connection, [phrase for phrase in phrases if stems[phrase] is None])
        # A common word's share is the statistics' own; any other's is taken as half the least
        # common one's, as the planner takes it.
        rarest = min(measured.common.values()) / 2
        holding = [
            (_common_share(stems[phrase], measured.common) or rarest) * measured.rows
            for phrase in phrases
        ]
        total_rows = measured.rows
    else:
        total_rows, found = _count(connection, table, phrases, UNMEASURED_MATCHES)
        stems |= {phrase: found[phrase][0] for phrase in phrases}
        holding = [float(found[phrase][1]) for phrase in phrases]
    with _LOCK:
        for phrase in phrases:
            _remember(_STEMS, phrase, stems[phrase])
    return total_rows, holding


def _count(
    connection: Transaction, table: str, phrases: Sequence[str], limit: int
) -> tuple[float, dict[str, tuple[tuple[str, ...], int]]]:
    """The table's rows, and each phrase's lexemes and rows holding it (counted to limit + 1)."""
    found = rows(
        connection,
        f"SELECT ({_ROWS.format(table=table)}), p.phrase, "
        f"tsvector_to_array(to_tsvector('{CONFIG}', p.phrase)), (SELECT count(*) FROM "
        f"(SELECT 1 FROM {table} AS x WHERE x.words @@ phraseto_tsquery('{CONFIG}', p.phrase) "
        "LIMIT ?) AS c) FROM unnest(CAST(? AS text[])) AS p(phrase)",
        (limit + 1, list(phrases)),
    )
    counts = {str(row[1]): (tuple(row[2]), int(row[3])) for row in found}
    return float(found[0][0]), counts


def _stems(connection: Transaction, phrases: Sequence[str]) -> dict[str, tuple[str, ...] | None]:
    """Each phrase's lexemes, as the index holds them."""
    if not phrases:
        return {}
    found = rows(
        connection,
        f"SELECT p.phrase, tsvector_to_array(to_tsvector('{CONFIG}', p.phrase)) "
        "FROM unnest(CAST(? AS text[])) AS p(phrase)",
        (list(phrases),),
    )
    return {str(row[0]): tuple(row[1]) for row in found}


@dataclasses.dataclass(frozen=True, slots=True)
class _Statistics:
    """What the planner knows of a table: its rows (its last count scaled to the pages it has
    now), and the share of rows holding each of the most common words of `words` (pg_stats'
    most common elements: none before the table was first analyzed)."""

    read_at: float
    rows: float
    common: dict[str, float]


def _statistics(connection: Transaction, table: str) -> _Statistics:
    """The table's statistics, read again after STATISTICS_SECONDS: they change with ANALYZE,
    a few times an hour at most, and one read costs about a millisecond."""
    key = (_database(connection), table)
    now = time.monotonic()
    with _LOCK:
        cached = _STATISTICS.get(key)
    if cached is not None and now - cached.read_at < STATISTICS_SECONDS:
        return cached
    found = rows(
        connection,
        f"SELECT ({_ROWS.format(table=table)}), "
        "(SELECT CAST(CAST(s.most_common_elems AS text) AS text[]) FROM pg_stats AS s "
        "WHERE s.schemaname = current_schema() AND s.tablename = ? AND s.attname = 'words'), "
        "(SELECT s.most_common_elem_freqs FROM pg_stats AS s "
        "WHERE s.schemaname = current_schema() AND s.tablename = ? AND s.attname = 'words')",
        (table, table),
    )
    total, elements, shares = found[0]
    common = dict(zip(elements or (), (float(f) for f in shares or ()), strict=False))
    measured = _Statistics(now, float(total), common)
    with _LOCK:
        _STATISTICS[key] = measured
    return measured


def _common_share(lexemes: tuple[str, ...] | None, common: dict[str, float]) -> float | None:
    """The share of rows holding a one-word phrase that is among the most common words."""
    if lexemes is None or len(lexemes) != 1:
        return None
    return common.get(lexemes[0])


def _remember(cache: collections.OrderedDict[Any, Any], key: Any, value: Any) -> None:
    """Keep `value` under `key`, the least recently kept going past REMEMBERED entries."""
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > REMEMBERED:
        cache.popitem(last=False)


def _database(connection: Transaction) -> str:
    """Which database a connection is on (memoryd.storage.postgres.transaction), so that what
    is remembered of one is never used for another."""
    return str(getattr(connection, "database", ""))


def _phrases(expression: str) -> list[str]:
    return [found.group(1).replace('""', '"') for found in _PHRASE.finditer(expression)]


def _joiner(expression: str) -> str:
    return " || " if " OR " in _PHRASE.sub("", expression) else " && "


class TsvectorWords:
    """The WordIndex of PostgreSQL: the `words` tsvector column of messages and memory rows,
    with a GIN index; ranked as the module docstring says. Its rows hold no scope token: the
    statement's own conditions narrow a search, as the planner chooses."""

    scoped = False

    def match_messages(
        self,
        connection: Transaction,
        expression: str,
        scope_token: str | None,
        *,
        scored: bool = True,
        counted: Mapping[str, float] | None = None,
    ) -> WordMatch:
        if not scored:
            return _unscored_match("messages", "m", expression)
        return _ranked_match(connection, "messages", "m", expression)

    def match_memories(
        self,
        connection: Transaction,
        expression: str,
        scope_token: str,
        *,
        scored: bool = True,
        counted: Mapping[str, float] | None = None,
    ) -> WordMatch:
        if not scored:
            return _unscored_match("memories", "r", expression)
        return _ranked_match(connection, "memories", "r", expression)

    def best_messages(
        self, connection: Transaction, expression: str, limit: int
    ) -> list[tuple[int, float]]:
        return []  # not scoped: a search always joins its scope

    def counts(
        self, connection: Transaction, table: WordTable, terms: Sequence[str]
    ) -> tuple[float, list[float]]:
        return rows_holding(connection, table, list(terms))


def _unscored_match(table: WordTable, alias: str, expression: str) -> WordMatch:
    """The rows of `table` (under `alias`) holding the expression, unscored: no idf to read."""
    phrases_table, phrases = query_table(expression)
    return WordMatch(
        f"{table} AS {alias}, {phrases_table}", f"{alias}.words @@ {QUERY}", "0", phrases
    )


def _ranked_match(
    connection: Transaction, table: WordTable, alias: str, expression: str
) -> WordMatch:
    """The rows of `table` (under `alias`) holding the expression, with their ranked score."""
    search = ranked(connection, table, expression)
    return WordMatch(
        f"{table} AS {alias}, {search.table}",
        f"{alias}.words @@ {QUERY}",
        search.score(f"{alias}.words"),
        list(search.params),
    )
