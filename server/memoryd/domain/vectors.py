"""Vectors as memoryd stores and compares them: int8 with a scale, sign bits for a first pass.

A vector is L2-normalised float32 from the embedder. It is stored as int8 components and one
scale (the largest magnitude / 127), so `int8 * scale` gives it back to within half a step; the
cosine of two vectors comes out within about 0.002 of the exact one. For a large scope, the sign
bits of the components (one bit each, packed into 64-bit words) pick the candidates by Hamming
distance, and only those are compared exactly.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float32]
Int8s = npt.NDArray[np.int8]
Words = npt.NDArray[np.uint64]
Ids = npt.NDArray[np.int64]

INT8_MAX = 127


@dataclasses.dataclass(frozen=True, slots=True)
class Quantised:
    """Vectors as stored: one scale a vector, and int8 components."""

    scales: Floats
    components: Int8s


def normalised(vectors: Floats) -> Floats:
    """Each row scaled to length 1 (a zero row stays zero)."""
    lengths = np.linalg.norm(vectors, axis=1, keepdims=True)
    found: Floats = np.divide(vectors, lengths, out=np.zeros_like(vectors), where=lengths > 0)
    return found


def quantise(vectors: Floats) -> Quantised:
    """Rows of float32 as int8 components and a scale each."""
    peaks = np.abs(vectors).max(axis=1)
    scales = np.where(peaks > 0, peaks / INT8_MAX, 1.0).astype(np.float32)
    components = np.rint(vectors / scales[:, None]).clip(-INT8_MAX, INT8_MAX).astype(np.int8)
    return Quantised(scales, components)


def restored(scales: Floats, components: Int8s) -> Floats:
    """The float32 rows a Quantised stands for."""
    return components.astype(np.float32) * scales[:, None]


def sign_words(components: Int8s) -> Words:
    """Each row's sign bits, packed into 64-bit words (the dimension padded to 64): one row of
    words a row of components."""
    bits = np.packbits(components >= 0, axis=1)
    padding = (-bits.shape[1]) % 8
    if padding:
        bits = np.pad(bits, ((0, 0), (0, padding)))
    return np.ascontiguousarray(bits).view(np.uint64)


def hamming(columns: Words, query: Words) -> npt.NDArray[np.uint16]:
    """The Hamming distance to the words `query` of each vector, whose words are the columns of
    `columns` (one row per word: summing whole rows is five times faster than summing across
    each vector's few words)."""
    distances: npt.NDArray[np.uint16] = np.bitwise_count(columns[0] ^ query[0]).astype(np.uint16)
    for row in range(1, len(query)):
        distances += np.bitwise_count(columns[row] ^ query[row])
    return distances


def smallest(distances: npt.NDArray[np.uint16], count: int) -> Ids:
    """The positions of the `count` smallest distances (of equal ones at the boundary, the
    first), in no order. Distances are small integers, so counting them beats a partition
    (0.4 against 1.0 ms for 100,000)."""
    if len(distances) <= count:
        return np.arange(len(distances))
    below = np.cumsum(np.bincount(distances))
    boundary = int(np.searchsorted(below, count))  # the smallest d with count(<= d) >= count
    inside = np.flatnonzero(distances < boundary)
    tied = np.flatnonzero(distances == boundary)[: count - len(inside)]
    return np.concatenate((inside, tied))


def to_blob(components: Int8s) -> bytes:
    """One row's components as stored."""
    return components.tobytes()


def from_blobs(blobs: list[bytes], dimension: int) -> Int8s:
    """Stored rows back as one int8 matrix."""
    if not blobs:
        return np.zeros((0, dimension), dtype=np.int8)
    return np.frombuffer(b"".join(blobs), dtype=np.int8).reshape(len(blobs), dimension)
