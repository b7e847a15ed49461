"""The sketch filter for the text check (pure Python): 32 bytes per document that reject, before any text
is read, the candidate pairs of unrelated documents.

A document's distinct n-gram hashes (64-bit, uniformly spread) fall into 32 bins by their top 5 bits;
each bin keeps one byte of its smallest hash (1–255; 0 for an empty bin). That is a one-permutation
MinHash: for two sets, a bin holds the same smallest element in both with probability close to their
Jaccard similarity J, independently enough across bins that the number of agreeing bins behaves as a
binomial of 32 draws at J (two different smallest hashes also agree on their byte once in 255: that
can only keep a pair for the check). A pair whose sketches agree in fewer bins than ``min_agreements``
gives for the check's threshold t is dropped: a pair at J ≥ t is dropped with probability at most
``MISS_RATE`` — the filter trades that for not reading the texts of the pairs that land within k bits
by chance (their J is near 0, so they agree in almost no bin). Bins empty in both count as agreeing, so
short documents are kept for the check rather than dropped.

Unlike the exact prefix filter (``core.prefix_filter``) its cost does not grow with the document: 32
bytes instead of a fifth of the n-grams.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

BINS = 32
MISS_RATE = 1e-9  # the largest probability of dropping a pair at the check's threshold
_SHIFT = np.uint64(64 - 5)


def ngram_sketch(sorted_distinct: np.ndarray) -> bytes:
    """The 32-byte sketch of a document's distinct n-gram hashes, sorted ascending (uint64, as
    ``shingles.codepoint_ngram_hashes`` gives them)."""
    return ngram_sketches([sorted_distinct])[0]


def ngram_sketches(sorted_distinct: Sequence[np.ndarray]) -> list[bytes]:
    """``ngram_sketch`` of each of many documents (each sorted ascending)."""
    if not sorted_distinct:
        return []
    lengths = np.array([len(h) for h in sorted_distinct], dtype=np.int64)
    return run_sketches(np.concatenate(sorted_distinct).astype(np.uint64, copy=False), lengths)


def run_sketches(hashes: np.ndarray, counts: np.ndarray) -> list[bytes]:
    """``ngram_sketch`` of each of many documents whose hashes lie back to back in ``hashes`` (``counts``
    of them per document, each document's sorted ascending), in a few array operations over all of them."""
    # each document's hashes are sorted, so its bins never decrease and a bin's first hash is its smallest;
    # a bin starts where the bin changes or a document starts (one byte per hash: the documents of the
    # few first hashes are looked up afterwards)
    bins = (hashes >> _SHIFT).astype(np.uint8)
    starts = np.cumsum(counts) - counts
    first = np.empty(len(bins), dtype=bool)
    if len(bins):
        first[0] = True
        np.not_equal(bins[1:], bins[:-1], out=first[1:])
        first[starts[counts > 0]] = True
    at = np.flatnonzero(first)
    documents = np.searchsorted(starts, at, side="right") - 1  # an empty document shares its start
    out = np.zeros(len(counts) * BINS, dtype=np.uint8)
    out[documents * BINS + bins[at]] = (hashes[at] % np.uint64(255) + np.uint64(1)).astype(np.uint8)
    block = out.tobytes()
    return [block[i * BINS : (i + 1) * BINS] for i in range(len(counts))]


@lru_cache(maxsize=1024)
def min_agreements(min_similarity: float, bins: int = BINS, miss_rate: float = MISS_RATE) -> int:
    """The fewest agreeing bins a pair needs to be kept: the largest a such that a pair at Jaccard
    ``min_similarity`` agrees in fewer than a of ``bins`` bins with probability at most ``miss_rate``."""
    below = 0.0  # P(Binomial(bins, t) < a), as a grows
    t = min_similarity
    for a in range(bins + 1):
        below_next = below + math.comb(bins, a) * t**a * (1 - t) ** (bins - a)
        if below_next > miss_rate:
            return a
        below = below_next
    return bins


def agreements(sketches_a: np.ndarray, sketches_b: np.ndarray) -> np.ndarray:
    """Agreeing bins of each pair of sketches (two uint8 matrices of one row per pair)."""
    return (sketches_a == sketches_b).sum(axis=1)


def stored_sketches_may_pass(
    stored_a: Sequence[bytes | None], stored_b: Sequence[bytes | None], min_similarity: float
) -> np.ndarray:
    """Element-wise over pairs of stored sketches: False where both are there and agree in fewer than
    ``min_agreements`` bins, True else (a document without a sketch, e.g. an index entry, is checked)."""
    n = len(stored_a)
    if len(stored_b) != n:
        raise ValueError(f"{n} sketches against {len(stored_b)}")
    stored = [*stored_a, *stored_b]
    present = np.array([s is not None for s in stored], dtype=bool)
    empty = bytes(BINS)
    sketches = np.frombuffer(b"".join(s or empty for s in stored), dtype=np.uint8).reshape(-1, BINS)
    rows = np.arange(n)
    return rows_may_pass(sketches, present, rows, rows + n, min_similarity)


def rows_may_pass(
    sketches: np.ndarray, present: np.ndarray, i: np.ndarray, j: np.ndarray, min_similarity: float
) -> np.ndarray:
    """``stored_sketches_may_pass`` of the row pairs (i, j) of a sketch matrix ((n, 32) uint8; ``present``:
    which rows have a sketch), without a bytes object per document."""
    agree = agreements(sketches[i], sketches[j]) >= min_agreements(min_similarity)
    return agree | ~(present[i] & present[j])
