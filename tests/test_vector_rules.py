"""The pure rules of semantic search as specifications, without a server: the int8 vectors,
the Hamming pre-selection of a large scope, and the fusion of the two rankings."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from memoryd.domain.fusion import fuse
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


@given(
    RANKING,
    RANKING,
    st.dictionaries(st.integers(1, 60), st.tuples(st.integers(1, 60), st.integers(1, 60))),
    st.integers(1, 40),
)
def test_fusion_keeps_the_head_of_the_full_ranking(
    lexical_ids: list[int],
    semantic_ids: list[int],
    neighbours: dict[int, tuple[int, int]],
    keep: int,
) -> None:
    lexical = [(item, -float(len(lexical_ids) - place)) for place, item in enumerate(lexical_ids)]
    semantic = [(item, 1.0 - place / 100) for place, item in enumerate(semantic_ids)]
    whole = fuse(lexical, semantic, neighbours)
    assert fuse(lexical, semantic, neighbours, keep=keep) == whole[:keep]
    # Every id of either ranking is a candidate, and nothing is ranked twice.
    ids = [item for item, _ in whole]
    assert len(ids) == len(set(ids))
    assert set(lexical_ids) | set(semantic_ids) <= set(ids)
    fused = [scores.fused for _, scores in whole]
    assert fused == sorted(fused, reverse=True)
