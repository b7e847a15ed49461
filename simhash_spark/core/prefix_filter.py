"""The exact prefix filter for the text check (pure Python).

If J(x, y) >= t for two n-gram sets then |x ∩ y| >= t·max(|x|, |y|) >= ⌈t·|x|⌉. Order all n-grams by
their 64-bit hash (a global order): two sets sharing o elements have intersecting prefixes once each
prefix holds |set| - o + 1 elements, and ``prefix_length`` is never shorter than that. So a pair whose
prefixes do not intersect cannot pass the check: it is rejected without its texts. The prefixes keep the
top 32 bits of the hashes: an element both hold stays equal, and a collision of two different
elements can only keep a pair for the check, never reject one.

With the default features (character n-grams hashed with mix64, on the n the check uses) a document's
fingerprint features *are* the check's n-gram hashes, so the fingerprint pass emits the prefix at almost
no cost (``core.fingerprint.check_filter`` says when), and the check normalizes and compares the texts of a pair only
when its prefixes meet.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def prefix_length(n_distinct: int, min_similarity: float) -> int:
    """Elements of a prefix of a set of ``n_distinct`` elements for the threshold ``min_similarity``."""
    if n_distinct == 0:
        return 0
    # the product is rounded first so that t·|x| meant as an integer (0.8 · 10) is not ceiled to 9
    return n_distinct - math.ceil(round(min_similarity * n_distinct, 9)) + 1


def ngram_prefix(distinct_hashes: np.ndarray, min_similarity: float) -> np.ndarray:
    """The prefix of a document's distinct n-gram hashes (uint64, ``shingles.char_ngram_hashes``):
    the top 32 bits of its ``prefix_length`` smallest, distinct and sorted (uint32)."""
    p = prefix_length(len(distinct_hashes), min_similarity)
    top = (np.sort(distinct_hashes)[:p] >> np.uint64(32)).astype(np.uint32)
    if len(top) < 2:
        return top
    # sorted already: the neighbour test is np.unique without its sort
    return top[np.concatenate(([True], top[1:] != top[:-1]))]


def to_bytes(prefix: np.ndarray) -> bytes:
    """A prefix as Spark stores it: its uint32 values, little-endian."""
    return prefix.astype("<u4").tobytes()


def from_bytes(stored: bytes) -> np.ndarray:
    return np.frombuffer(stored, dtype="<u4")


def stored_prefixes_meet(stored_a: Sequence[bytes | None], stored_b: Sequence[bytes | None]) -> np.ndarray:
    """Element-wise over pairs of stored prefixes (``to_bytes``): False where both are there and do not
    meet (``may_pass``: the pair cannot pass the check), True else (a document without a prefix, e.g. an
    index entry, is checked)."""
    return np.fromiter(
        (
            a is None or b is None or may_pass(from_bytes(a), from_bytes(b))
            for a, b in zip(stored_a, stored_b, strict=True)
        ),
        dtype=bool,
        count=len(stored_a),
    )


def may_pass(prefix_a: np.ndarray, prefix_b: np.ndarray) -> bool:
    """False only for a pair that cannot reach the threshold its prefixes were taken for."""
    if not len(prefix_a) and not len(prefix_b):
        return True  # two empty sets: Jaccard 1
    return bool(np.intersect1d(prefix_a, prefix_b, assume_unique=True).size)
