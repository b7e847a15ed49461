"""``fingerprint.hash = "mix64"``: a 64-bit string hash that numpy can compute for every character
n-gram of a text at once (pure numpy).

mix64(s) = fmix64(len(s)·G + Σ_j codepoint(s[j])·K_j mod 2^64), with K_j odd constants from a fixed
splitmix64 sequence and fmix64 MurmurHash3's 64-bit finalizer. The linear part tells apart any two strings
whose code points differ (the K_j are random 64-bit multipliers; code points are below 2^21); the finalizer
spreads every input bit over all 64 output bits, which the bit vote of SimHash needs. Hashing a document's
n-grams is then n multiply-adds over its code point array instead of one xxh64 call per n-gram, which was
most of the fingerprint stage's time for ``char_ngram`` features.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

_G = np.uint64(0x9E3779B97F4A7C15)
_C1 = np.uint64(0xFF51AFD7ED558CCD)
_C2 = np.uint64(0xC4CEB9FE1A85EC53)
_SEED = 0x6D69_7836_34  # "mix64"
_M64 = (1 << 64) - 1


def _splitmix64(state: int) -> tuple[int, int]:
    state = (state + 0x9E3779B97F4A7C15) & _M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return state, z ^ (z >> 31)


@lru_cache(maxsize=64)
def _multipliers(n: int) -> np.ndarray:
    """K_0 .. K_{n-1}: the same prefix whatever n (each K_j depends on j alone)."""
    out, state = [], _SEED
    for _ in range(n):
        state, z = _splitmix64(state)
        out.append(z | 1)
    arr = np.array(out, dtype=np.uint64)
    arr.setflags(write=False)
    return arr


def _fmix64(h: np.ndarray) -> np.ndarray:
    out = np.array(h, dtype=np.uint64)  # a copy: the callers' values stay as they were
    _fmix64_in_place(out, np.empty_like(out))
    return out


def _fmix64_in_place(h: np.ndarray, scratch: np.ndarray) -> None:
    """MurmurHash3's 64-bit finalizer over ``h`` itself (``scratch``: an array of its shape)."""
    shift = np.uint64(33)
    with np.errstate(over="ignore"):
        for c in (_C1, _C2):
            np.right_shift(h, shift, out=scratch)
            h ^= scratch
            h *= c
        np.right_shift(h, shift, out=scratch)
        h ^= scratch


def scramble(values: np.ndarray) -> np.ndarray:
    """Each uint64 (or int64) value's bits mixed (murmur3's finalizer): a hash of a number, for choosing a
    deterministic sample of values whatever their order."""
    u = values.view(np.uint64) if values.dtype == np.int64 else values.astype(np.uint64)
    return _fmix64(u)


def codepoints(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).astype(np.uint64)


def mix64(text: str) -> int:
    """The hash of one string (any length)."""
    return mix64_codepoints(codepoints(text))


def mix64_codepoints(cps: np.ndarray) -> int:
    """``mix64`` of the string whose code points (uint64) are ``cps``."""
    k = _multipliers(max(1, len(cps)))[: len(cps)]
    with np.errstate(over="ignore"):
        h = np.uint64(len(cps)) * _G + np.sum(cps * k, dtype=np.uint64)
        return int(_fmix64(np.array([h], dtype=np.uint64))[0])


def mix64_many(texts: Sequence[str]) -> np.ndarray:
    """``[mix64(t) for t in texts]`` as uint64, in a few numpy operations over all their code points."""
    if not texts:
        return np.zeros(0, dtype=np.uint64)
    cps = codepoints("".join(texts))
    lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    starts = np.cumsum(lengths) - lengths
    position = np.arange(len(cps), dtype=np.int64) - np.repeat(starts, lengths)
    k = _multipliers(max(1, int(lengths.max())))
    with np.errstate(over="ignore"):
        products = np.append(cps * k[position], np.uint64(0))  # a trailing 0: reduceat of empty texts
        sums = np.add.reduceat(products, np.minimum(starts, len(cps)), dtype=np.uint64)
        sums[lengths == 0] = 0
        return _fmix64(lengths.astype(np.uint64) * _G + sums)


# Windows hashed at a time by ``ngram_hashes``: its arrays then stay in the core's cache through the ~15
# passes over them, where whole-text arrays would go to memory and back on each.
_BLOCK = 1 << 15


def ngram_hashes(cps: np.ndarray, n: int) -> np.ndarray:
    """mix64 of every n-character window of the code points ``cps`` (uint64), in order: equal to
    ``[mix64(s[i:i+n]) for i in ...]`` for the string s they came from. Needs len(cps) >= n."""
    k = _multipliers(n)
    windows = len(cps) - n + 1
    out = np.empty(windows, dtype=np.uint64)
    term = np.empty(min(_BLOCK, windows), dtype=np.uint64)
    with np.errstate(over="ignore"):
        length_term = np.uint64(n) * _G
        for a in range(0, windows, _BLOCK):
            b = min(windows, a + _BLOCK)
            h, t = out[a:b], term[: b - a]
            np.multiply(cps[a:b], k[0], out=h)
            for j in range(1, n):
                np.multiply(cps[a + j : b + j], k[j], out=t)
                h += t
            h += length_term
            _fmix64_in_place(h, t)
    return out
