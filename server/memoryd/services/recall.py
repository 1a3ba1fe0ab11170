"""Recall (the memory_recall tool): memory rows and/or conversation history of one caller.

A query searches the word index (rows with every word, then any word, each by bm25) and fills
the rest with rows holding one of its meaning-carrying words inside a key or value (partial
words, non-English text). With vectors (hybrid, the default, or semantic), the rows nearest in
meaning are ranked beside them, and both rankings are fused as SearchHistory fuses messages
(memoryd.domain.fusion). Every row and message, however found, is held to the relevance floor
(memoryd.domain.relevance); those below it are left out and counted. A query with no word that
carries meaning finds nothing. Without a query a key is looked up exactly; with neither, the
scope's rows are listed. With source=all the two sources take turns up to the limit. Inside a
scheduled job only the job's own rows are readable and history is refused.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping

from memoryd.domain.conversation import HistoryScope
from memoryd.domain.fusion import (
    FUSION_DEPTH,
    Scores,
    SearchMode,
    above_floor,
    fuse,
)
from memoryd.domain.history import SearchHit
from memoryd.domain.memories import Caller, ScopeType
from memoryd.domain.memory_queries import ListFilter, RankedMemory, Visible, guest_visibility
from memoryd.domain.messages import Trust
from memoryd.domain.quoting import shortened
from memoryd.domain.recall import (
    DEFAULT_LIMIT,
    GUEST_RECALLS_ONE_CONVERSATION,
    HISTORY_REFUSED_IN_JOBS,
    MAX_LIMIT,
    RecallScope,
    RecallSource,
    fallback_words,
    interleave,
)
from memoryd.domain.relevance import Evidence, QueryTerms
from memoryd.domain.search_query import SearchPlan, plan_search
from memoryd.errors import InvalidArgument, PermissionDenied
from memoryd.services.evidence import Judge, TermCounts, query_terms
from memoryd.services.query_vectors import Meaning, QueryNotEmbeddedError
from memoryd.services.search import HistorySearch
from memoryd.services.semantic import nearest_memories
from memoryd.storage import memory_reads as reads
from memoryd.storage.readers import ReaderPool
from memoryd.storage.transaction import Transaction


@dataclasses.dataclass(frozen=True, slots=True)
class RecallHit:
    """A recalled row or message, best first."""

    memory: RankedMemory | None = None
    message: SearchHit | None = None


# What one source gives a recall: its hits, how many the floor left out, how many its meaning
# could not see yet.
_Part = tuple[list[RecallHit], int, int]


@dataclasses.dataclass(frozen=True, slots=True)
class Recalled:
    """A recall's hits, best first; how many found by meaning alone its floor left out; and
    how many rows and messages of its scope the meaning could not see yet (no vector so far)."""

    hits: list[RecallHit]
    below_floor: int = 0
    unembedded: int = 0


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RecallRequest:
    """A memory_recall call, translated from the wire."""

    caller: Caller
    query: str
    key: str
    scope: RecallScope
    source: RecallSource
    limit: int
    trust: Trust
    mode: SearchMode = SearchMode.DEFAULT


class RecallService:
    """Recall over the readers and the history search."""

    def __init__(self, readers: ReaderPool, history: HistorySearch) -> None:
        self._readers = readers
        self._history = history

    async def recall(self, request: RecallRequest) -> Recalled:
        """memory_recall: query, else key, else the scope's rows; memories and/or history."""
        caller = request.caller
        if not 0 <= request.limit <= MAX_LIMIT:
            raise InvalidArgument(f"limit must be between 0 and {MAX_LIMIT}, got {request.limit}")
        limit = request.limit or DEFAULT_LIMIT
        if caller.job_id is not None:
            if request.source is not RecallSource.MEMORIES:
                raise PermissionDenied(HISTORY_REFUSED_IN_JOBS)
            if request.scope is not RecallScope.CURRENT:
                raise PermissionDenied(
                    f"scheduled jobs can read only their own scope job:{shortened(caller.job_id)}"
                )
        if request.trust is Trust.GUEST and request.scope is not RecallScope.CURRENT:
            raise PermissionDenied(GUEST_RECALLS_ONE_CONVERSATION)
        wants_memories = request.source in (RecallSource.MEMORIES, RecallSource.ALL)
        wants_history = request.source in (RecallSource.HISTORY, RecallSource.ALL)
        scope = self._history_scope(request) if wants_history and request.query.strip() else None
        memories_part: _Part = ([], 0, 0)
        history_part: _Part = ([], 0, 0)
        if wants_memories and scope is not None:
            # Side by side (the query's vector is made once for both); the rows' failure first.
            found_memories, found_history = await asyncio.gather(
                self._memories(request, limit),
                self._messages(request, scope, limit),
                return_exceptions=True,
            )
            if isinstance(found_memories, BaseException):
                raise found_memories
            if isinstance(found_history, BaseException):
                raise found_history
            memories_part, history_part = found_memories, found_history
        elif wants_memories:
            memories_part = await self._memories(request, limit)
        elif scope is not None:
            history_part = await self._messages(request, scope, limit)
        memories, cut, unembedded = memories_part
        messages, cut_history, unembedded_history = history_part
        cut, unembedded = cut + cut_history, unembedded + unembedded_history
        return Recalled(interleave(memories, messages, limit), cut, unembedded)

    def _history_scope(self, request: RecallRequest) -> HistoryScope:
        """The history a query searches: the caller's conversation, or the owner's."""
        caller = request.caller
        if request.scope is not RecallScope.CURRENT:
            return caller.owner
        if caller.conversation is None:
            raise InvalidArgument("recalling this conversation's history needs a conversation")
        return caller.conversation

    async def _memories(self, request: RecallRequest, limit: int) -> _Part:
        visible = recall_visibility(request.caller, request.scope, request.trust)
        found, cut, unembedded = await self._recall_memories(
            visible, request.query, request.key, limit, request.mode
        )
        return [RecallHit(memory=hit) for hit in found], cut, unembedded

    async def _messages(self, request: RecallRequest, scope: HistoryScope, limit: int) -> _Part:
        said = await self._history.search(
            scope,
            request.query,
            kinds=[],
            requested_limit=limit,
            trust=request.trust,
            mode=request.mode,
        )
        return [RecallHit(message=hit) for hit in said.hits], said.below_floor, said.unembedded

    async def _recall_memories(
        self, visible: Visible, query: str, key: str, limit: int, mode: SearchMode
    ) -> tuple[list[RankedMemory], int, int]:
        """The rows found, how many of meaning alone the floor left out, and how many rows
        the meaning could not see yet."""
        if query.strip():
            plan = plan_search(query)
            if plan.is_empty:  # nothing in it carries meaning: nothing matches
                return [], 0, 0
            return await self._memories_found(visible, query, plan, limit, mode)
        if key.strip():
            wanted = key.strip()
            found = await self._readers.read(
                lambda connection: reads.by_key(connection, visible, wanted, limit)
            )
        else:
            found = await self._readers.read(
                lambda connection: reads.list_page(
                    connection, visible, ListFilter(), after=None, limit=limit
                )
            )
        return [RankedMemory(record, 0.0, word_match=False) for record in found], 0, 0

    async def _memories_found(
        self, visible: Visible, query: str, plan: SearchPlan, limit: int, mode: SearchMode
    ) -> tuple[list[RankedMemory], int, int]:
        """A query's rows: the query's vector made on one side while a reader finds the words
        beside it (two cores), then the rows nearest in meaning, fused, held to the floor."""
        vectors = self._history.vectors
        words = fallback_words(query)
        depth = max(limit, FUSION_DEPTH)
        meaning: Meaning | None = None
        meaning_call: asyncio.Task[Meaning | None] | None = None
        if mode is SearchMode.LEXICAL or not vectors.enabled:
            # No vector to make: None, or semantic mode refused, before anything is read.
            meaning = await vectors.meaning(query, mode)
        else:
            meaning_call = asyncio.ensure_future(vectors.meaning(query, mode))

        def lexical(connection: Transaction) -> tuple[list[RankedMemory], QueryTerms]:
            counted = TermCounts.read(connection, "memories", plan)
            terms = memory_terms(connection, visible, plan, counted)
            hits: list[RankedMemory] = []
            if mode is not SearchMode.SEMANTIC:
                hits = lexical_memories(
                    connection,
                    visible,
                    plan,
                    words,
                    depth,
                    counted=counted.of_words(),
                    # A term no row holds: no row holds every word.
                    every_word=not any(terms.absent),
                )
            return hits, terms

        blind = False
        try:
            hits, terms = await self._readers.read(lexical)
            if meaning_call is not None:
                try:
                    meaning = await meaning_call
                except QueryNotEmbeddedError:
                    blind = True
        finally:
            if meaning_call is not None:
                meaning_call.cancel()

        def fuse_them(connection: Transaction) -> tuple[list[RankedMemory], int, int]:
            unembedded = vectors.unembedded(connection, mode, visible, blind=blind)
            if meaning is None and mode is SearchMode.SEMANTIC:
                return [], 0, unembedded
            nearest: list[tuple[int, float]] = []
            similarities: dict[int, float] | None = None
            if meaning is not None:
                nearest, similarities = nearest_memories(
                    connection, meaning[0], visible, meaning[1], depth
                )
            judge = vectors.judge(terms, similarities)
            found, cut = fused_memories(connection, hits, nearest, limit, judge)
            return found, cut, unembedded

        return await self._readers.read(fuse_them)


def recall_visibility(caller: Caller, scope: RecallScope, trust: Trust) -> Visible:
    """Which rows a recall sees: the job's own, the conversation's, the owner's, or all; a
    guest's, only the conversation's notes."""
    if trust is Trust.GUEST:
        return guest_visibility(caller, None, archived=False, active_sources=True)
    owner = caller.owner
    if caller.job_id is not None:
        scopes: tuple[tuple[ScopeType, str | None], ...] = (
            (ScopeType.JOB, caller.scope_id(ScopeType.JOB)),
        )
    elif scope is RecallScope.CURRENT:
        scopes = ((ScopeType.CONVERSATION, caller.scope_id(ScopeType.CONVERSATION, "scope")),)
    elif scope is RecallScope.OWNER:
        scopes = ((ScopeType.OWNER, owner.owner_id),)
    else:
        scopes = ()
    # A paused or deleted source (a scheduled job) is never recalled.
    return Visible(owner, scopes, active_sources=True)


def memory_terms(
    connection: Transaction, visible: Visible, plan: SearchPlan, counted: TermCounts
) -> QueryTerms:
    """The query's terms, weighed in the rows' word index, and which of them the rows the
    caller may see hold (as search.message_terms for messages)."""
    return query_terms(
        connection,
        "memories",
        plan,
        lambda phrases: reads.held_in_view(connection, visible, phrases),
        counted,
    )


def lexical_memories(
    connection: Transaction,
    visible: Visible,
    plan: SearchPlan,
    words: tuple[str, ...],
    limit: int,
    *,
    counted: Mapping[str, float] | None = None,
    every_word: bool = True,
) -> list[RankedMemory]:
    """Rows with every word (unless the caller knows none has: `every_word` False), then any
    word (each by bm25; with `counted`, the rows of the index holding each word as the search
    read them: memoryd.storage.fts5_scores), then substring matches."""
    hits: list[RankedMemory] = []
    if plan.word_expression is not None and every_word:
        hits = reads.search_words(connection, visible, plan.word_expression, limit, counted=counted)
    if plan.any_word_expression is not None and len(hits) < limit:
        hits += reads.search_words(
            connection,
            visible,
            plan.any_word_expression,
            limit - len(hits),
            exclude_ids=[hit.record.id for hit in hits],
            counted=counted,
        )
    if len(hits) < limit and words:
        hits += reads.search_substrings(
            connection,
            visible,
            words,
            exclude_ids=[hit.record.id for hit in hits],
            limit=limit - len(hits),
        )
    return [
        dataclasses.replace(hit, scores=Scores(bm25=hit.rank, lexical_rank=place))
        for place, hit in enumerate(hits, start=1)
    ]


def fused_memories(
    connection: Transaction,
    lexical: list[RankedMemory],
    nearest: list[tuple[int, float]],
    limit: int,
    judge: Judge,
) -> tuple[list[RankedMemory], int]:
    """Both rankings of rows as one, best first (memoryd.domain.fusion), held to the relevance
    floor; and how many the floor left out. A row is judged by its category, key and value,
    as the word index holds it."""
    by_id = {hit.record.id: hit for hit in lexical}
    loaded = reads.by_ids(connection, [item for item, _ in nearest if item not in by_id])
    records = {item: hit.record for item, hit in by_id.items()} | loaded

    def evidence(item: int) -> Evidence:
        record = records.get(item)
        if record is None:  # gone since it was ranked
            return judge.judge(item, "")
        return judge.judge(item, f"{record.key}\n{record.value}", speaker=record.category.value)

    ranking = fuse([(hit.record.id, hit.rank) for hit in lexical], nearest, evidence=evidence)
    kept, cut = above_floor(ranking, evidence, judge.floor)
    hits: list[RankedMemory] = []
    for item, scores in kept[:limit]:
        found = by_id.get(item)
        if found is not None:
            hits.append(
                dataclasses.replace(found, semantic=scores.semantic_rank > 0, scores=scores)
            )
        elif item in loaded:
            hits.append(
                RankedMemory(
                    loaded[item],
                    0.0,
                    word_match=False,
                    lexical=False,
                    semantic=True,
                    scores=scores,
                )
            )
    return hits, cut
