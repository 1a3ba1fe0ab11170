"""Search modes, and how the word ranking and the meaning ranking become one.

Hybrid search fuses scores, not ranks. Each ranking's scores are scaled to 0..1 for the query
at hand (bm25 divided by the best bm25; cosine similarity min-max over the nearest read), and a
hit's score is their weighted sum. Then conversation context: a message earns part of the best
score of the messages right before and after it in its conversation, since the answer to a
question is often the reply next to the message that matches it; a neighbour that matched
neither ranking can so be found too (MatchKind.NEIGHBOUR). The weights were tuned on LoCoMo's
conversations 1-5 only (bench/retrieval_quality.py) and hold on 6-10: the README has the table.
Plain reciprocal-rank fusion of the same two rankings reached 67 at recall@10 there, this 75.

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
import enum
import math
import unicodedata
from collections.abc import Mapping, Sequence


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
    # The scaled word score of a substring match (word matches scale to 0..1 by bm25).
    substring: float = 0.5


WEIGHTS = FusionWeights()
# How deep each ranking is read before fusing, at least.
FUSION_DEPTH = 50
# The place of a hit a ranking did not find, when ties are broken by the best place.
NOWHERE = 1 << 30

# (previous, next) message of a message in its conversation; None at either end.
Neighbours = Mapping[int, tuple[int | None, int | None]]


def fuse(
    lexical: Sequence[tuple[int, float]],
    semantic: Sequence[tuple[int, float]],
    neighbours: Neighbours | None = None,
    weights: FusionWeights = WEIGHTS,
    *,
    keep: int | None = None,
) -> list[tuple[int, Scores]]:
    """(id, bm25) best first (bm25 0: a substring match) and (id, similarity) best first, as
    one ranking, best first (its first `keep` when given). With `neighbours`, conversation
    context counts too (and the neighbours themselves become candidates)."""
    words = _scaled_words(lexical, weights.substring)
    meaning = _scaled_similarities(semantic)
    own = {
        item: weights.lexical * words.get(item, 0.0)
        + (1 - weights.lexical) * meaning.get(item, 0.0)
        for item in (*words, *meaning)
    }
    fused = dict(own)
    if neighbours:
        for item in own:
            for near in neighbours.get(item, (None, None)):
                if near is not None:
                    fused.setdefault(near, 0.0)
        for item in fused:
            context = [own.get(n, 0.0) for n in neighbours.get(item, (None, None)) if n is not None]
            fused[item] += weights.neighbour * max(context, default=0.0)
    lexical_places = {item: place for place, (item, _) in enumerate(lexical, start=1)}
    semantic_places = {item: place for place, (item, _) in enumerate(semantic, start=1)}

    def order(item: int) -> tuple[float, int, int]:
        places = (lexical_places.get(item, NOWHERE), semantic_places.get(item, NOWHERE))
        return (-fused[item], min(places), -item)

    ranked = sorted(fused, key=order)[:keep]
    bm25 = dict(lexical)
    similarity = dict(semantic)
    return [
        (
            item,
            Scores(
                bm25=bm25.get(item, 0.0),
                similarity=similarity.get(item, 0.0),
                fused=fused[item],
                lexical_rank=lexical_places.get(item, 0),
                semantic_rank=semantic_places.get(item, 0),
            ),
        )
        for item in ranked
    ]


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
        if item in primary or any(near in primary for near in context.get(item, ()) if near)
    ]
    return kept, len(ranking) - len(kept)
