"""SearchHistory: messages found by their words, by their meaning, or both fused.

Lexical: messages holding every word of the query, then any of them (each ranked by bm25, the
sender counting too), then substring matches newest first. Semantic: the scope's nearest vectors
of the configured model. Hybrid (the default whenever vectors exist) reads both rankings to
FUSION_DEPTH at least and fuses them (memoryd.domain.fusion); a message without a vector yet is
still found by its words. A scope whose vectors do not fit in memory.search.vector_cache_mb is
searched by its words alone (semantic mode: FAILED_PRECONDITION saying so).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import threading

import apsw

from memoryd.domain.conversation import ConversationKey, HistoryScope
from memoryd.domain.fusion import FUSION_DEPTH, Scores, SearchMode, fuse
from memoryd.domain.history import SearchHit
from memoryd.domain.messages import StoredMessage, Trust, check_kinds
from memoryd.domain.search_query import SearchPlan, plan_search
from memoryd.domain.snippets import substring_snippet
from memoryd.domain.vectors import Floats
from memoryd.errors import FailedPrecondition, InvalidArgument, PermissionDenied
from memoryd.services.embedding import EmbeddingService
from memoryd.services.semantic import ScopeTooLargeError, VectorCache
from memoryd.storage import history_reads as reads
from memoryd.storage import vector_store
from memoryd.storage.readers import ReaderPool

DEFAULT_SEARCH_LIMIT = 10
MAX_SEARCH_LIMIT = 100
# Query vectors kept, so that an agent asking the same thing again pays no model call.
QUERY_VECTORS = 1024
EMBEDDINGS_OFF = (
    'semantic search needs embeddings, and they are off (memoryd.search.embeddings = "off")'
)

Meaning = tuple[vector_store.EmbeddingModel, Floats]


class QueryVectors:
    """The query side of semantic search: the model's vector of a query, remembered."""

    def __init__(self, embedding: EmbeddingService, cache: VectorCache) -> None:
        self.embedding = embedding
        self.cache = cache
        self._recent: collections.OrderedDict[tuple[int, str], Floats] = collections.OrderedDict()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """Whether embeddings are on."""
        return self.embedding.enabled

    def could_mean(self, mode: SearchMode, scope: HistoryScope) -> bool:
        """Whether `mode` may use meaning in `scope` now: embeddings on, vectors exist, and the
        scope not known to be too large for the vector cache (semantic mode is always tried:
        meaning() and the cache refuse it, saying why)."""
        if mode is SearchMode.SEMANTIC:
            return True
        model = self.embedding.model
        return self.enabled and model is not None and not self.cache.known_too_large(model, scope)

    async def meaning(self, query: str, mode: SearchMode) -> Meaning | None:
        """The model and the query's vector when `mode` uses meaning and vectors exist."""
        if mode is SearchMode.LEXICAL:
            return None
        if not self.enabled:
            if mode is SearchMode.SEMANTIC:
                raise FailedPrecondition(EMBEDDINGS_OFF)
            return None
        model = self.embedding.model
        if model is None:
            return None
        key = (model.id, query)
        with self._lock:
            cached = self._recent.get(key)
            if cached is not None:
                self._recent.move_to_end(key)
                return model, cached
        found = await self.embedding.query_vector(query)
        if found is None:
            return None
        with self._lock:
            self._recent[key] = found[1]
            while len(self._recent) > QUERY_VECTORS:
                self._recent.popitem(last=False)
        return found


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
    ) -> list[SearchHit]:
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
            return []
        if mode is SearchMode.LEXICAL or not self.vectors.could_mean(mode, scope):
            hits = await self._readers.read(
                lambda connection: lexical(connection, scope, plan, kind_filter, limit)
            )
            return _snippets_filled(hits, plan)
        depth = max(limit, FUSION_DEPTH)
        # The query's vector and then its nearest vectors on one side; a reader finds the
        # words beside them (two cores).
        nearest_call = asyncio.ensure_future(
            self._nearest(scope, query, mode, depth * (2 if kind_filter else 1))
        )
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
            nearest = await nearest_call
        finally:
            nearest_call.cancel()

        def finish(connection: apsw.Connection) -> list[SearchHit]:
            if nearest is None:  # no meaning to compare: the words alone
                hits = fused(connection, scope, words, [], kinds=kind_filter, limit=limit)
            elif mode is SearchMode.SEMANTIC:
                return semantic_only(connection, scope, nearest, kind_filter, limit)
            else:
                hits = fused(connection, scope, words, nearest, kinds=kind_filter, limit=limit)
            return _with_word_snippets(connection, hits, plan)

        if nearest is None and mode is SearchMode.SEMANTIC:
            return []
        return _snippets_filled(await self._readers.read(finish), plan)

    async def _nearest(
        self, scope: HistoryScope, query: str, mode: SearchMode, depth: int
    ) -> list[tuple[int, float]] | None:
        """(message id, similarity) of the scope's `depth` nearest to the query; None when
        there is no meaning to compare (no vector of the model yet, or a scope too large for
        the cache in hybrid mode)."""
        meaning = await self.vectors.meaning(query, mode)
        if meaning is None:
            return None
        model, vector = meaning

        def run(connection: apsw.Connection) -> list[tuple[int, float]] | None:
            try:
                return self.vectors.cache.nearest(connection, model, scope, vector, depth)
            except ScopeTooLargeError as error:
                if mode is SearchMode.SEMANTIC:
                    raise FailedPrecondition(str(error)) from error
                return None

        return await self._readers.read(run)


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
    def prepare(
        cls, connection: apsw.Connection, scope: HistoryScope, plan: SearchPlan
    ) -> WordSearch:
        """The way to search `plan` in `scope`."""
        small = reads.scope_is_small(connection, scope)
        highlighted = plan.any_word_expression or plan.word_expression
        if not small and plan.any_word_expression is not None:
            plan = plan.without_common(reads.common_phrases(connection, plan.phrases))
        widest = plan.any_word_expression or plan.word_expression
        if widest is None or small:
            return cls(plan, highlighted, small, narrow=small, index_first=False)
        matches = reads.word_matches(connection, widest)
        return cls(
            plan,
            highlighted,
            small,
            narrow=matches > reads.RARE_WORDS,
            index_first=matches > reads.INDEX_FIRST,
        )


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
    connection: apsw.Connection,
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


def fused(
    connection: apsw.Connection,
    scope: HistoryScope,
    words: WordRanking,
    nearest: list[tuple[int, float]],
    *,
    kinds: tuple[str, ...],
    limit: int,
) -> list[SearchHit]:
    """Both rankings and the conversation context as one ranking (memoryd.domain.fusion);
    the words alone, ranked as lexical() ranks them, when `nearest` is empty."""
    semantic = nearest
    if kinds and nearest:  # the vectors know no kinds: keep the nearest of the asked kinds only
        wanted = reads.messages_by_ids(connection, scope, [item for item, _ in nearest], kinds)
        semantic = [entry for entry in nearest if entry[0] in wanted]
    if semantic:
        context = dict(words.neighbours)
        context.update(
            reads.neighbours(connection, [item for item, _ in semantic if item not in context])
        )
        # A neighbour may be of another kind than asked for: keep a few spare.
        ranking = fuse(words.ranked, semantic, context, keep=3 * limit)
    else:
        ranking = [
            (item, Scores(bm25=bm25, lexical_rank=place))
            for place, (item, bm25) in enumerate(words.ranked, start=1)
        ]
    loaded = _first_found(
        connection, scope, [item for item, _ in ranking], kinds, limit, known=words.substrings
    )
    lexical_ids = {item for item, _ in words.ranked}
    hits: list[SearchHit] = []
    for item, scores in ranking:
        message = loaded.get(item)
        if message is None:  # of another kind, or erased since the ranking was read
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


def semantic_only(
    connection: apsw.Connection,
    scope: HistoryScope,
    nearest: list[tuple[int, float]],
    kinds: tuple[str, ...],
    limit: int,
) -> list[SearchHit]:
    """The nearest messages of the scope and kinds, by similarity."""
    found = _first_found(connection, scope, [item for item, _ in nearest], kinds, limit, known={})
    hits: list[SearchHit] = []
    for place, (item, similarity) in enumerate(nearest, start=1):
        message = found.get(item)
        if message is None:
            continue
        scores = Scores(similarity=similarity, fused=similarity, semantic_rank=place)
        hits.append(
            SearchHit(
                message, None, 0.0, word_match=False, lexical=False, semantic=True, scores=scores
            )
        )
        if len(hits) == limit:
            break
    return hits


def _first_found(
    connection: apsw.Connection,
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


def _with_word_snippets(
    connection: apsw.Connection, hits: list[SearchHit], plan: SearchPlan
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


def _snippets_filled(hits: list[SearchHit], plan: SearchPlan) -> list[SearchHit]:
    """Hits without a snippet get one around the query's words (or the content's start)."""
    return [
        hit
        if hit.snippet is not None
        else dataclasses.replace(hit, snippet=substring_snippet(hit.message.content, plan.words))
        for hit in hits
    ]


def lexical(
    connection: apsw.Connection,
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
        return fused(connection, scope, words, [], kinds=kinds, limit=limit)
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
