"""SearchHistory: messages found by their words, by their meaning, or both fused.

Lexical: messages holding every word of the query, then any of them (each ranked by bm25, the
sender counting too), then substring matches newest first (memoryd.services.word_search).
Semantic: the scope's nearest vectors
of the configured model. Hybrid (the default whenever vectors exist) reads both rankings to
FUSION_DEPTH at least (WIDE_FUSION_DEPTH across conversations) and fuses them with the query's
cues, read from each ranked message's sender, time and text (memoryd.domain.fusion); a message
without a vector yet is still found by its words, and every answer counts those (`unembedded`).
A query the embedding provider cannot embed is searched by its words (semantic mode:
UNAVAILABLE). A scope whose vectors do not fit in memory.search.vector_cache_mb is
searched by its words alone (semantic mode: FAILED_PRECONDITION saying so). Every hit, found by
a word, part of a word or meaning, is held to the relevance floor (memoryd.domain.relevance);
those below it, and not next to a message that reached it, are left out and counted: a query
about nothing the scope holds finds nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable

from memoryd.domain.conversation import ConversationKey, HistoryScope
from memoryd.domain.fusion import (
    FUSION_DEPTH,
    WIDE_FUSION_DEPTH,
    Cues,
    Scores,
    SearchMode,
    above_floor,
    fuse_above_floor,
)
from memoryd.domain.history import SearchHit
from memoryd.domain.messages import Trust, check_kinds
from memoryd.domain.relevance import Evidence, QueryTerms
from memoryd.domain.search_query import SearchPlan, plan_search
from memoryd.errors import FailedPrecondition, InvalidArgument, PermissionDenied
from memoryd.services.evidence import Judge, TermCounts, query_terms
from memoryd.services.query_vectors import (
    EMBEDDINGS_OFF,
    Meaning,
    QueryNotEmbeddedError,
    QueryVectors,
)
from memoryd.services.semantic import ScopeTooLargeError
from memoryd.services.word_search import (
    WordRanking,
    WordSearch,
    first_found,
    hits_of,
    lexical,
    rank_lexical,
    snippets_filled,
    word_order,
)
from memoryd.storage import hit_reads
from memoryd.storage import search_reads as reads
from memoryd.storage.readers import ReaderPool
from memoryd.storage.transaction import Transaction

DEFAULT_SEARCH_LIMIT = 10
MAX_SEARCH_LIMIT = 100


@dataclasses.dataclass(frozen=True, slots=True)
class Found:
    """A search's hits, best first; how many hits of meaning alone its floor left out; and how
    many messages of its scope the meaning could not see yet (no vector so far)."""

    hits: list[SearchHit]
    below_floor: int = 0
    unembedded: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class _Asked:
    """One search as asked, checked: its scope, query and plan, mode, kinds and limit."""

    scope: HistoryScope
    query: str
    plan: SearchPlan
    mode: SearchMode
    kinds: tuple[str, ...]
    limit: int


class HistorySearch:
    """SearchHistory over the readers and the vectors."""

    def __init__(self, readers: ReaderPool, vectors: QueryVectors) -> None:
        self._readers = readers
        self.vectors = vectors

    async def search(
        self,
        scope: HistoryScope,
        query: str,
        *,
        kinds: list[str],
        requested_limit: int,
        trust: Trust = Trust.OPERATOR,
        mode: SearchMode = SearchMode.DEFAULT,
    ) -> Found:
        """The best `requested_limit` hits (see the module docstring). A guest searches one
        conversation only."""
        if trust is Trust.GUEST and not isinstance(scope, ConversationKey):
            raise PermissionDenied(
                "a guest searches one conversation only: an owner's or an agent's history "
                "holds conversations a guest was never part of"
            )
        if requested_limit < 0:
            raise InvalidArgument(f"limit must not be negative, got {requested_limit}")
        if requested_limit > MAX_SEARCH_LIMIT:
            raise InvalidArgument(f"limit is {requested_limit}; the limit is {MAX_SEARCH_LIMIT}")
        limit = requested_limit or DEFAULT_SEARCH_LIMIT
        kind_filter = check_kinds(kinds, "kinds")
        plan = plan_search(query)
        if plan.is_empty:
            if mode is SearchMode.SEMANTIC and not self.vectors.enabled:
                raise FailedPrecondition(EMBEDDINGS_OFF)
            return Found([])
        asked = _Asked(scope, query, plan, mode, kind_filter, limit)
        if mode is SearchMode.LEXICAL or not self.vectors.could_mean(mode, scope):
            found = await self._readers.read(
                lambda connection: self._words_alone(asked, connection)
            )
            return dataclasses.replace(found, hits=snippets_filled(found.hits, plan))
        wide = not isinstance(scope, ConversationKey)
        depth = max(limit, WIDE_FUSION_DEPTH if wide else FUSION_DEPTH)
        # The query's vector and then its nearest vectors on one side; a reader finds the
        # words beside them (two cores).
        nearest_call = asyncio.ensure_future(
            self._nearest(scope, query, mode, depth * (2 if kind_filter else 1))
        )
        blind = False
        try:
            words = WordRanking()
            if mode is not SearchMode.SEMANTIC:
                words = await self._readers.read(
                    lambda connection: rank_lexical(
                        connection,
                        scope,
                        WordSearch.prepare(connection, scope, plan),
                        kind_filter,
                        depth,
                        limit=limit,
                    )
                )
            try:
                near = await nearest_call
            except QueryNotEmbeddedError:
                near, blind = None, True
        finally:
            nearest_call.cancel()
        if near is None and mode is SearchMode.SEMANTIC:
            return Found(
                [],
                unembedded=await self._readers.read(
                    lambda connection: self.vectors.unembedded(connection, mode, scope)
                ),
            )
        found = await self._readers.read(
            lambda connection: self._finish(asked, words, near, connection, blind=blind)
        )
        return dataclasses.replace(found, hits=snippets_filled(found.hits, plan))

    def _words_alone(self, asked: _Asked, connection: Transaction) -> Found:
        """The words' hits (lexical mode, or no meaning to compare), held to the floor."""
        way = WordSearch.prepare(connection, asked.scope, asked.plan)
        terms = message_terms(connection, asked.scope, asked.plan, way.counted)
        hits, cut = held_to_floor(
            lexical(connection, asked.scope, way, asked.kinds, asked.limit),
            self.vectors.judge(terms, None),
        )
        unembedded = self.vectors.unembedded(connection, asked.mode, asked.scope)
        return Found(hits, cut, unembedded)

    def _finish(
        self,
        asked: _Asked,
        words: WordRanking,
        near: tuple[Meaning, list[tuple[int, float]]] | None,
        connection: Transaction,
        *,
        blind: bool,
    ) -> Found:
        """The rankings read, fused (or the meaning's alone in semantic mode), held to the
        floor, with their snippets."""
        scope, mode = asked.scope, asked.mode
        unembedded = self.vectors.unembedded(connection, mode, scope, blind=blind)
        terms = message_terms(connection, scope, asked.plan, words.counted)
        if near is None:  # no meaning to compare: the words alone
            judge = self.vectors.judge(terms, None)
            found = fused(connection, scope, words, [], judge, kinds=asked.kinds, limit=asked.limit)
        else:
            (model, vector), nearest = near
            ranked = {item for item, _ in words.ranked} | {item for item, _ in nearest}
            judge = self.vectors.judge(
                terms, self.vectors.cache.similarities(connection, model, scope, vector, ranked)
            )
            if mode is SearchMode.SEMANTIC:
                found = semantic_only(
                    connection, scope, nearest, judge, kinds=asked.kinds, limit=asked.limit
                )
                return dataclasses.replace(found, unembedded=unembedded)
            found = fused(
                connection,
                scope,
                words,
                nearest,
                judge,
                kinds=asked.kinds,
                limit=asked.limit,
                cues=Cues.of(asked.query),
                nearness=lambda ids: self.vectors.cache.similarities(
                    connection, model, scope, vector, ids
                ),
            )
        return dataclasses.replace(found, unembedded=unembedded)

    async def _nearest(
        self, scope: HistoryScope, query: str, mode: SearchMode, depth: int
    ) -> tuple[Meaning, list[tuple[int, float]]] | None:
        """The query's meaning and (message id, similarity) of the scope's `depth` nearest to
        it; None when there is no meaning to compare (no vector of the model yet, or a scope
        too large for the cache in hybrid mode)."""
        meaning = await self.vectors.meaning(query, mode)
        if meaning is None:
            return None
        model, vector = meaning

        def run(connection: Transaction) -> tuple[Meaning, list[tuple[int, float]]] | None:
            try:
                return meaning, self.vectors.cache.nearest(connection, model, scope, vector, depth)
            except ScopeTooLargeError as error:
                if mode is SearchMode.SEMANTIC:
                    raise FailedPrecondition(str(error)) from error
                return None

        return await self._readers.read(run)


def message_terms(
    connection: Transaction,
    scope: HistoryScope,
    plan: SearchPlan,
    counted: TermCounts | None = None,
) -> QueryTerms:
    """The query's terms, weighed in the messages' word index (`counted` when read already),
    and which of them the scope holds."""
    return query_terms(
        connection,
        "messages",
        plan,
        lambda phrases: reads.held_in_scope(connection, scope, phrases),
        counted,
    )


def held_to_floor(hits: list[SearchHit], judge: Judge) -> tuple[list[SearchHit], int]:
    """The hits (in order) whose relevance reaches the floor, with it in their scores; and how
    many were left out."""
    by_id = {hit.message.id: hit for hit in hits}
    ranking = [(hit.message.id, hit.scores) for hit in hits]
    kept, cut = above_floor(
        ranking,
        lambda item: judge.judge(
            item,
            by_id[item].message.content,
            speaker=by_id[item].message.sender,
            at=by_id[item].message.created_at,
        ),
        judge.floor,
    )
    return [dataclasses.replace(by_id[item], scores=scores) for item, scores in kept], cut


def fused(
    connection: Transaction,
    scope: HistoryScope,
    words: WordRanking,
    nearest: list[tuple[int, float]],
    judge: Judge,
    *,
    kinds: tuple[str, ...],
    limit: int,
    cues: Cues | None = None,
    nearness: Callable[[list[int]], dict[int, float]] | None = None,
) -> Found:
    """Both rankings, the query's cues and the conversation context as one ranking
    (memoryd.domain.fusion), held to the relevance floor; the words alone, ranked as lexical()
    ranks them, when `nearest` is empty."""
    semantic = nearest
    if kinds and nearest:  # the vectors know no kinds: keep the nearest of the asked kinds only
        wanted = hit_reads.messages_by_ids(connection, scope, [item for item, _ in nearest], kinds)
        semantic = [entry for entry in nearest if entry[0] in wanted]
    if not semantic:
        hits = hits_of(connection, scope, words, word_order(words), kinds=kinds, limit=3 * limit)
        kept, cut = held_to_floor(hits, judge)
        return Found(kept[:limit], cut)
    context = dict(words.neighbours)
    context.update(
        hit_reads.neighbours(connection, [item for item, _ in semantic if item not in context])
    )
    ranked = sorted({item for item, _ in words.ranked} | {item for item, _ in semantic})
    said = hit_reads.said(connection, ranked)
    around = sorted(
        {near for item in ranked for near in context.get(item, ()) if near is not None}
        - set(ranked)
    )
    if nearness is not None and judge.similarities is not None and around:
        judge.similarities.update(nearness(around))  # neighbours are judged by meaning too

    def evidence(item: int) -> Evidence:
        found = said.get(item)
        if found is None:  # a neighbour, read when the floor or the answer needs it
            found = hit_reads.said(connection, [item]).get(item)
            if found is None:  # erased since it was ranked: nothing to hold
                return judge.judge(item, "")
            said[item] = found
        return judge.judge(item, found.content, speaker=found.sender, at=found.at)

    ranking, cut = fuse_above_floor(
        words.ranked,
        semantic,
        context,
        evidence=evidence,
        floor=judge.floor,
        # A neighbour may be of another kind than asked for: keep a few spare.
        keep=3 * limit,
        cues=cues,
        said=said,
        across_conversations=not isinstance(scope, ConversationKey),
    )
    hits = hits_of(connection, scope, words, ranking, kinds=kinds, limit=limit)
    return Found(hits, cut)


def semantic_only(
    connection: Transaction,
    scope: HistoryScope,
    nearest: list[tuple[int, float]],
    judge: Judge,
    *,
    kinds: tuple[str, ...],
    limit: int,
) -> Found:
    """The nearest messages of the scope and kinds, by similarity, held to the floor."""
    found = first_found(
        connection, scope, [item for item, _ in nearest], kinds, 3 * limit, known={}
    )
    hits: list[SearchHit] = []
    cut = 0
    for place, (item, similarity) in enumerate(nearest, start=1):
        message = found.get(item)
        if message is None:
            continue
        evidence = judge.judge(item, message.content, speaker=message.sender, at=message.created_at)
        if not evidence.passes(judge.floor):
            cut += 1
            continue
        scores = Scores(
            similarity=similarity,
            fused=similarity,
            semantic_rank=place,
            relevance=evidence.relevance,
            coverage=evidence.coverage,
        )
        hits.append(
            SearchHit(
                message, None, 0.0, word_match=False, lexical=False, semantic=True, scores=scores
            )
        )
        if len(hits) == limit:
            break
    return Found(hits, cut)
