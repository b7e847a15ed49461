"""Character shingles and the set measures built on them (pure Python).

Shingles are taken over the normalized text with every non-word character removed (whitespace,
punctuation, symbols), so reformatting a reprint does not change them. The same shingles serve as
SimHash features (``features.mode = "char_ngram"``), as the second-tier check of candidate pairs, and as
the quality benchmark's ground truth.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Sequence
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
    """``codepoint_ngram_hashes`` of each of many texts, in order: the texts' code points back to back,
    hashed a chunk at a time, so a batch of documents pays numpy's per-call overhead once per chunk
    instead of once per document and step."""
    out = {i: codepoint_ngram_hashes(c, n, binary=binary) for i, c in enumerate(kept) if len(c) <= n}
    chunk: list[int] = []
    size = 0
    for i in (i for i, c in enumerate(kept) if len(c) > n):
        if chunk and size + len(kept[i]) > _CHUNK_CODEPOINTS:
            out.update(_hash_chunk([kept[j] for j in chunk], chunk, n, binary))
            chunk, size = [], 0
        chunk.append(i)
        size += len(kept[i])
    if chunk:
        out.update(_hash_chunk([kept[j] for j in chunk], chunk, n, binary))
    return [out[i] for i in range(len(kept))]


def _hash_chunk(
    texts: list[np.ndarray], rows: list[int], n: int, binary: bool
) -> Iterator[tuple[int, tuple[np.ndarray, np.ndarray]]]:
    """(row, ``codepoint_ngram_hashes``) of each of ``texts`` (code points, each longer than n; ``rows``
    their positions): one rolling hash over their concatenation, the windows that straddle two texts
    dropped, then each text's sorted distinct hashes."""
    lengths = np.array([len(t) for t in texts], dtype=np.int64)
    hashes = ngram_hashes(np.concatenate(texts), n)
    ends = np.cumsum(lengths)
    keep = np.ones(len(hashes), dtype=bool)
    keep[(ends[:-1, None] + np.arange(1 - n, 0)[None, :]).ravel()] = False
    windows = lengths - n + 1
    bounds = np.concatenate(([0], np.cumsum(windows))).tolist()
    kept = hashes[keep]
    ordered = np.concatenate([np.sort(kept[a:b]) for a, b in pairwise(bounds)])
    distinct, weights, first = _distinct_runs(ordered, np.array(bounds[:-1], dtype=np.int64), binary)
    ends = np.cumsum(np.add.reduceat(first, bounds[:-1], dtype=np.int64)).tolist()
    for row, a, b in zip(rows, [0, *ends[:-1]], ends, strict=True):
        yield row, (distinct[a:b], weights[a:b])


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
