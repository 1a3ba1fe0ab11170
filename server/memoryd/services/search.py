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
searched by its words alone (semantic mode: FAILED_PRECONDITION saying so). Hits found by meaning
alone below the model's similarity floor are left out and counted (memoryd.domain.fusion
above_floor): a query about nothing the scope holds finds nothing.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import threading

from memoryd.domain.conversation import ConversationKey, HistoryScope
from memoryd.domain.fusion import (
    FUSION_DEPTH,
    WIDE_FUSION_DEPTH,
    Cues,
    Scores,
    SearchMode,
    fuse_above_floor,
    query_floor,
)
from memoryd.domain.history import SearchHit
from memoryd.domain.memory_queries import Visible
from memoryd.domain.messages import Trust, check_kinds
from memoryd.domain.search_query import plan_search
from memoryd.domain.vectors import Floats
from memoryd.errors import FailedPrecondition, InvalidArgument, PermissionDenied, Unavailable
from memoryd.llm.embeddings import EmbeddingUnavailableError
from memoryd.services.embedding import EmbeddingService
from memoryd.services.semantic import ScopeTooLargeError, VectorCache
from memoryd.services.word_search import (
    WordRanking,
    WordSearch,
    first_found,
    hits_of,
    lexical,
    rank_lexical,
    snippets_filled,
    with_word_snippets,
    word_order,
)
from memoryd.storage import search_reads as reads
from memoryd.storage import vector_store
from memoryd.storage.readers import ReaderPool
from memoryd.storage.transaction import Transaction

DEFAULT_SEARCH_LIMIT = 10
MAX_SEARCH_LIMIT = 100
# Query vectors kept, so that an agent asking the same thing again pays no model call.
QUERY_VECTORS = 1024
EMBEDDINGS_OFF = (
    'semantic search needs embeddings, and they are off (memoryd.search.embeddings = "off")'
)

Meaning = tuple[vector_store.EmbeddingModel, Floats]


class QueryNotEmbeddedError(Exception):
    """The embedding provider could not embed the query: a hybrid search ranks by words alone,
    and counts every message of its scope as unseen by meaning."""


@dataclasses.dataclass(frozen=True, slots=True)
class Found:
    """A search's hits, best first; how many hits of meaning alone its floor left out; and how
    many messages of its scope the meaning could not see yet (no vector so far)."""

    hits: list[SearchHit]
    below_floor: int = 0
    unembedded: int = 0


class QueryVectors:
    """The query side of semantic search: the model's vector of a query, remembered, and the
    similarity below which a hit of meaning alone is not an answer (`floor`, 0: none)."""

    def __init__(self, embedding: EmbeddingService, cache: VectorCache, floor: float) -> None:
        self.embedding = embedding
        self.cache = cache
        self.floor = floor
        self._recent: collections.OrderedDict[tuple[int, str], Floats] = collections.OrderedDict()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """Whether embeddings are on."""
        return self.embedding.enabled

    def unembedded(
        self,
        connection: Transaction,
        mode: SearchMode,
        scope: HistoryScope | Visible,
        *,
        blind: bool = False,
    ) -> int:
        """How many of the scope's messages (or, for a Visible, the rows the caller may see) a
        search in `mode` would compare by meaning and could not (no vector so far; every one
        when `blind`: the query had no vector): 0 for words only, or with embeddings off."""
        if mode is SearchMode.LEXICAL or not self.enabled:
            return 0
        model = None if blind else self.embedding.model
        model_id = None if model is None else model.id
        if isinstance(scope, Visible):
            return vector_store.unembedded_memories(connection, scope, model_id)
        return vector_store.unembedded_messages(connection, scope, model_id)

    def could_mean(self, mode: SearchMode, scope: HistoryScope) -> bool:
        """Whether `mode` may use meaning in `scope` now: embeddings on, vectors exist, and the
        scope not known to be too large for the vector cache (semantic mode is always tried:
        meaning() and the cache refuse it, saying why)."""
        if mode is SearchMode.SEMANTIC:
            return True
        model = self.embedding.model
        return self.enabled and model is not None and not self.cache.known_too_large(model, scope)

    async def meaning(self, query: str, mode: SearchMode) -> Meaning | None:
        """The model and the query's vector when `mode` uses meaning and vectors exist. When
        the provider cannot embed the query: UNAVAILABLE in semantic mode, else
        QueryNotEmbeddedError."""
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
        try:
            found = await self.embedding.query_vector(query)
        except EmbeddingUnavailableError as error:
            if mode is SearchMode.SEMANTIC:
                raise Unavailable(f"the query could not be embedded: {error}") from error
            raise QueryNotEmbeddedError(str(error)) from error
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
        if mode is SearchMode.LEXICAL or not self.vectors.could_mean(mode, scope):

            def words_alone(connection: Transaction) -> Found:
                hits = lexical(connection, scope, plan, kind_filter, limit)
                return Found(hits, unembedded=self.vectors.unembedded(connection, mode, scope))

            found = await self._readers.read(words_alone)
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
                nearest = await nearest_call
            except QueryNotEmbeddedError:
                nearest, blind = None, True
        finally:
            nearest_call.cancel()

        floor = query_floor(query, self.vectors.floor)

        def finish(connection: Transaction) -> Found:
            unembedded = self.vectors.unembedded(connection, mode, scope, blind=blind)
            if nearest is None:  # no meaning to compare: the words alone
                found = fused(connection, scope, words, [], kinds=kind_filter, limit=limit)
            elif mode is SearchMode.SEMANTIC:
                found = semantic_only(connection, scope, nearest, kind_filter, limit, floor=floor)
                return dataclasses.replace(found, unembedded=unembedded)
            else:
                found = fused(
                    connection,
                    scope,
                    words,
                    nearest,
                    kinds=kind_filter,
                    limit=limit,
                    floor=floor,
                    cues=Cues.of(query),
                )
            hits = with_word_snippets(connection, found.hits, plan)
            return dataclasses.replace(found, hits=hits, unembedded=unembedded)

        if nearest is None and mode is SearchMode.SEMANTIC:
            return Found(
                [],
                unembedded=await self._readers.read(
                    lambda connection: self.vectors.unembedded(connection, mode, scope)
                ),
            )
        found = await self._readers.read(finish)
        return dataclasses.replace(found, hits=snippets_filled(found.hits, plan))

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

        def run(connection: Transaction) -> list[tuple[int, float]] | None:
            try:
                return self.vectors.cache.nearest(connection, model, scope, vector, depth)
            except ScopeTooLargeError as error:
                if mode is SearchMode.SEMANTIC:
                    raise FailedPrecondition(str(error)) from error
                return None

        return await self._readers.read(run)


def fused(
    connection: Transaction,
    scope: HistoryScope,
    words: WordRanking,
    nearest: list[tuple[int, float]],
    *,
    kinds: tuple[str, ...],
    limit: int,
    floor: float = 0.0,
    cues: Cues | None = None,
) -> Found:
    """Both rankings, the query's cues and the conversation context as one ranking
    (memoryd.domain.fusion), above the similarity floor; the words alone, ranked as lexical()
    ranks them, when `nearest` is empty."""
    semantic = nearest
    if kinds and nearest:  # the vectors know no kinds: keep the nearest of the asked kinds only
        wanted = reads.messages_by_ids(connection, scope, [item for item, _ in nearest], kinds)
        semantic = [entry for entry in nearest if entry[0] in wanted]
    if not semantic:
        return Found(hits_of(connection, scope, words, word_order(words), kinds=kinds, limit=limit))
    context = dict(words.neighbours)
    context.update(
        reads.neighbours(connection, [item for item, _ in semantic if item not in context])
    )
    ranked = sorted({item for item, _ in words.ranked} | {item for item, _ in semantic})
    farther = reads.neighbours(connection, ranked, distance=2)
    said = reads.said(connection, ranked, kinds)
    ranking, cut = fuse_above_floor(
        words.ranked,
        semantic,
        context,
        floor=floor,
        # A neighbour may be of another kind than asked for: keep a few spare.
        keep=3 * limit,
        farther=farther,
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
    kinds: tuple[str, ...],
    limit: int,
    *,
    floor: float = 0.0,
) -> Found:
    """The nearest messages of the scope and kinds, by similarity, down to the floor."""
    close = [(item, similarity) for item, similarity in nearest if similarity >= floor]
    found = first_found(connection, scope, [item for item, _ in close], kinds, limit, known={})
    hits: list[SearchHit] = []
    for place, (item, similarity) in enumerate(close, start=1):
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
    return Found(hits, len(nearest) - len(close))
