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
from memoryd.domain.messages import Trust, check_kinds
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

    def could_mean(self, mode: SearchMode) -> bool:
        """Whether `mode` may use meaning now: embeddings on and vectors exist (semantic mode
        with embeddings off is refused, by meaning())."""
        if mode is SearchMode.SEMANTIC:
            return True
        return self.enabled and self.embedding.model is not None

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
        if mode is SearchMode.LEXICAL or not self.vectors.could_mean(mode):
            hits = await self._readers.read(
                lambda connection: lexical(connection, scope, plan, kind_filter, limit)
            )
            return _snippets_filled(hits, plan)
        depth = max(limit, FUSION_DEPTH)
        # The query's vector is computed while a reader finds the words (two cores).
        meaning_call = asyncio.ensure_future(self.vectors.meaning(query, mode))
        try:
            words: list[SearchHit] = []
            if mode is not SearchMode.SEMANTIC:
                words = await self._readers.read(
                    lambda connection: lexical(
                        connection,
                        scope,
                        plan,
                        kind_filter,
                        depth,
                        snippets=False,
                        substrings_to=limit,
                    )
                )
            meaning = await meaning_call
        finally:
            meaning_call.cancel()
        if meaning is None:  # no vector of the model yet: the words alone
            if mode is SearchMode.SEMANTIC:
                return []
            hits = await self._readers.read(
                lambda connection: _with_word_snippets(connection, words[:limit], plan)
            )
            return _snippets_filled(hits, plan)

        model, vector = meaning

        def run(connection: apsw.Connection) -> list[SearchHit]:
            try:
                nearest = self.vectors.cache.nearest(
                    connection, model, scope, vector, depth * (2 if kind_filter else 1)
                )
            except ScopeTooLargeError as error:
                if mode is SearchMode.SEMANTIC:
                    raise FailedPrecondition(str(error)) from error
                return _with_word_snippets(connection, words[:limit], plan)
            if mode is SearchMode.SEMANTIC:
                return semantic_only(connection, scope, nearest, kind_filter, limit)
            hits = fused(connection, scope, words, nearest, kinds=kind_filter, limit=limit)
            return _with_word_snippets(connection, hits, plan)

        return _snippets_filled(await self._readers.read(run), plan)


def _with_word_snippets(
    connection: apsw.Connection, hits: list[SearchHit], plan: SearchPlan
) -> list[SearchHit]:
    """FTS5's snippets for the word matches among the final hits (made for these few only)."""
    expression = plan.any_word_expression or plan.word_expression
    wanted = [hit.message.id for hit in hits if hit.lexical and hit.word_match]
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
    *,
    snippets: bool = True,
    substrings_to: int | None = None,
) -> list[SearchHit]:
    """Every word, then any word (each by bm25), then substrings newest first, up to
    `substrings_to` hits when given (a scan of a large scope; the meaning fills hybrid hits).
    Without `snippets`, word matches come without one (fusion keeps few of them)."""
    hits: list[SearchHit] = []
    small = reads.scope_is_small(connection, scope)
    widest = plan.any_word_expression or plan.word_expression
    narrow = widest is not None and reads.narrow_by_token(connection, widest, small=small)
    if plan.word_expression is not None:
        hits = reads.search_words(
            connection, scope, plan.word_expression, kinds, limit, snippets=snippets, narrow=narrow
        )
    if plan.any_word_expression is not None and len(hits) < limit:
        hits += reads.search_words(
            connection,
            scope,
            plan.any_word_expression,
            kinds,
            limit - len(hits),
            exclude_ids=[hit.message.id for hit in hits],
            snippets=snippets,
            narrow=narrow,
        )
    fill = limit if substrings_to is None else min(limit, substrings_to)
    if len(hits) < fill:
        hits += reads.search_substrings(
            connection,
            scope,
            plan,
            kinds,
            exclude_ids=[hit.message.id for hit in hits],
            limit=fill - len(hits),
            small=small,
        )
    for place, hit in enumerate(hits, start=1):
        hits[place - 1] = dataclasses.replace(hit, scores=Scores(bm25=hit.rank, lexical_rank=place))
    return hits


def semantic_only(
    connection: apsw.Connection,
    scope: HistoryScope,
    nearest: list[tuple[int, float]],
    kinds: tuple[str, ...],
    limit: int,
) -> list[SearchHit]:
    """The nearest messages of the scope and kinds, by similarity."""
    found = reads.messages_by_ids(connection, scope, [item for item, _ in nearest], kinds)
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


def fused(
    connection: apsw.Connection,
    scope: HistoryScope,
    words: list[SearchHit],
    nearest: list[tuple[int, float]],
    *,
    kinds: tuple[str, ...],
    limit: int,
) -> list[SearchHit]:
    """Both rankings and the conversation context as one ranking (memoryd.domain.fusion)."""
    by_id = {hit.message.id: hit for hit in words}
    semantic = nearest
    if kinds:  # the vectors know no kinds: keep the nearest of the asked kinds only
        wanted = reads.messages_by_ids(connection, scope, [item for item, _ in nearest], kinds)
        semantic = [entry for entry in nearest if entry[0] in wanted]
    lexical = [(hit.message.id, hit.rank) for hit in words]
    candidates = list(dict.fromkeys([item for item, _ in lexical] + [item for item, _ in semantic]))
    context = reads.neighbours(connection, candidates)
    ranking = fuse(lexical, semantic, context)
    # Only the first few can be needed: a neighbour may be of another kind than asked for.
    ranking = ranking[: 3 * limit]
    loaded = reads.messages_by_ids(
        connection, scope, [item for item, _ in ranking if item not in by_id], kinds
    )
    hits: list[SearchHit] = []
    for item, scores in ranking:
        lexical_hit = by_id.get(item)
        if lexical_hit is not None:
            hits.append(
                dataclasses.replace(lexical_hit, semantic=scores.semantic_rank > 0, scores=scores)
            )
        elif item in loaded:
            hits.append(
                SearchHit(
                    loaded[item],
                    None,
                    0.0,
                    word_match=False,
                    lexical=False,
                    semantic=scores.semantic_rank > 0,
                    scores=scores,
                )
            )
        if len(hits) == limit:
            break
    return hits
