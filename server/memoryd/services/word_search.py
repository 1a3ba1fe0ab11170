"""The words' side of SearchHistory: how a query's words are read in a scope, the lexical
ranking (every word, then any word, each by bm25; then substrings newest first), and the hits of
a ranking with their messages and snippets. services.search fuses this ranking with the meaning.
"""

from __future__ import annotations

import dataclasses

from memoryd.domain.conversation import HistoryScope
from memoryd.domain.fusion import Scores
from memoryd.domain.history import SearchHit
from memoryd.domain.messages import StoredMessage
from memoryd.domain.search_query import SearchPlan
from memoryd.domain.snippets import substring_snippet
from memoryd.storage import search_reads as reads
from memoryd.storage.transaction import Transaction


@dataclasses.dataclass(frozen=True, slots=True)
class WordSearch:
    """How one query's words are read in one scope (reads.rank_words, reads.search_words):

    - in a large scope, words in very many messages leave the any-word stage when rarer ones
      remain (SearchPlan.without_common);
    - `narrow`: the word index itself is narrowed by the scope's token: cheap for a scope of
      a few thousand messages, and for words in very many messages (more than RARE_WORDS);
      otherwise only the join narrows (intersecting a 100,000-message scope's token costs
      10 ms);
    - `index_first`: a large scope's words in more than INDEX_FIRST messages are ranked in
      the index alone first, at half the cost of joining every match."""

    plan: SearchPlan
    # What snippets mark: every word of the query, rare or not.
    highlighted: str | None
    small: bool
    narrow: bool
    index_first: bool

    @classmethod
    def prepare(cls, connection: Transaction, scope: HistoryScope, plan: SearchPlan) -> WordSearch:
        """The way to search `plan` in `scope`."""
        small = reads.scope_is_small(connection, scope)
        highlighted = plan.any_word_expression or plan.word_expression
        if not small and plan.any_word_expression is not None:
            plan = plan.without_common(reads.common_phrases(connection, plan.phrases))
        widest = plan.any_word_expression or plan.word_expression
        if widest is None or small:
            return cls(plan, highlighted, small, narrow=small, index_first=False)
        narrow, index_first = reads.large_scope_reads(connection, widest)
        return cls(plan, highlighted, small, narrow=narrow, index_first=index_first)


@dataclasses.dataclass(frozen=True, slots=True)
class WordRanking:
    """The words' side of a fused search: (message id, bm25) best first, bm25 0 for a
    substring match; the messages of the substring matches only (word matches are read once
    fused). Read beside the query's embedding, so that fusing waits for less: the ranked
    messages' neighbours, and the snippets of the first word matches."""

    ranked: list[tuple[int, float]] = dataclasses.field(default_factory=list)
    substrings: dict[int, StoredMessage] = dataclasses.field(default_factory=dict)
    neighbours: dict[int, tuple[int | None, int | None]] = dataclasses.field(default_factory=dict)
    snippets: dict[int, str] = dataclasses.field(default_factory=dict)


def rank_lexical(
    connection: Transaction,
    scope: HistoryScope,
    way: WordSearch,
    kinds: tuple[str, ...],
    depth: int,
    *,
    limit: int,
    neighbours: bool = True,
) -> WordRanking:
    """lexical()'s ranking, `depth` deep, without reading the word matches' messages; the
    substring matches (a scan of a large scope) and the snippets only up to `limit`; the
    neighbours of every ranked message when asked."""
    plan = way.plan
    ranked: list[tuple[int, float]] = []
    if plan.word_expression is not None:
        ranked = reads.rank_words(
            connection,
            scope,
            plan.word_expression,
            kinds,
            depth,
            narrow=way.narrow,
            index_first=way.index_first,
        )
    if plan.any_word_expression is not None and len(ranked) < depth:
        ranked += reads.rank_words(
            connection,
            scope,
            plan.any_word_expression,
            kinds,
            depth - len(ranked),
            exclude_ids=[item for item, _ in ranked],
            narrow=way.narrow,
            index_first=way.index_first,
        )
    snippets = (
        reads.word_snippets(connection, way.highlighted, [item for item, _ in ranked[:limit]])
        if way.highlighted is not None and ranked
        else {}
    )
    substrings: dict[int, StoredMessage] = {}
    if len(ranked) < min(depth, limit):
        found = reads.search_substrings(
            connection,
            scope,
            plan,
            kinds,
            exclude_ids=[item for item, _ in ranked],
            limit=min(depth, limit) - len(ranked),
            small=way.small,
        )
        substrings = {hit.message.id: hit.message for hit in found}
        ranked += [(item, 0.0) for item in substrings]
    context = reads.neighbours(connection, [item for item, _ in ranked]) if neighbours else {}
    return WordRanking(ranked, substrings, context, snippets)


def word_order(words: WordRanking) -> list[tuple[int, Scores]]:
    """The words' ranking as lexical() ranks it: every word, any word, substrings."""
    return [
        (item, Scores(bm25=bm25, lexical_rank=place))
        for place, (item, bm25) in enumerate(words.ranked, start=1)
    ]


def hits_of(
    connection: Transaction,
    scope: HistoryScope,
    words: WordRanking,
    ranking: list[tuple[int, Scores]],
    *,
    kinds: tuple[str, ...],
    limit: int,
) -> list[SearchHit]:
    """The first `limit` hits of a ranking (fused or the words'), their messages read now:
    a ranked message of another kind, or erased since the ranking was read, is passed over."""
    loaded = first_found(
        connection, scope, [item for item, _ in ranking], kinds, limit, known=words.substrings
    )
    lexical_ids = {item for item, _ in words.ranked}
    hits: list[SearchHit] = []
    for item, scores in ranking:
        message = loaded.get(item)
        if message is None:
            continue
        word_match = item in lexical_ids and item not in words.substrings
        hits.append(
            SearchHit(
                message,
                words.snippets.get(item) if word_match else None,
                scores.bm25,
                word_match=word_match,
                lexical=item in lexical_ids,
                semantic=scores.semantic_rank > 0,
                scores=scores,
            )
        )
        if len(hits) == limit:
            break
    return hits


def first_found(
    connection: Transaction,
    scope: HistoryScope,
    ids: list[int],
    kinds: tuple[str, ...],
    limit: int,
    *,
    known: dict[int, StoredMessage],
) -> dict[int, StoredMessage]:
    """The messages of the first `limit` of `ids` that are in the scope and kinds (and in
    `known`, which is not read again), read `limit` at a time: most ranked ids are never
    shown."""
    found = dict(known)
    usable = 0
    for start in range(0, len(ids), limit):
        chunk = ids[start : start + limit]
        found.update(
            reads.messages_by_ids(connection, scope, [i for i in chunk if i not in found], kinds)
        )
        usable += sum(1 for item in chunk if item in found)
        if usable >= limit:
            break
    return found


def with_word_snippets(
    connection: Transaction, hits: list[SearchHit], plan: SearchPlan
) -> list[SearchHit]:
    """FTS5's snippets for the word matches among the final hits that have none yet (made for
    these few only)."""
    expression = plan.any_word_expression or plan.word_expression
    wanted = [
        hit.message.id for hit in hits if hit.lexical and hit.word_match and hit.snippet is None
    ]
    if expression is None or not wanted:
        return hits
    found = reads.word_snippets(connection, expression, wanted)
    return [
        dataclasses.replace(hit, snippet=found[hit.message.id]) if hit.message.id in found else hit
        for hit in hits
    ]


def snippets_filled(hits: list[SearchHit], plan: SearchPlan) -> list[SearchHit]:
    """Hits without a snippet get one around the query's words (or the content's start)."""
    return [
        hit
        if hit.snippet is not None
        else dataclasses.replace(hit, snippet=substring_snippet(hit.message.content, plan.words))
        for hit in hits
    ]


def lexical(
    connection: Transaction,
    scope: HistoryScope,
    plan: SearchPlan,
    kinds: tuple[str, ...],
    limit: int,
) -> list[SearchHit]:
    """Every word, then any word (each by bm25), then substrings newest first. Words in very
    many messages of a large scope are ranked first and only the hits read (rank_lexical);
    otherwise one query a stage reads the hits with their snippets."""
    way = WordSearch.prepare(connection, scope, plan)
    if way.narrow and not way.small:
        words = rank_lexical(connection, scope, way, kinds, limit, limit=limit, neighbours=False)
        return hits_of(connection, scope, words, word_order(words), kinds=kinds, limit=limit)
    plan, narrow = way.plan, way.narrow
    hits: list[SearchHit] = []
    if plan.word_expression is not None:
        hits = reads.search_words(
            connection, scope, plan.word_expression, kinds, limit, narrow=narrow
        )
    if plan.any_word_expression is not None and len(hits) < limit:
        hits += reads.search_words(
            connection,
            scope,
            plan.any_word_expression,
            kinds,
            limit - len(hits),
            exclude_ids=[hit.message.id for hit in hits],
            narrow=narrow,
        )
    if len(hits) < limit:
        hits += reads.search_substrings(
            connection,
            scope,
            plan,
            kinds,
            exclude_ids=[hit.message.id for hit in hits],
            limit=limit - len(hits),
            small=way.small,
        )
    for place, hit in enumerate(hits, start=1):
        hits[place - 1] = dataclasses.replace(hit, scores=Scores(bm25=hit.rank, lexical_rank=place))
    return hits
