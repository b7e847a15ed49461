"""The pair rule: when two documents are duplicates, and why (pure Python).

One rule, used by the hot-bucket forests (``transforms.hot_buckets``) and the online check
(``index.check``); its Spark twin (``transforms.verify.reason_column`` and friends) is tested to agree with
it on random inputs (tests/test_rules.py). A pair of documents is a duplicate when

1. its Hamming distance is within the k of the pair (``ThresholdPolicy``: by the shorter document's
   length), or — with ``match.sketch_bands`` — its sketches share a band (``core.sketch_bands``),
2. with the title rule "and", the two titles (when both have one) are within ``title_max_distance`` bits,
3. and, with a text check, it is within ``verify.accept_distance`` bits (and its k) or its texts'
   similarity reaches ``verify.min_similarity``: a pair beyond its k is only ever accepted by the check.

Its reason: ``identical_fingerprint`` for the same fingerprint and (with a text check) the same text,
``fingerprint`` when accepted without a check, ``verified`` when the check passed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simhash_spark.core.normalize import NormalizeOptions
from simhash_spark.core.shingles import SHORT_TEXTS_OFF, ShortTextOptions
from simhash_spark.core.verify import (
    FINGERPRINT,
    IDENTICAL,
    VERIFIED,
    ThresholdPolicy,
    VerifyOptions,
    similarities,
    similarity,
)


@dataclass(frozen=True)
class PairRule:
    policy: ThresholdPolicy
    verify: VerifyOptions
    norm: NormalizeOptions
    title_max_distance: int | None = None  # title rule "and"; None: titles are not compared
    short: ShortTextOptions = SHORT_TEXTS_OFF

    @property
    def largest_k(self) -> int:
        return self.policy.largest

    def k(self, n_chars_a: int, n_chars_b: int) -> int:
        return self.policy.k_for_length(min(n_chars_a, n_chars_b))

    def titles_agree(self, title_distance: int | None) -> bool:
        """``title_distance``: None when either document has no title (then titles do not decide)."""
        return (
            self.title_max_distance is None
            or title_distance is None
            or title_distance <= self.title_max_distance
        )

    def needs_text_check(self, distance: int, *, within_k: bool = True) -> bool:
        """``within_k``: the distance is within the pair's k (a pair beyond it came by a shared sketch
        band, and only the check accepts it)."""
        return self.verify.enabled and (distance > self.verify.accept_distance or not within_k)

    def similarity(self, text_a: str, text_b: str) -> float:
        return similarity(text_a, text_b, self.verify, self.norm, self.short)

    def similarities(self, texts_a: Sequence[str | None], texts_b: Sequence[str | None]) -> np.ndarray:
        """``similarity`` of each pair (0 where a text is missing), a batch at a time."""
        return similarities(texts_a, texts_b, self.verify, self.norm, self.short)

    def reason(
        self,
        distance: int,
        n_chars_a: int,
        n_chars_b: int,
        *,
        same_text: bool = False,
        similarity: float | None = None,
        title_distance: int | None = None,
        shares_band: bool = False,
    ) -> str | None:
        """Why the pair is a duplicate, or None. ``similarity`` is needed only when ``needs_text_check``;
        ``shares_band``: the two sketches share a band (``core.sketch_bands``)."""
        within_k = distance <= self.k(n_chars_a, n_chars_b)
        if not (within_k or shares_band) or not self.titles_agree(title_distance):
            return None
        if distance == 0 and (same_text or not self.verify.enabled):
            return IDENTICAL
        if not self.verify.enabled:
            return FINGERPRINT if within_k else None
        if not self.needs_text_check(distance, within_k=within_k):
            return FINGERPRINT
        if similarity is None:
            raise ValueError("this pair needs its texts' similarity")
        return VERIFIED if similarity >= self.verify.min_similarity else None
