"""Character shingles and the set measures built on them (pure Python).

Shingles are taken over the normalized text with every non-word character removed (whitespace,
punctuation, symbols), so reformatting a reprint does not change them. The same shingles serve as
SimHash features (``features.mode = "char_ngram"``), as the second-tier check of candidate pairs, and as
the quality benchmark's ground truth.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from simhash_spark.core.mix64 import codepoints, mix64, ngram_hashes

_NON_WORD = re.compile(r"[\W_]+")


def compact(text: str) -> str:
    """The text's letters, digits and ideographs, in order."""
    return _NON_WORD.sub("", text)


def letters(text: str) -> int:
    """How many letters, digits and ideographs the text has (punctuation, symbols and spaces not counted):
    the length every length rule uses."""
    return len(compact(text))


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
    s = compact(text)
    if not s:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.float64)
    if len(s) <= n:
        return np.array([mix64(s)], dtype=np.uint64), np.ones(1, dtype=np.float64)
    # sort + neighbour test: np.unique (numpy 2) is ~10x slower on arrays of a few hundred values
    hashes = np.sort(ngram_hashes(codepoints(s), n))
    first = np.empty(len(hashes), dtype=bool)
    first[0] = True
    np.not_equal(hashes[1:], hashes[:-1], out=first[1:])
    distinct = hashes[first]
    if binary:
        return distinct, np.ones(len(distinct), dtype=np.float64)
    counts = np.diff(np.append(np.flatnonzero(first), len(hashes)))
    return distinct, counts.astype(np.float64)


def jaccard(a: set[str] | frozenset[str], b: set[str] | frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def shingle_jaccard(text_a: str, text_b: str, n: int) -> float:
    """Exact Jaccard similarity of the two texts' character n-gram sets."""
    return jaccard(char_shingles(text_a, n), char_shingles(text_b, n))


def hashed_jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Jaccard of two sets given as arrays of distinct hashes (``char_ngram_hashes``)."""
    if not len(a) and not len(b):
        return 1.0
    both = np.sort(np.concatenate((a, b)))
    inter = int(np.count_nonzero(both[1:] == both[:-1]))
    return inter / (len(a) + len(b) - inter)


def edit_similarity(text_a: str, text_b: str) -> float:
    """1 - Levenshtein distance / length of the longer compact text (1.0 = identical)."""
    from rapidfuzz.distance import Levenshtein

    return float(Levenshtein.normalized_similarity(compact(text_a), compact(text_b)))
