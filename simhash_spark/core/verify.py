"""The second tier: candidate pairs within k bits are kept only if their texts are similar enough, and
the threshold policy that decides k per pair (pure Python).

SimHash distance alone cannot separate near-duplicates (character 5-gram Jaccard >= 0.8) from merely
related texts (0.6-0.8): both sit around 8-12 bits (see docs/quality.md). So the band join collects
candidates up to a wide k, and this module decides with an exact measure over the two normalized texts:

- ``char_jaccard``: Jaccard of the character n-gram sets (``verify.ngram_size``; compared as sets of
  64-bit n-gram hashes),
- ``edit``: 1 - Levenshtein distance / longer length, for short texts (comments, titles),
- ``none``: every pair within k is a duplicate (the original method).

Pairs within ``accept_distance`` bits are accepted without a check (identical fingerprints always are).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simhash_spark.core.batch_text import normalized_letters
from simhash_spark.core.normalize import NormalizeOptions, normalize
from simhash_spark.core.shingles import (
    SHORT_TEXTS_OFF,
    ShortTextOptions,
    codepoint_ngram_hashes,
    codepoint_ngram_hashes_many,
    compact_codepoints,
    edit_similarity,
    hashed_jaccard,
)

MEASURES = ("char_jaccard", "edit", "none")

# pairs/ reason values
IDENTICAL = "identical_fingerprint"
FINGERPRINT = "fingerprint"  # within accept_distance (or measure = "none"): not checked
VERIFIED = "verified"  # checked by the measure and passed
BY_TITLE = "title"  # title rule "or": the titles' fingerprints are within title.max_distance bits


@dataclass(frozen=True)
class VerifyOptions:
    measure: str = "char_jaccard"
    min_similarity: float = 0.8
    ngram_size: int = 5
    accept_distance: int = 0
    prefix_filter: bool = False  # core.prefix_filter: pairs whose n-gram prefixes do not meet are not read
    sketch_filter: bool = True  # core.sketch_filter: pairs whose sketches barely agree are not read

    @property
    def enabled(self) -> bool:
        return self.measure != "none"


def similarity(
    text_a: str,
    text_b: str,
    opts: VerifyOptions,
    norm: NormalizeOptions,
    short: ShortTextOptions = SHORT_TEXTS_OFF,
) -> float:
    """The configured measure over the two texts as the job normalizes them; n-gram Jaccard on the short-text
    n when the shorter text is a short text (``short``), else on ``verify.ngram_size``."""
    a, b = normalize(text_a, norm).text, normalize(text_b, norm).text
    if opts.measure == "edit":
        return edit_similarity(a, b)
    # over 64-bit hashes of the distinct n-grams (numpy, ~4x faster than sets of strings); equal to the
    # Jaccard of the n-gram sets unless two distinct n-grams of the pair collide (~1e-13)
    n = opts.ngram_size
    cps_a, cps_b = compact_codepoints(a), compact_codepoints(b)
    # the letters are the compact code points (shingles.letters): counted once, hashed from the same arrays
    if short.is_short(min(len(cps_a), len(cps_b))):
        n = short.ngram_size
    return hashed_jaccard(codepoint_ngram_hashes(cps_a, n)[0], codepoint_ngram_hashes(cps_b, n)[0])


def similarities(
    texts_a: Sequence[str | None],
    texts_b: Sequence[str | None],
    opts: VerifyOptions,
    norm: NormalizeOptions,
    short: ShortTextOptions = SHORT_TEXTS_OFF,
) -> np.ndarray:
    """Element-wise ``similarity``; a missing text scores 0. With ``char_jaccard`` the texts are normalized
    a batch at a time (``core.batch_text``) and the n-grams of all texts of one n hashed together."""
    out = np.zeros(len(texts_a), dtype=np.float64)
    present = [
        i for i, (a, b) in enumerate(zip(texts_a, texts_b, strict=True)) if a is not None and b is not None
    ]
    if opts.measure != "char_jaccard":
        for i in present:
            out[i] = similarity(texts_a[i] or "", texts_b[i] or "", opts, norm, short)
        return out
    letters_a = normalized_letters([texts_a[i] or "" for i in present], norm)
    letters_b = normalized_letters([texts_b[i] or "" for i in present], norm)
    sizes = np.array(
        [
            short.ngram_size if short.is_short(min(len(a), len(b))) else opts.ngram_size
            for a, b in zip(letters_a, letters_b, strict=True)
        ],
        dtype=np.int64,
    )
    for n in np.unique(sizes).tolist():
        chosen = np.flatnonzero(sizes == n).tolist()
        hashed = codepoint_ngram_hashes_many(
            [letters_a[j] for j in chosen] + [letters_b[j] for j in chosen], n
        )
        for j, (ha, _), (hb, _) in zip(chosen, hashed[: len(chosen)], hashed[len(chosen) :], strict=True):
            out[present[j]] = hashed_jaccard(ha, hb)
    return out


@dataclass(frozen=True)
class ThresholdPolicy:
    """k for a pair: ``max_distance``, or by the length (letters of the normalized text: ``shingles.letters``,
    the documents' n_chars) of the pair's shorter document through ``steps`` — (from_letters, k) sorted by
    from_letters; a document shorter than the first step uses ``max_distance``. The band join is built for
    ``largest``."""

    max_distance: int
    steps: tuple[tuple[int, int], ...] = ()

    @property
    def largest(self) -> int:
        return max([self.max_distance, *(k for _, k in self.steps)])

    def k_for_length(self, n_chars: int) -> int:
        k = self.max_distance
        for start, step_k in self.steps:
            if n_chars >= start:
                k = step_k
        return k


def parse_steps(value: object) -> tuple[tuple[int, int], ...]:
    """``[[0, 5], [100, 3], [2000, 2]]`` → validated, sorted steps; raises ValueError naming the problem."""
    if not isinstance(value, list | tuple):
        raise ValueError("expected a list of [from_chars, k] pairs")
    steps = []
    for item in value:
        if (
            not isinstance(item, list | tuple)
            or len(item) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in item)
        ):
            raise ValueError(f"expected [from_chars, k] with non-negative integers, got {item!r}")
        steps.append((int(item[0]), int(item[1])))
    starts = [s for s, _ in steps]
    if starts != sorted(starts) or len(set(starts)) != len(starts):
        raise ValueError("from_chars must be strictly increasing")
    return tuple(steps)
