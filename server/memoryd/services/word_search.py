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
from memoryd.domain.snippets import substring_snippet, word_snippet
from memoryd.services.evidence import TermCounts
from memoryd.storage import hit_reads
from memoryd.storage import search_reads as reads
from memoryd.storage import terms as stored
from memoryd.storage.transaction import Transaction

# The query's rarest words, together in at most this many messages of the whole index, are
# ranked before every word is (WordSearch).
RARE_ROWS = 5_000


@dataclasses.dataclass(frozen=True, slots=True)
class WordSearch:
    """How one query's words are read in one scope (reads.rank_words), from how many messages
    of the whole index hold each (TermCounts: FTS5's vocabulary, PostgreSQL's statistics):

    - `stages`, in order until a search has enough: messages holding every word; then those
      holding any of its rarest words (together in at most RARE_ROWS messages of the index;
      the rarest one whatever its count); then any word. Ranking every message that holds a
      common word (a speaker's name, in a tenth of a conversation of 100,000 messages) by bm25
      cost 9 ms of a search's 16, and 350 ms in an agent of 1,000,000 whose question held
      only common words; a message holding common words alone ranks below those holding a
      rarer one anyway;
    - `narrow`: the word index itself is narrowed by the scope's token: cheap for a scope of
      a few thousand messages, and for words in very many messages (more than RARE_WORDS);
      otherwise only the join narrows (intersecting a 100,000-message scope's token costs
      10 ms);
    - `index_first`: a large scope's words in more than INDEX_FIRST messages are ranked in
      the index alone first, at half the cost of joining every match;
    - `rarest`: a small scope's search of several words looks up its rarest word first: when
      no message of the scope holds it, none holds every word, and that stage, which FTS5
      answers by walking every word's rows (1.7 ms p50 in a conversation of a million LoCoMo
      messages, against 0.1 ms to look the rarest up), is left out."""

    plan: SearchPlan
    counted: TermCounts
    stages: tuple[str, ...]
    small: bool
    narrow: bool
    index_first: bool
    rarest: str | None = None

    @classmethod
    def prepare(cls, connection: Transaction, scope: HistoryScope, plan: SearchPlan) -> WordSearch:
        """The way to search `plan` in `scope`."""
        counted = TermCounts.read(connection, "messages", plan)
        holding = {
            phrase: counted.holding.get(term, 0.0)
            for term in plan.terms
            if (phrase := plan.phrase_of(term)) is not None
        }
        stages: list[str] = []
        if plan.word_expression is not None:
            stages.append(plan.word_expression)
        if plan.any_word_expression is not None:
            rare = _rarest(holding)
            if len(rare) < len(holding):
                stages.append(" OR ".join(rare))
            stages.append(plan.any_word_expression)
        small = reads.scope_is_small(connection, scope)
        if small or not stages:
            rarest = None
            if small and plan.any_word_expression is not None and holding:
                rarest = min(holding, key=lambda phrase: holding[phrase])
            return cls(
                plan, counted, tuple(stages), small, narrow=small, index_first=False, rarest=rarest
            )
        narrow, index_first = reads.large_scope_reads(connection, sum(holding.values()))
        return cls(plan, counted, tuple(stages), small, narrow=narrow, index_first=index_first)


def _rarest(holding: dict[str, float]) -> list[str]:
    """The rarest phrases, together in at most RARE_ROWS messages of the index (and the rarest
    one the index holds, whatever its count), in the query's order."""
    chosen: set[str] = set()
    total = 0.0
    for phrase, count in sorted(holding.items(), key=lambda entry: entry[1]):
        if total > 0 and total + count > RARE_ROWS:
            break
        chosen.add(phrase)
        total += count
    return [phrase for phrase in holding if phrase in chosen]


@dataclasses.dataclass(frozen=True, slots=True)
class WordRanking:
    """The words' side of a fused search: (message id, bm25) best first, bm25 0 for a
    substring match; the messages of the substring matches only (word matches are read once
    fused). Read beside the query's embedding, so that fusing waits for less: the ranked
    messages' neighbours, and the counts of the query's terms."""

    ranked: list[tuple[int, float]] = dataclasses.field(default_factory=list)
    substrings: dict[int, StoredMessage] = dataclasses.field(default_factory=dict)
    neighbours: dict[int, tuple[int | None, int | None]] = dataclasses.field(default_factory=dict)
    # The query's terms counted in the index (None: not read yet).
    counted: TermCounts | None = None


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
    substring matches (a scan of a large scope) only up to `limit`; the neighbours of every
    ranked message when asked."""
    plan = way.plan
    # A small scope's few matches are scored with the counts read already.
    counted = way.counted.of_words() if way.small else None
    stages = way.stages
    if way.rarest is not None and not reads.held_in_scope(connection, scope, [way.rarest])[0]:
        stages = stages[1:]  # no message holds every word (WordSearch)
    ranked: list[tuple[int, float]] = []
    for expression in stages:
        if len(ranked) >= depth:
            break
        ranked += reads.rank_words(
            connection,
            scope,
            expression,
            kinds,
            depth - len(ranked),
            exclude_ids=[item for item, _ in ranked],
            narrow=way.narrow,
            index_first=way.index_first,
            counted=counted,
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
    context = hit_reads.neighbours(connection, [item for item, _ in ranked]) if neighbours else {}
    return WordRanking(ranked, substrings, context, way.counted)


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
                None,
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
            hit_reads.messages_by_ids(
                connection, scope, [i for i in chunk if i not in found], kinds
            )
        )
        usable += sum(1 for item in chunk if item in found)
        if usable >= limit:
            break
    return found


def snippets_filled(hits: list[SearchHit], plan: SearchPlan) -> list[SearchHit]:
    """Each hit's snippet: around the query's terms among its words (a word match), or around
    its first substring match, or its start (domain.snippets)."""
    phrases = [words for words in map(stored.phrase_words, plan.terms) if words]
    filled = []
    for hit in hits:
        content = hit.message.content
        snippet = None
        if hit.word_match:
            snippet = word_snippet(content, stored.text_spans(content), phrases)
        if snippet is None:
            snippet = substring_snippet(content, plan.substring_terms)
        filled.append(dataclasses.replace(hit, snippet=snippet))
    return filled


def lexical(
    connection: Transaction,
    scope: HistoryScope,
    way: WordSearch,
    kinds: tuple[str, ...],
    limit: int,
) -> list[SearchHit]:
    """Every word, then any word (each by bm25), then substrings newest first: ranked first
    (ids and bm25 alone), then the first `limit` read with their snippets. Reading the hits
    with their snippets in the ranking's own statement made FTS5 build a snippet for every
    message holding any word, before sorting: 10,000 of them for a speaker's name in a
    conversation of 100,000 messages."""
    words = rank_lexical(connection, scope, way, kinds, limit, limit=limit, neighbours=False)
    return hits_of(connection, scope, words, word_order(words), kinds=kinds, limit=limit)
