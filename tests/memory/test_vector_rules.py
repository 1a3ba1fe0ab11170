"""The pure rules of semantic search as specifications, without a server: the int8 vectors,
the Hamming pre-selection of a large scope, and the fusion of the two rankings."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from memoryd.domain.fusion import Scores, above_floor, fuse, fuse_above_floor
from memoryd.domain.relevance import Evidence
from memoryd.domain.vectors import hamming, normalised, quantise, restored, sign_words, smallest

DISTANCES = hnp.arrays(
    np.uint16, st.integers(0, 3000), elements=st.integers(0, 384)
)  # a scope's Hamming distances to a query (384-bit sign words)


@given(DISTANCES, st.integers(1, 3100))
def test_smallest_picks_exactly_the_smallest_distances(distances: np.ndarray, count: int) -> None:
    chosen = smallest(distances, count)
    assert len(chosen) == min(count, len(distances))
    assert len(set(chosen.tolist())) == len(chosen)  # no position twice
    assert sorted(distances[chosen].tolist()) == sorted(distances.tolist())[: len(chosen)]


@settings(max_examples=50)
@given(st.integers(1, 40), st.integers(1, 300), st.integers(0, 2**32 - 1))
def test_hamming_counts_the_differing_sign_bits(rows: int, dimension: int, seed: int) -> None:
    generator = np.random.default_rng(seed)
    vectors = normalised(generator.standard_normal((rows, dimension)).astype(np.float32))
    stored = quantise(vectors)
    query = quantise(normalised(generator.standard_normal((1, dimension)).astype(np.float32)))
    distances = hamming(sign_words(stored.components).T.copy(), sign_words(query.components)[0])
    expected = ((stored.components >= 0) != (query.components[0] >= 0)).sum(axis=1)
    assert distances.tolist() == expected.tolist()


@settings(max_examples=50)
@given(st.integers(1, 50), st.integers(8, 400), st.integers(0, 2**32 - 1))
def test_int8_vectors_keep_the_cosine_within_a_few_thousandths(
    rows: int, dimension: int, seed: int
) -> None:
    generator = np.random.default_rng(seed)
    vectors = normalised(generator.standard_normal((rows, dimension)).astype(np.float32))
    query = vectors[0]
    stored = quantise(vectors)
    approximate = restored(stored.scales, stored.components) @ query
    # Rounding to the step (a row's scale) errs by at most half a step a component, uniformly:
    # against a unit query the cosine errs with a deviation of step / sqrt(12). Six of those
    # bound it; for the embedded model's 384 dimensions that is under 0.003.
    bound = 6 * float(stored.scales.max()) / math.sqrt(12)
    assert np.abs(approximate - vectors @ query).max() < bound


RANKING = st.lists(st.integers(1, 60), unique=True, max_size=30)
COVERAGES = st.lists(st.floats(0.0, 1.0), min_size=61, max_size=61)


@given(
    RANKING,
    RANKING,
    st.dictionaries(st.integers(1, 60), st.tuples(st.integers(1, 60), st.integers(1, 60))),
    st.integers(1, 40),
    COVERAGES,
)
def test_fusion_keeps_the_head_of_the_full_ranking(
    lexical_ids: list[int],
    semantic_ids: list[int],
    neighbours: dict[int, tuple[int, int]],
    keep: int,
    coverages: list[float],
) -> None:
    lexical = [(item, -float(len(lexical_ids) - place)) for place, item in enumerate(lexical_ids)]
    semantic = [(item, 1.0 - place / 100) for place, item in enumerate(semantic_ids)]

    def evidence(item: int) -> Evidence:
        return Evidence(coverage=coverages[item], similarity=None, relevance=1.0)

    whole = fuse(lexical, semantic, neighbours, evidence=evidence)
    assert fuse(lexical, semantic, neighbours, evidence=evidence, keep=keep) == whole[:keep]
    # Every id of either ranking is a candidate, and nothing is ranked twice.
    ids = [item for item, _ in whole]
    assert len(ids) == len(set(ids))
    assert set(lexical_ids) | set(semantic_ids) <= set(ids)
    fused = [scores.fused for _, scores in whole]
    assert fused == sorted(fused, reverse=True)


@given(
    RANKING,
    RANKING,
    st.lists(st.floats(0.0, 1.0), min_size=61, max_size=61),
    st.dictionaries(
        st.integers(1, 60),
        st.tuples(st.none() | st.integers(1, 60), st.none() | st.integers(1, 60)),
    ),
    st.tuples(st.sampled_from([0.0, 0.3, 0.5, 0.7]), st.integers(1, 40)),
)
def test_the_floor_applied_to_the_fusion_as_it_is_made_keeps_what_it_keeps_applied_after(
    lexical_ids: list[int],
    semantic_ids: list[int],
    relevances: list[float],
    neighbours: dict[int, tuple[int | None, int | None]],
    floor_and_keep: tuple[float, int],
) -> None:
    floor, keep = floor_and_keep
    lexical = [(item, -float(len(lexical_ids) - place)) for place, item in enumerate(lexical_ids)]
    semantic = [(item, 1.0 - place / 100) for place, item in enumerate(semantic_ids)]

    def evidence(item: int) -> Evidence:
        return Evidence(coverage=0.5, similarity=None, relevance=relevances[item])

    found = set(lexical_ids) | set(semantic_ids)
    kept, _ = above_floor(
        fuse(lexical, semantic, neighbours, evidence=evidence),
        evidence,
        floor,
        neighbours,
        candidates=found,
    )
    head, _ = fuse_above_floor(
        lexical, semantic, neighbours, evidence=evidence, floor=floor, keep=keep
    )
    assert head == kept[:keep]


def test_the_floor_keeps_what_matches_on_its_own_and_its_neighbours() -> None:
    def hit(lexical: int = 0, semantic: int = 0) -> Scores:
        return Scores(lexical_rank=lexical, semantic_rank=semantic)

    ranking = [
        (1, hit(lexical=1, semantic=5)),  # matches
        (2, hit(semantic=1)),  # matches
        (3, hit(semantic=2)),  # next to 2
        (4, hit(semantic=3)),  # next to 3 only: left out
        (5, hit()),  # next to 1 (context alone)
        (6, hit(lexical=2)),  # says nothing ("ok, thanks"): never matches on its own
        (7, hit(lexical=3)),  # next to 6 only: left out
    ]
    judged = {
        1: Evidence(coverage=0.9, similarity=0.3, relevance=0.8),
        2: Evidence(coverage=0.0, similarity=0.7, relevance=0.9, by_meaning=True),
        3: Evidence(coverage=0.0, similarity=0.4, relevance=0.2, by_meaning=False),
        4: Evidence(coverage=0.0, similarity=0.45, relevance=0.3),
        5: Evidence(coverage=0.0, similarity=None, relevance=0.1),
        6: Evidence(coverage=1.0, similarity=0.9, relevance=0.99, phatic=True),
        7: Evidence(coverage=0.1, similarity=0.3, relevance=0.1),
    }
    neighbours = {1: (None, 5), 2: (None, 3), 3: (2, 4), 4: (3, None), 5: (1, None), 7: (6, None)}
    kept, cut = above_floor(ranking, judged.__getitem__, 0.5, neighbours)
    assert [item for item, _ in kept] == [1, 2, 3, 5]
    assert cut == 3
    scores = dict(kept)
    # A neighbour has the relevance of the match it is kept beside.
    assert scores[3].relevance == 0.9
    assert scores[5].relevance == 0.8
    assert scores[1].coverage == 0.9
    # A hit whose meaning alone does not reach the floor does not say it matched by meaning.
    assert scores[1].semantic_rank == 0
    assert scores[2].semantic_rank == 1
    assert scores[3].semantic_rank == 0
    # Floor 0 keeps everything but what says nothing on its own, and the neighbour of that.
    assert [item for item, _ in above_floor(ranking, judged.__getitem__, 0.0, neighbours)[0]] == [
        1,
        2,
        3,
        4,
        5,
        7,
    ]
