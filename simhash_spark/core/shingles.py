"""Character shingles and the set measures built on them (pure Python).

Shingles are taken over the normalized text with every non-word character removed (whitespace,
punctuation, symbols), so reformatting a reprint does not change them. The same shingles serve as
SimHash features (``features.mode = "char_ngram"``), as the second-tier check of candidate pairs, and as
the quality benchmark's ground truth.
"""

from __future__ import annotations

import re

_NON_WORD = re.compile(r"[\W_]+")


def compact(text: str) -> str:
    """The text's letters, digits and ideographs, in order."""
    return _NON_WORD.sub("", text)


def char_shingles(text: str, n: int) -> set[str]:
    """Distinct character n-grams of ``compact(text)``; a text shorter than n is its own single shingle."""
    s = compact(text)
    if len(s) <= n:
        return {s} if s else set()
    return {s[i : i + n] for i in range(len(s) - n + 1)}


def jaccard(a: set[str] | frozenset[str], b: set[str] | frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def shingle_jaccard(text_a: str, text_b: str, n: int) -> float:
    """Exact Jaccard similarity of the two texts' character n-gram sets."""
    return jaccard(char_shingles(text_a, n), char_shingles(text_b, n))


def edit_similarity(text_a: str, text_b: str) -> float:
    """1 - Levenshtein distance / length of the longer compact text (1.0 = identical)."""
    from rapidfuzz.distance import Levenshtein

    return float(Levenshtein.normalized_similarity(compact(text_a), compact(text_b)))
