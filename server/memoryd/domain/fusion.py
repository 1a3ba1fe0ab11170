"""Search modes, and how the word ranking and the meaning ranking become one.

Hybrid search fuses scores, not ranks. A hit's own score is what its words hold of the query --
its coverage (memoryd.domain.relevance: the share of the query's terms it holds, each weighed by
its rarity, a time the question names being held by a message said then) -- weighted 0.7, and
its similarity to the query, min-max scaled over the nearest read, weighted 0.3; a message by
someone the question names earns half as much again (the speaker cue). Then conversation
context: a message earns part of the best own score of the messages right before and after it
in its conversation, since the answer to a question is often the reply next to the message
that matches it; a neighbour that matched neither ranking can so be found too
(MatchKind.NEIGHBOUR). Across conversations (an owner's or an agent's scope) a conversation's
share of the best scores weighs its messages, so that turns on the same topic in other chats do
not crowd out the one the question is about.

Every rule is measured on two public sets of another kind each, LoCoMo (two friends chatting)
and BEAM (a user and an assistant), and kept only if it gains on both: docs/performance.md has
the tables. Coverage replaced bm25 scaled by the best hit's, which made the best word match 1
however little of the question it held (+0.4 on LoCoMo, +2.6 on BEAM at recall@10); the days a
question names became a term of its coverage instead of a multiplier of its own (which gained
on LoCoMo alone); the messages two away and the "When ...?" cue, which gained on LoCoMo and
lost on BEAM, are gone.

A turn that says nothing of its own ("ok", "thanks!") never matches on its own (its own score is
0), whatever its vector, which carries the turn before it: it is only ever context, unless it
holds every term of the query (a search for "thanks"). The floor
(`_kept`) holds every hit to one relevance: what matches on its own must reach it, and a
neighbour is kept only beside such a match.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import re
from collections import defaultdict
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence

from memoryd.domain.relevance import Evidence


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
    """The figures a hit was ranked and kept by; 0 where a ranking did not find it (the
    similarity: where the hit has no vector, or the search compares no meaning)."""

    bm25: float = 0.0
    similarity: float = 0.0
    fused: float = 0.0
    lexical_rank: int = 0
    semantic_rank: int = 0
    # How well the hit matches (memoryd.domain.relevance), 0 to 1: what the floor is held to.
    relevance: float = 0.0
    # The share of the query's terms, by weight, the hit holds.
    coverage: float = 0.0


NO_SCORES = Scores()


@dataclasses.dataclass(frozen=True, slots=True)
class FusionWeights:
    """The fusion's parameters."""

    # The words' share (coverage) of a hit's own score; the meaning has the rest.
    lexical: float = 0.7
    # The share of its best neighbour's own score a message earns.
    neighbour: float = 0.4
    # How much a message by someone the question names earns on top of its own score (times it).
    speaker: float = 0.5
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
    """Who said a ranked message, when, the start of what they said, and where."""

    sender: str
    at: dt.datetime
    content: str
    # The conversation it belongs to (weighed across conversations).
    conversation: Hashable


@dataclasses.dataclass(frozen=True, slots=True)
class Cues:
    """What a query says beyond its terms: its words, among which a sender's first name names
    the sender."""

    words: frozenset[str]

    @classmethod
    def of(cls, query: str) -> Cues:
        """The cues of `query`."""
        return cls(frozenset(_WORDS.findall(query.casefold())))

    def raise_of(self, said: Said, weights: FusionWeights) -> float:
        """How much the cues raise a message's own score (0: not at all)."""
        name = _WORDS.findall(said.sender.casefold())
        return weights.speaker if name and name[0] in self.words else 0.0


def fuse(
    lexical: Sequence[tuple[int, float]],
    semantic: Sequence[tuple[int, float]],
    neighbours: Neighbours | None = None,
    weights: FusionWeights = WEIGHTS,
    *,
    evidence: Callable[[int], Evidence],
    keep: int | None = None,
    cues: Cues | None = None,
    said: Mapping[int, Said] | None = None,
    across_conversations: bool = False,
) -> list[tuple[int, Scores]]:
    """(id, bm25) best first (bm25 0: a substring match) and (id, similarity) best first, as
    one ranking, best first (its first `keep` when given); `evidence` says what each candidate
    holds of the query. With `neighbours`, conversation context counts too (and the neighbours
    themselves become candidates). With `cues` and what was `said` in each ranked message, the
    speaker cue raises the messages it fits; `across_conversations` weighs each message by its
    conversation's share of the best scores (see the module docstring)."""
    fusion = _Fusion.of(
        lexical,
        semantic,
        neighbours,
        weights,
        evidence=evidence,
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
    evidence: Callable[[int], Evidence],
    floor: float,
    keep: int,
    cues: Cues | None = None,
    said: Mapping[int, Said] | None = None,
    across_conversations: bool = False,
) -> tuple[list[tuple[int, Scores]], int]:
    """fuse()'s ranking held to the relevance floor (`_kept`), cut at `keep`, and how many of
    its candidates the floor left out. Scores are made for the kept head only: a search across
    conversations ranks several hundred candidates, and answers a few."""
    fusion = _Fusion.of(
        lexical,
        semantic,
        neighbours,
        WEIGHTS,
        evidence=evidence,
        cues=cues,
        said=said,
        across_conversations=across_conversations,
    )
    candidates = fusion.lexical_places.keys() | fusion.semantic_places.keys()
    kept, cut = _kept(
        fusion.ranked(), evidence, floor, neighbours, keep=keep, candidates=candidates
    )
    return [(item, fusion.scores(item, found)) for item, found in kept], cut


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
        evidence: Callable[[int], Evidence],
        cues: Cues | None,
        said: Mapping[int, Said] | None,
        across_conversations: bool,
    ) -> _Fusion:
        meaning = _scaled_similarities(semantic)
        own: dict[int, float] = {}
        for item in dict.fromkeys([*(item for item, _ in lexical), *meaning]):
            found = evidence(item)
            if found.phatic:  # it only ever earns its neighbours' share
                own[item] = 0.0
                continue
            score = weights.lexical * found.coverage + (1 - weights.lexical) * meaning.get(
                item, 0.0
            )
            spoken = None if said is None else said.get(item)
            if cues is not None and spoken is not None:
                score *= 1 + cues.raise_of(spoken, weights)
            own[item] = score
        fused = dict(own)
        if neighbours:
            _add_context(fused, own, neighbours, weights)
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

    def scores(self, item: int, found: Evidence | None = None) -> Scores:
        """The item's figures; with its evidence, its relevance and coverage too, its
        similarity however it was found, and a semantic rank only when its meaning alone
        reaches the floor (a hit kept for its words or a neighbour says it matched so)."""
        if found is None:
            return Scores(
                bm25=self.bm25.get(item, 0.0),
                similarity=self.similarity.get(item, 0.0),
                fused=self.fused[item],
                lexical_rank=self.lexical_places.get(item, 0),
                semantic_rank=self.semantic_places.get(item, 0),
            )
        return Scores(
            bm25=self.bm25.get(item, 0.0),
            similarity=found.similarity or 0.0,
            fused=self.fused[item],
            lexical_rank=self.lexical_places.get(item, 0),
            semantic_rank=self.semantic_places.get(item, 0) if found.by_meaning else 0,
            relevance=found.relevance,
            coverage=found.coverage,
        )


def _add_context(
    fused: dict[int, float],
    own: Mapping[int, float],
    neighbours: Neighbours,
    weights: FusionWeights,
) -> None:
    """Each message earns part of its neighbours' own scores (see the module docstring); the
    neighbours become candidates."""
    for item in own:
        for near in neighbours.get(item, (None, None)):
            if near is not None:
                fused.setdefault(near, 0.0)
    for item in fused:
        close = [own.get(near, 0.0) for near in neighbours.get(item, ()) if near is not None]
        fused[item] += weights.neighbour * max(close, default=0.0)


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


def _scaled_similarities(semantic: Sequence[tuple[int, float]]) -> dict[int, float]:
    if not semantic:
        return {}
    values = [similarity for _, similarity in semantic]
    top, bottom = max(values), min(values)
    if top - bottom <= 1e-9:
        return {item: 1.0 for item, _ in semantic}
    return {item: (similarity - bottom) / (top - bottom) for item, similarity in semantic}


def above_floor(
    ranking: Sequence[tuple[int, Scores]],
    evidence: Callable[[int], Evidence],
    floor: float,
    neighbours: Neighbours | None = None,
    candidates: Collection[int] | None = None,
) -> tuple[list[tuple[int, Scores]], int]:
    """The hits of `ranking` (in order) the relevance floor keeps (see `_kept`; `candidates`,
    what a ranking found: every hit when not given), each with its relevance and coverage, and
    how many were left out."""
    scored = dict(ranking)
    ranked = [item for item, _ in ranking]
    found = set(ranked) if candidates is None else candidates
    kept, cut = _kept(ranked, evidence, floor, neighbours or {}, keep=None, candidates=found)
    return [(item, _with_evidence(scored[item], found)) for item, found in kept], cut


def _with_evidence(scores: Scores, found: Evidence) -> Scores:
    return dataclasses.replace(
        scores,
        similarity=found.similarity or 0.0,
        semantic_rank=scores.semantic_rank if found.by_meaning else 0,
        relevance=found.relevance,
        coverage=found.coverage,
    )


def _kept(
    ranked: Sequence[int],
    evidence: Callable[[int], Evidence],
    floor: float,
    neighbours: Neighbours,
    *,
    keep: int | None,
    candidates: Collection[int],
) -> tuple[list[tuple[int, Evidence]], int]:
    """The ranked items (in order, the first `keep`) that match on their own at the floor (of
    the `candidates`: what a ranking found), or stand next to one that does (a neighbour: its
    relevance is then the best of those it stands next to, whose match it is kept for); and
    how many the floor left out before the answer was full (every candidate, when nothing
    matches: judging the rest of a long ranking would cost more than the answer)."""
    passing: dict[int, bool] = {}

    def passes(item: int) -> bool:
        if item not in passing:
            passing[item] = item in candidates and evidence(item).passes(floor)
        return passing[item]

    kept: list[tuple[int, Evidence]] = []
    left_out = 0
    for item in ranked:
        if keep is not None and len(kept) == keep:
            break
        if passes(item):
            kept.append((item, evidence(item)))
            continue
        beside = [near for near in neighbours.get(item, ()) if near is not None and passes(near)]
        if beside:
            own = evidence(item)
            best = max(evidence(near).relevance for near in beside)
            kept.append((item, dataclasses.replace(own, relevance=max(own.relevance, best))))
        else:
            left_out += 1
    return kept, left_out
