"""From raw texts to fingerprints and per-row statuses, one batch at a time (pure Python + numpy)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import xxhash

from simhash_spark.core.features import FeatureExtractor, FeatureOptions
from simhash_spark.core.hashing import hash_many
from simhash_spark.core.normalize import NormalizeOptions, normalize
from simhash_spark.core.shingles import char_ngram_hashes
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
# Incremental runs: the index already holds this id (from an earlier run date); not linked or appended again.
ALREADY_INDEXED = "already_indexed"
STATUSES = (OK, TRUNCATED, INVALID_UTF8, NULL_TEXT, EMPTY, TOO_SHORT, NO_FEATURES, ALREADY_INDEXED)
FINGERPRINTED = (OK, TRUNCATED, INVALID_UTF8)


@dataclass(frozen=True)
class FingerprintOptions:
    hash: str = "mix64"
    min_chars: int = 1
    memo_size: int = 100_000


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
    """Per-process fingerprinting state: build once, call ``batch`` for every Arrow batch.

    Exact duplicates (identical text after normalization) are segmented once per process: a bounded
    memo maps the normalized text's 128-bit hash to its fingerprint, so boilerplate repeated across a
    corpus costs one jieba pass per worker instead of one per copy. Results are the same either way.
    """

    def __init__(self, model: ModelOptions) -> None:
        self.model = model
        self.extractor = FeatureExtractor(model.features, model.tokenizer)
        self._memo: OrderedDict[bytes, tuple[int, int]] = OrderedDict()  # key -> (fingerprint, n_features)
        feats = model.features
        # char n-grams hashed with mix64: every n-gram of a document in a few numpy operations
        self._vectorized = feats.mode == "char_ngram" and model.fingerprint.hash == "mix64"

    def _remember(self, key: bytes, value: tuple[int, int]) -> None:
        self._memo[key] = value
        if len(self._memo) > self.model.fingerprint.memo_size:
            self._memo.popitem(last=False)

    def hashed_features(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """(uint64 feature hashes, float64 weights) of one normalized text."""
        if self._vectorized:
            opts = self.model.features
            return char_ngram_hashes(text, opts.ngram_size, binary=opts.shingle_weights == "binary")
        feats = self.extractor.extract(text)
        return (
            hash_many([f for f, _ in feats], self.model.fingerprint.hash),
            np.array([w for _, w in feats], dtype=np.float64),
        )

    def batch(self, texts: Sequence[str | None]) -> FingerprintBatch:
        n = len(texts)
        statuses: list[str] = [OK] * n
        n_chars = np.zeros(n, dtype=np.int64)
        counts = np.zeros(n, dtype=np.int64)
        out = np.zeros(n, dtype=np.uint64)
        hash_parts: list[np.ndarray] = []  # per computed document: its feature hashes and weights
        weight_parts: list[np.ndarray] = []
        fresh: list[tuple[int, bytes]] = []  # rows computed in this batch, to memoize afterwards
        pending: dict[bytes, int] = {}  # key -> row computed in this batch
        copies: list[tuple[int, int, bool]] = []  # (row, row it copies, truncated)
        norm_opts = self.model.normalize
        min_chars = self.model.fingerprint.min_chars
        use_memo = self.model.fingerprint.memo_size > 0
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
            key = b""
            if use_memo:
                key = xxhash.xxh3_128_digest(norm.text.encode("utf-8", "surrogatepass"))
                hit = self._memo.get(key)
                if hit is not None:
                    self._memo.move_to_end(key)
                    out[i], n_feats = hit
                    if not n_feats:
                        statuses[i] = NO_FEATURES
                    elif norm.truncated:
                        statuses[i] = TRUNCATED
                    counts[i] = n_feats
                    continue
                if key in pending:
                    copies.append((i, pending[key], norm.truncated))
                    continue
                pending[key] = i
            if use_memo:
                fresh.append((i, key))
            h, w = self.hashed_features(norm.text)
            hash_parts.append(h)
            weight_parts.append(w)
            counts[i] = len(h)
            if not counts[i]:
                statuses[i] = NO_FEATURES
                continue
            if norm.truncated:
                statuses[i] = TRUNCATED
        computed = np.array([i for i, _ in fresh], dtype=np.int64) if use_memo else None
        hashes = np.concatenate(hash_parts) if hash_parts else np.zeros(0, dtype=np.uint64)
        vote_weights = np.concatenate(weight_parts) if weight_parts else np.zeros(0, dtype=np.float64)
        # rows served from the memo contribute no features here: give them a zero count for the vote
        vote_counts = counts.copy()
        if use_memo:
            mask = np.ones(n, dtype=bool)
            mask[computed] = False
            vote_counts[mask] = 0
        fps = simhash_batch(hashes, vote_weights, vote_counts)
        fresh_rows = vote_counts > 0
        out[fresh_rows] = fps[fresh_rows]
        for i, key in fresh:
            self._remember(key, (int(out[i]), int(counts[i])))
        for i, src, truncated in copies:
            out[i], counts[i] = out[src], counts[src]
            statuses[i] = NO_FEATURES if not counts[i] else (TRUNCATED if truncated else OK)
        return FingerprintBatch(
            fingerprint=to_signed(out),
            has_fingerprint=counts > 0,
            status=statuses,
            n_chars=n_chars,
            n_features=counts,
        )
