"""Character shingles and the set measures built on them (pure Python).

Shingles are taken over the normalized text with every non-word character removed (whitespace,
punctuation, symbols), so reformatting a reprint does not change them. The same shingles serve as
SimHash features (``features.mode = "char_ngram"``), as the second-tier check of candidate pairs, and as
the quality benchmark's ground truth.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise

import numpy as np

from simhash_spark.core.mix64 import mix64_codepoints, ngram_hashes

_NON_WORD = re.compile(r"[\W_]+")


def compact(text: str) -> str:
    """The text's letters, digits and ideographs, in order."""
    return _NON_WORD.sub("", text)


@lru_cache(maxsize=1)
def _kept() -> np.ndarray:
    """For every code point, whether ``compact`` keeps it: the very pattern run once over a string of all
    code points (one C-level scan), so the two cannot disagree."""
    everything = np.arange(sys.maxunicode + 1, dtype=np.uint32).tobytes().decode("utf-32-le", "surrogatepass")
    table = np.zeros(sys.maxunicode + 1, dtype=bool)
    table[_utf32(compact(everything))] = True
    table.setflags(write=False)
    return table


def _utf32(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def compact_codepoints(text: str) -> np.ndarray:
    """The code points of ``compact(text)`` (uint64), by table lookup: a regex substitution tests each
    character's class one by one, which was a large part of fingerprinting a document."""
    cps = _utf32(text)
    return cps[_kept()[cps]].astype(np.uint64)


def letters(text: str) -> int:
    """How many letters, digits and ideographs the text has (punctuation, symbols and spaces not counted):
    the length every length rule uses."""
    return len(compact_codepoints(text))


@dataclass(frozen=True)
class ShortTextOptions:
    """Short-text mode: a text of fewer than ``below_letters`` letters is fingerprinted on character
    ``ngram_size``-grams, and a pair whose shorter text is such a text is checked on the same n (a pair of
    a short and a long text therefore on the short n: the n its shorter text was fingerprinted with).
    ``below_letters = 0``: off."""

    below_letters: int = 0
    ngram_size: int = 2

    def is_short(self, n_letters: int) -> bool:
        return n_letters < self.below_letters


SHORT_TEXTS_OFF = ShortTextOptions()


def char_shingles(text: str, n: int) -> set[str]:
    """Distinct character n-grams of ``compact(text)``; a text shorter than n is its own single shingle."""
    s = compact(text)
    if len(s) <= n:
        return {s} if s else set()
    return {s[i : i + n] for i in range(len(s) - n + 1)}


def char_ngram_hashes(text: str, n: int, *, binary: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """``char_ngrams`` hashed with mix64, computed on the code point array at once: (uint64 hashes,
    float64 weights), the same multiset as hashing ``char_ngrams``' features one by one (distinct
    n-grams are told apart by their hashes)."""
    return codepoint_ngram_hashes(compact_codepoints(text), n, binary=binary)


def codepoint_ngram_hashes(cps: np.ndarray, n: int, *, binary: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """``char_ngram_hashes`` of the text whose ``compact_codepoints`` are ``cps``."""
    if not len(cps):
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.float64)
    if len(cps) <= n:
        return np.array([mix64_codepoints(cps)], dtype=np.uint64), np.ones(1, dtype=np.float64)
    # sort + neighbour test: np.unique (numpy 2) is ~10x slower on arrays of a few hundred values
    distinct, weights, _ = _distinct_runs(np.sort(ngram_hashes(cps, n)), _ONE_RUN, binary)
    return distinct, weights


_ONE_RUN = np.zeros(1, dtype=np.int64)


def _distinct_runs(
    ordered: np.ndarray, starts: np.ndarray, binary: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Of hashes sorted within runs (one per text, starting at ``starts``): each run's distinct hashes, in
    order, their weights (1, or how often the hash occurs in its run) and the flags of the first
    occurrences."""
    first = np.empty(len(ordered), dtype=bool)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    first[starts] = True  # a text's smallest hash is distinct within it, whatever the text before held
    distinct = ordered[first]
    if binary:
        return distinct, np.ones(len(distinct), dtype=np.float64), first
    counts = np.diff(np.append(np.flatnonzero(first), len(ordered)))
    return distinct, counts.astype(np.float64), first


# Code points hashed in one numpy pass by ``codepoint_ngram_hashes_many``: large enough that numpy's
# per-call overhead vanishes, small enough that a batch of long documents stays a few tens of MB.
_CHUNK_CODEPOINTS = 1 << 20


def codepoint_ngram_hashes_many(
    kept: Sequence[np.ndarray], n: int, *, binary: bool = True
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``codepoint_ngram_hashes`` of each of many texts, in order (``run_ngram_hashes`` over the texts'
    code points back to back)."""
    out = {i: codepoint_ngram_hashes(c, n, binary=binary) for i, c in enumerate(kept) if len(c) <= n}
    longer = [i for i, c in enumerate(kept) if len(c) > n]
    if longer:
        lengths = np.array([len(kept[i]) for i in longer], dtype=np.int64)
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        runs = run_ngram_hashes(np.concatenate([kept[i] for i in longer]), starts, lengths, n, binary=binary)
        ends = np.cumsum(runs.counts).tolist()
        for i, a, b in zip(longer, [0, *ends[:-1]], ends, strict=True):
            out[i] = (runs.hashes[a:b], runs.weights[a:b])
    return [out[i] for i in range(len(kept))]


@dataclass(frozen=True)
class RunHashes:
    """The distinct n-gram hashes of many texts back to back: each text's sorted ascending."""

    hashes: np.ndarray  # uint64
    weights: np.ndarray  # float64: 1, or how often the n-gram occurs in its text
    counts: np.ndarray  # int64 per text: how many of ``hashes`` are its


def run_ngram_hashes(
    letters: np.ndarray, starts: np.ndarray, lengths: np.ndarray, n: int, *, binary: bool = True
) -> RunHashes:
    """``codepoint_ngram_hashes`` of the texts ``letters[starts[i] : starts[i] + lengths[i]]`` (each longer
    than n; in ascending order, not overlapping), a chunk of about ``_CHUNK_CODEPOINTS`` code points at a
    time: a batch of documents pays numpy's per-call overhead once per chunk, not once per document."""
    parts = [RunHashes(np.zeros(0, np.uint64), np.zeros(0, np.float64), np.zeros(0, np.int64))]
    ends = np.cumsum(lengths)
    first = 0
    while first < len(lengths):
        before = int(ends[first - 1]) if first else 0
        stop = max(first + 1, int(np.searchsorted(ends, before + _CHUNK_CODEPOINTS, side="right")))
        parts.append(_hash_runs(letters, starts[first:stop], lengths[first:stop], n, binary))
        first = stop
    if len(parts) <= 2:
        return parts[-1]
    return RunHashes(
        np.concatenate([p.hashes for p in parts], dtype=np.uint64),
        np.concatenate([p.weights for p in parts], dtype=np.float64),
        np.concatenate([p.counts for p in parts], dtype=np.int64),
    )


def _hash_runs(
    letters: np.ndarray, starts: np.ndarray, lengths: np.ndarray, n: int, binary: bool
) -> RunHashes:
    """``run_ngram_hashes`` of one chunk: one rolling hash over the span the texts lie in, each text's
    windows gathered from it (those straddling two texts, or covering what lies between, left out), then
    sorted text by text."""
    low = int(starts[0])
    hashes = ngram_hashes(letters[low : int(starts[-1] + lengths[-1])], n)
    windows = lengths - n + 1
    bounds = np.concatenate(([0], np.cumsum(windows)))
    # window j of text i lies at starts[i] - low + j: every text's positions in one arange, shifted per text
    ordered = hashes[np.arange(bounds[-1]) + np.repeat(starts - low - bounds[:-1], windows)]
    edges = bounds.tolist()
    for a, b in pairwise(edges):
        ordered[a:b].sort()
    distinct, weights, first = _distinct_runs(ordered, bounds[:-1], binary)
    return RunHashes(distinct, weights, np.add.reduceat(first, bounds[:-1], dtype=np.int64))


def jaccard(a: set[str] | frozenset[str], b: set[str] | frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def shingle_jaccard(text_a: str, text_b: str, n: int) -> float:
    """Exact Jaccard similarity of the two texts' character n-gram sets."""
    return jaccard(char_shingles(text_a, n), char_shingles(text_b, n))


def hashed_jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Jaccard of two sets given as sorted arrays of distinct hashes (``char_ngram_hashes``)."""
    if len(a) > len(b):
        a, b = b, a
    if not len(a):
        return 0.0 if len(b) else 1.0
    # each hash of the shorter set looked up in the longer: no sort of the two sets together
    at = np.searchsorted(b, a)
    np.minimum(at, len(b) - 1, out=at)
    inter = int(np.count_nonzero(b[at] == a))
    return inter / (len(a) + len(b) - inter)


def edit_similarity(text_a: str, text_b: str) -> float:
    """1 - Levenshtein distance / length of the longer compact text (1.0 = identical)."""
    from rapidfuzz.distance import Levenshtein

    return float(Levenshtein.normalized_similarity(compact(text_a), compact(text_b)))
