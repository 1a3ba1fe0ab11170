"""The pure rules of semantic search as specifications, without a server: the int8 vectors,
the Hamming pre-selection of a large scope, and the fusion of the two rankings."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from memoryd.domain.fusion import Scores, above_floor, fuse, fuse_above_floor, query_floor
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


@given(
    RANKING,
    RANKING,
    st.lists(st.floats(0.0, 1.0), min_size=30, max_size=30),
    st.dictionaries(
        st.integers(1, 60),
        st.tuples(st.none() | st.integers(1, 60), st.none() | st.integers(1, 60)),
    ),
    st.tuples(st.sampled_from([0.0, 0.3, 0.5, 0.7]), st.integers(1, 40)),
)
def test_the_floor_applied_to_the_fusion_as_it_is_made_keeps_what_it_keeps_applied_after(
    lexical_ids: list[int],
    semantic_ids: list[int],
    similarities: list[float],
    neighbours: dict[int, tuple[int | None, int | None]],
    floor_and_keep: tuple[float, int],
) -> None:
    floor, keep = floor_and_keep
    lexical = [(item, -float(len(lexical_ids) - place)) for place, item in enumerate(lexical_ids)]
    ordered = sorted(similarities, reverse=True)
    semantic = [(item, ordered[place]) for place, item in enumerate(semantic_ids)]
    kept, cut = above_floor(fuse(lexical, semantic, neighbours), floor, neighbours)
    assert fuse_above_floor(lexical, semantic, neighbours, floor=floor, keep=keep) == (
        kept[:keep],
        cut,
    )


def test_the_similarity_floor_keeps_words_near_enough_meaning_and_their_neighbours() -> None:
    def hit(lexical: int = 0, semantic: int = 0, similarity: float = 0.0) -> Scores:
        return Scores(similarity=similarity, lexical_rank=lexical, semantic_rank=semantic)

    ranking = [
        (1, hit(lexical=1, semantic=5, similarity=0.30)),  # a word match, far in meaning
        (2, hit(semantic=1, similarity=0.70)),  # near in meaning
        (3, hit(semantic=2, similarity=0.40)),  # next to 2
        (4, hit(semantic=3, similarity=0.45)),  # next to 3 only: too far
        (5, hit()),  # next to 1 (context alone)
    ]
    neighbours = {1: (None, 5), 2: (None, 3), 3: (2, 4), 4: (3, None), 5: (1, None)}
    kept, cut = above_floor(ranking, 0.5, neighbours)
    assert [item for item, _ in kept] == [1, 2, 3, 5]
    assert cut == 1
    # Kept below the floor, a hit no longer says it matched by meaning.
    assert dict(kept)[1].semantic_rank == 0
    assert dict(kept)[3].semantic_rank == 0
    assert dict(kept)[2].semantic_rank == 1
    assert above_floor(ranking, 0.0, neighbours) == (ranking, 0)
    assert above_floor(ranking, 0.5)[0] == [(1, dict(kept)[1]), (2, ranking[1][1])]


def test_a_query_of_punctuation_alone_has_a_floor_no_similarity_reaches() -> None:
    for wordless in ("%", "???", " -- ", "\u3002\u3001", "\u00a0!\t"):
        assert query_floor(wordless, 0.55) == math.inf, wordless
    for meant in ("a", "7", "\u732b", "\U0001f363", "+", "$%"):
        assert query_floor(meant, 0.55) == 0.55, meant
    assert query_floor("%", 0.0) == 0.0  # no floor known: none set
