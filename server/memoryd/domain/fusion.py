"""Search modes, and how the word ranking and the meaning ranking become one.

Hybrid search fuses scores, not ranks. Each ranking's scores are scaled to 0..1 for the query
at hand (bm25 divided by the best bm25; cosine similarity min-max over the nearest read), and a
hit's own score is their weighted sum, raised by what the query says beyond its words (`Cues`):
a message whose days meet the days the question names ("in June", "on 13 October, 2023") -- the
day it was said, or the day its "yesterday" or "last Friday" points at -- a message by someone
the question names, and a message that says when, for a question asking when. Then
conversation context: a message earns part of the best own score of the messages right before
and after it in its conversation, since the answer to a question is often the reply next to the
message that matches it, and a smaller part of the messages two away; a neighbour that matched
neither ranking can so be found too (MatchKind.NEIGHBOUR). Across conversations (an owner's or
an agent's scope) a conversation's share of the best scores weighs its messages, so that turns
on the same topic in other chats do not crowd out the one the question is about. The weights
were tuned on LoCoMo's conversations 1-5 only (bench/retrieval_quality.py) and hold on 6-10:
docs/performance.md has the tables. Plain reciprocal-rank fusion of the same two rankings
reached 67 at recall@10 there; scaled scores with first neighbours 75; with the cues and the
second neighbours 79.

Every text has some similarity to any query, so a meaning ranking always finds something: a
query about nothing the memory holds would get the nearest unrelated texts, looking like
answers. `above_floor` keeps a hit only when its words matched, its similarity reaches the
model's floor (calibrated for the embedded model on LoCoMo's conversations 1-5), or it is the
neighbour of a hit kept so; the rest are counted, and the answer says how many. A query of
punctuation and spaces alone ("%", "???") means nothing: its vector is the model's vector of
nothing, about equally near every text and near the floor itself (bge-small: 0.52 to 0.58 against
the retrieval fixture's messages), so `query_floor` puts its floor above every similarity.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import math
import re
import unicodedata
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence

from memoryd.domain.time_expressions import (
    Span,
    asked_span,
    asks_when,
    speaks_of_time,
    spoken_spans,
)


class SearchMode(enum.Enum):
    """Which rankings a search uses; DEFAULT is hybrid when vectors exist, else lexical."""

    DEFAULT = "default"
    LEXICAL = "lexical"
    SEMANTIC = "semantic"
    HYBRID = "hybrid"


class MatchKind(enum.Enum):
    """How a hit matched."""

    WORD = "word"
    SUBSTRING = "substring"
    SEMANTIC = "semantic"
    NEIGHBOUR = "neighbour"


@dataclasses.dataclass(frozen=True, slots=True)
class Scores:
    """The figures a hit was ranked by; 0 where a ranking did not find it."""

    bm25: float = 0.0
    similarity: float = 0.0
    fused: float = 0.0
    lexical_rank: int = 0
    semantic_rank: int = 0


NO_SCORES = Scores()


@dataclasses.dataclass(frozen=True, slots=True)
class FusionWeights:
    """The fusion's parameters."""

    # The words' share of a hit's own score; the meaning has the rest.
    lexical: float = 0.6
    # The share of its best neighbour's score a message earns.
    neighbour: float = 0.4
    # The share of the best score of the messages two away.
    second_neighbour: float = 0.25
    # The scaled word score of a substring match (word matches scale to 0..1 by bm25).
    substring: float = 0.5
    # How much a cue raises a message's own score (times the score): its days meet the days
    # the question names; its sender is named; it says when, and the question asks when.
    date: float = 1.5
    speaker: float = 0.3
    when: float = 0.3
    # Across conversations: the weight of a conversation's share of the best scores, read over
    # the first CONVERSATION_SHARE_OF fused hits (0: conversations are not weighed).
    conversation: float = 0.6


WEIGHTS = FusionWeights()
# How deep each ranking is read before fusing, at least: in one conversation, and across
# conversations (an owner's or an agent's), where other chats take their part of the places.
FUSION_DEPTH = 50
WIDE_FUSION_DEPTH = 100
# The place of a hit a ranking did not find, when ties are broken by the best place.
NOWHERE = 1 << 30

# How many of the best fused hits a conversation's share is read over.
CONVERSATION_SHARE_OF = 20

# (previous, next) message of a message in its conversation; None at either end.
Neighbours = Mapping[int, tuple[int | None, int | None]]
_WORDS = re.compile(r"\w+")


@dataclasses.dataclass(frozen=True, slots=True)
class Said:
    """What the cues of a ranked message are read from."""

    sender: str
    at: dt.datetime
    content: str
    # The conversation it belongs to (weighed across conversations).
    conversation: Hashable


@dataclasses.dataclass(frozen=True, slots=True)
class Cues:
    """What a query says beyond its words: the days it names, its words (a sender's first name
    among them names the sender), and whether it asks when."""

    span: Span | None
    words: frozenset[str]
    when: bool

    @classmethod
    def of(cls, query: str) -> Cues:
        """The cues of `query`."""
        return cls(asked_span(query), frozenset(_WORDS.findall(query.casefold())), asks_when(query))

    def raise_of(self, said: Said, weights: FusionWeights) -> float:
        """How much the cues raise a message's own score (0: not at all)."""
        found = 0.0
        timed = (self.span is not None or self.when) and speaks_of_time(said.content)
        if self.span is not None:
            found += weights.date * max(
                (
                    self.span.precision(days)
                    for days in spoken_spans(said.content, said.at, timed=timed)
                    if self.span.meets(days)
                ),
                default=0.0,
            )
        name = _WORDS.findall(said.sender.casefold())
        if name and name[0] in self.words:
            found += weights.speaker
        if self.when and timed:
            found += weights.when
        return found


def fuse(
    lexical: Sequence[tuple[int, float]],
    semantic: Sequence[tuple[int, float]],
    neighbours: Neighbours | None = None,
    weights: FusionWeights = WEIGHTS,
    *,
    keep: int | None = None,
    farther: Neighbours | None = None,
    cues: Cues | None = None,
    said: Mapping[int, Said] | None = None,
    across_conversations: bool = False,
) -> list[tuple[int, Scores]]:
    """(id, bm25) best first (bm25 0: a substring match) and (id, similarity) best first, as
    one ranking, best first (its first `keep` when given). With `neighbours`, conversation
    context counts too (and the neighbours themselves become candidates); with `farther` (the
    messages two before and two after each ranked message), those count too. With `cues` and
    what was `said` in each ranked message, the cues raise the messages they fit;
    `across_conversations` weighs each message by its conversation's share of the best scores
    (see the module docstring)."""
    fusion = _Fusion.of(
        lexical,
        semantic,
        neighbours,
        weights,
        farther=farther,
        cues=cues,
        said=said,
        across_conversations=across_conversations,
    )
    return [(item, fusion.scores(item)) for item in fusion.ranked()[:keep]]


def fuse_above_floor(
    lexical: Sequence[tuple[int, float]],
    semantic: Sequence[tuple[int, float]],
    neighbours: Neighbours,
    *,
    floor: float,
    keep: int,
    farther: Neighbours | None = None,
    cues: Cues | None = None,
    said: Mapping[int, Said] | None = None,
    across_conversations: bool = False,
) -> tuple[list[tuple[int, Scores]], int]:
    """`above_floor(fuse(...), floor, neighbours)` with the kept ranking cut at `keep`, and the
    same count of what was left out: the scores are made for the kept head only (a search
    across conversations ranks a thousand candidates or more, and answers a few)."""
    fusion = _Fusion.of(
        lexical,
        semantic,
        neighbours,
        WEIGHTS,
        farther=farther,
        cues=cues,
        said=said,
        across_conversations=across_conversations,
    )
    ranked = fusion.ranked()
    if floor <= 0:
        return [(item, fusion.scores(item)) for item in ranked[:keep]], 0
    primary = {
        item
        for item in (*fusion.lexical_places, *fusion.semantic_places)
        if item in fusion.lexical_places or fusion.similarity[item] >= floor
    }
    kept = [item for item in ranked if _primary_or_next_to_one(item, primary, neighbours)]
    head = []
    for item in kept[:keep]:
        scores = fusion.scores(item)
        if scores.similarity < floor:
            scores = dataclasses.replace(scores, semantic_rank=0)
        head.append((item, scores))
    return head, len(ranked) - len(kept)


@dataclasses.dataclass(frozen=True, slots=True)
class _Fusion:
    """The fused score of every candidate, and what its Scores are made of."""

    fused: dict[int, float]
    lexical_places: dict[int, int]
    semantic_places: dict[int, int]
    bm25: dict[int, float]
    similarity: dict[int, float]

    @classmethod
    def of(
        cls,
        lexical: Sequence[tuple[int, float]],
        semantic: Sequence[tuple[int, float]],
        neighbours: Neighbours | None,
        weights: FusionWeights,
        *,
        farther: Neighbours | None,
        cues: Cues | None,
        said: Mapping[int, Said] | None,
        across_conversations: bool,
    ) -> _Fusion:
        words = _scaled_words(lexical, weights.substring)
        meaning = _scaled_similarities(semantic)
        own = {
            item: weights.lexical * words.get(item, 0.0)
            + (1 - weights.lexical) * meaning.get(item, 0.0)
            for item in (*words, *meaning)
        }
        if cues is not None and said:
            for item, score in own.items():
                if item in said:
                    own[item] = score * (1 + cues.raise_of(said[item], weights))
        fused = dict(own)
        if neighbours:
            _add_context(fused, own, neighbours, farther or {}, weights)
        if across_conversations and said:
            _weigh_conversations(fused, said, weights.conversation)
        return cls(
            fused,
            {item: place for place, (item, _) in enumerate(lexical, start=1)},
            {item: place for place, (item, _) in enumerate(semantic, start=1)},
            dict(lexical),
            dict(semantic),
        )

    def ranked(self) -> list[int]:
        """Every candidate, best first: by fused score, then by its better place in either
        ranking, then the newer."""
        fused, lexical, semantic = self.fused, self.lexical_places, self.semantic_places

        def order(item: int) -> tuple[float, int, int]:
            places = (lexical.get(item, NOWHERE), semantic.get(item, NOWHERE))
            return (-fused[item], min(places), -item)

        return sorted(fused, key=order)

    def scores(self, item: int) -> Scores:
        return Scores(
            bm25=self.bm25.get(item, 0.0),
            similarity=self.similarity.get(item, 0.0),
            fused=self.fused[item],
            lexical_rank=self.lexical_places.get(item, 0),
            semantic_rank=self.semantic_places.get(item, 0),
        )


def _add_context(
    fused: dict[int, float],
    own: Mapping[int, float],
    neighbours: Neighbours,
    farther: Neighbours,
    weights: FusionWeights,
) -> None:
    """Each message earns part of its neighbours' own scores, and a smaller part of those two
    away (see the module docstring); the neighbours become candidates."""
    for item in own:
        for near in neighbours.get(item, (None, None)):
            if near is not None:
                fused.setdefault(near, 0.0)
    # Two away is symmetric: a ranked message lends its own score to the messages two away.
    far: dict[int, float] = {}
    for item, score in own.items():
        for near in farther.get(item, ()):
            if near is not None and near in fused:
                far[near] = max(far.get(near, 0.0), score)
    for item in fused:
        close = [own.get(near, 0.0) for near in neighbours.get(item, ()) if near is not None]
        fused[item] += weights.neighbour * max(close, default=0.0)
        fused[item] += weights.second_neighbour * far.get(item, 0.0)


def _weigh_conversations(fused: dict[int, float], said: Mapping[int, Said], weight: float) -> None:
    """Each message's score times (1 - weight) + weight x its conversation's share of the best
    CONVERSATION_SHARE_OF scores (a message not read counts as its own conversation)."""
    best = sorted(fused.items(), key=lambda entry: -entry[1])[:CONVERSATION_SHARE_OF]
    shares: dict[Hashable, float] = defaultdict(float)
    for item, score in best:
        shares[said[item].conversation if item in said else item] += score
    total = sum(shares.values())
    if total <= 0:
        return
    for item, score in fused.items():
        share = shares.get(said[item].conversation if item in said else item, 0.0)
        fused[item] = score * ((1 - weight) + weight * share / total)


def _scaled_words(lexical: Sequence[tuple[int, float]], substring: float) -> dict[int, float]:
    best = max((-bm25 for _, bm25 in lexical), default=0.0)
    if best <= 0:  # substring matches only: they are the best the words found
        return {item: 1.0 for item, _ in lexical}
    return {item: (-bm25 / best if bm25 < 0 else substring) for item, bm25 in lexical}


def _scaled_similarities(semantic: Sequence[tuple[int, float]]) -> dict[int, float]:
    if not semantic:
        return {}
    values = [similarity for _, similarity in semantic]
    top, bottom = max(values), min(values)
    if top - bottom <= 1e-9:
        return {item: 1.0 for item, _ in semantic}
    return {item: (similarity - bottom) / (top - bottom) for item, similarity in semantic}


def query_floor(query: str, floor: float) -> float:
    """The similarity floor for `query`: the model's, or, for a query of punctuation, spaces and
    controls alone (Unicode categories P, Z, C), one no similarity reaches. Emoji and other
    symbols keep the model's floor: a model may know what they mean."""
    if floor > 0 and all(unicodedata.category(char)[0] in "PZC" for char in query):
        return math.inf
    return floor


def above_floor(
    ranking: Sequence[tuple[int, Scores]],
    floor: float,
    neighbours: Neighbours | None = None,
) -> tuple[list[tuple[int, Scores]], int]:
    """The hits of `ranking` (in order) that a similarity floor keeps: every word or substring
    match, every hit of the meaning ranking at least `floor` similar to the query, and a
    neighbour of one of those; and how many were left out. A hit kept below the floor (a word
    match, a neighbour) no longer counts as a match of meaning: its semantic rank is cleared,
    so that it does not say it matched by meaning. A floor of 0 keeps everything."""
    if floor <= 0:
        return list(ranking), 0
    primary = {
        item
        for item, scores in ranking
        if scores.lexical_rank > 0 or (scores.semantic_rank > 0 and scores.similarity >= floor)
    }
    context = neighbours or {}
    kept = [
        (
            item,
            scores if scores.similarity >= floor else dataclasses.replace(scores, semantic_rank=0),
        )
        for item, scores in ranking
        if _primary_or_next_to_one(item, primary, context)
    ]
    return kept, len(ranking) - len(kept)


def _primary_or_next_to_one(item: int, primary: set[int], neighbours: Neighbours) -> bool:
    """Whether the floor keeps `item`: a match of its own (`primary`), or a neighbour of one."""
    return item in primary or any(near in primary for near in neighbours.get(item, ()) if near)
