"""From raw texts to fingerprints and per-row statuses, one batch at a time (pure Python + numpy)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from simhash_spark.core.features import FeatureExtractor, FeatureOptions
from simhash_spark.core.hashing import hash_many
from simhash_spark.core.normalize import NormalizeOptions, normalize
from simhash_spark.core.simhash import simhash_batch, to_signed
from simhash_spark.core.tokenize import TokenizerOptions

# Row statuses. Only FINGERPRINTED statuses carry a fingerprint and enter the candidate join.
OK = "ok"
TRUNCATED = "truncated"  # longer than normalize.max_chars: fingerprinted on its first max_chars characters
NULL_TEXT = "null_text"  # every text column is null
EMPTY = "empty"  # nothing left after normalization (blank, markup only, control characters only)
TOO_SHORT = "too_short"  # fewer than fingerprint.min_chars characters after normalization
NO_FEATURES = "no_features"  # text left, but no feature survived (only stop words, punctuation, ...)
# Set by the Spark stage, which sees the raw bytes: invalid UTF-8 sequences were replaced by U+FFFD and
# the document fingerprinted.
INVALID_UTF8 = "invalid_utf8"
STATUSES = (OK, TRUNCATED, INVALID_UTF8, NULL_TEXT, EMPTY, TOO_SHORT, NO_FEATURES)
FINGERPRINTED = (OK, TRUNCATED, INVALID_UTF8)


@dataclass(frozen=True)
class FingerprintOptions:
    hash: str = "xxh64"
    min_chars: int = 1


@dataclass(frozen=True)
class ModelOptions:
    """Everything that decides a document's fingerprint."""

    normalize: NormalizeOptions = field(default_factory=NormalizeOptions)
    tokenizer: TokenizerOptions = field(default_factory=TokenizerOptions)
    features: FeatureOptions = field(default_factory=FeatureOptions)
    fingerprint: FingerprintOptions = field(default_factory=FingerprintOptions)


@dataclass(frozen=True)
class FingerprintBatch:
    fingerprint: np.ndarray  # int64 (two's-complement view); meaningful only where has_fingerprint
    has_fingerprint: np.ndarray  # bool
    status: list[str]
    n_chars: np.ndarray  # int64 characters after normalization (0 for null text)
    n_features: np.ndarray  # int64


class Fingerprinter:
    """Per-process fingerprinting state: build once, call ``batch`` for every Arrow batch."""

    def __init__(self, model: ModelOptions) -> None:
        self.model = model
        self.extractor = FeatureExtractor(model.features, model.tokenizer)

    def batch(self, texts: Sequence[str | None]) -> FingerprintBatch:
        n = len(texts)
        statuses: list[str] = [OK] * n
        n_chars = np.zeros(n, dtype=np.int64)
        counts = np.zeros(n, dtype=np.int64)
        features: list[str] = []
        weights: list[float] = []
        norm_opts = self.model.normalize
        min_chars = self.model.fingerprint.min_chars
        for i, raw in enumerate(texts):
            if raw is None:
                statuses[i] = NULL_TEXT
                continue
            norm = normalize(raw, norm_opts)
            n_chars[i] = len(norm.text)
            if not norm.text:
                statuses[i] = EMPTY
                continue
            if len(norm.text) < min_chars:
                statuses[i] = TOO_SHORT
                continue
            feats = self.extractor.extract(norm.text)
            if not feats:
                statuses[i] = NO_FEATURES
                continue
            if norm.truncated:
                statuses[i] = TRUNCATED
            counts[i] = len(feats)
            for f, w in feats:
                features.append(f)
                weights.append(w)
        hashes = hash_many(features, self.model.fingerprint.hash)
        fps = simhash_batch(hashes, np.asarray(weights, dtype=np.float64), counts)
        return FingerprintBatch(
            fingerprint=to_signed(fps),
            has_fingerprint=counts > 0,
            status=statuses,
            n_chars=n_chars,
            n_features=counts,
        )
