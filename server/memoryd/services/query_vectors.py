"""A query's meaning, for the searches that use it: its vector (made once, kept in a cache), how
far a hit's vector must be to count (the calibrated relevance), and which searches can use
meaning at all (embeddings on, vectors made)."""

from __future__ import annotations

import asyncio
import collections
import threading

from memoryd.domain.conversation import HistoryScope
from memoryd.domain.fusion import SearchMode
from memoryd.domain.memory_queries import Visible
from memoryd.domain.relevance import QueryTerms
from memoryd.domain.vectors import Floats
from memoryd.errors import FailedPrecondition, Unavailable
from memoryd.llm.embeddings import EmbeddingUnavailableError
from memoryd.services.embedding import EmbeddingService
from memoryd.services.evidence import Judge, Relevance
from memoryd.services.semantic import VectorCache
from memoryd.storage import vector_reads, vector_store
from memoryd.storage.transaction import Transaction

# Query vectors kept, so that an agent asking the same thing again pays no model call.
QUERY_VECTORS = 1024
# A query's meaning: the model and the query's vector of it.
Meaning = tuple[vector_store.EmbeddingModel, Floats]

EMBEDDINGS_OFF = (
    'semantic search needs embeddings, and they are off (memoryd.search.embeddings = "off")'
)


class QueryNotEmbeddedError(Exception):
    """The embedding provider could not embed the query: a hybrid search ranks by words alone,
    and counts every message of its scope as unseen by meaning."""


class QueryVectors:
    """The query side of semantic search: the model's vector of a query, remembered, and how a
    hit's relevance is judged (the floor every hit is held to)."""

    def __init__(
        self, embedding: EmbeddingService, cache: VectorCache, relevance: Relevance
    ) -> None:
        self.embedding = embedding
        self.cache = cache
        self.relevance = relevance
        self._recent: collections.OrderedDict[tuple[int, str], Floats] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._flights: dict[tuple[int, str], asyncio.Future[Meaning | None]] = {}

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
            return vector_reads.unembedded_memories(connection, scope, model_id)
        return vector_reads.unembedded_messages(connection, scope, model_id)

    def _landed(self, key: tuple[int, str], flight: asyncio.Future[Meaning | None]) -> None:
        """A query's model call ended: later searches make or find it anew; a failure that no
        search waited for any more is read here, not reported as never retrieved."""
        if self._flights.get(key) is flight:
            del self._flights[key]
        if not flight.cancelled():
            flight.exception()

    def judge(
        self,
        terms: QueryTerms,
        similarities: dict[int, float] | None,
    ) -> Judge:
        """A judge of one search's candidates, for a query of `terms`."""
        return Judge(terms, similarities, self.relevance.calibration, floor=self.relevance.floor)

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
        # Searches asking the same at once (Recall's two sources) share one model call.
        flight = self._flights.get(key)
        if flight is None:
            flight = asyncio.ensure_future(self.embedding.query_vector(query))
            self._flights[key] = flight
            flight.add_done_callback(lambda done: self._landed(key, done))
        try:
            found = await asyncio.shield(flight)
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
