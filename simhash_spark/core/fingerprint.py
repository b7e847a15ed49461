"""From raw texts to fingerprints and per-row statuses, one batch at a time (pure Python + numpy)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import xxhash

from simhash_spark.core.batch_text import FlatRows, flat_rows
from simhash_spark.core.char_table import CharTable, char_table
from simhash_spark.core.check_filter import CheckFilter, requested
from simhash_spark.core.features import FeatureExtractor, FeatureOptions
from simhash_spark.core.hashing import hash_many
from simhash_spark.core.normalize import NormalizeOptions, normalize
from simhash_spark.core.shingles import (
    ShortTextOptions,
    char_shingles,
    codepoint_ngram_hashes,
    codepoint_ngram_hashes_many,
    compact_codepoints,
    run_ngram_hashes,
)
from simhash_spark.core.simhash import simhash_batch, to_signed
from simhash_spark.core.tokenize import TokenizerOptions
from simhash_spark.core.verify import VerifyOptions

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
    short_texts: ShortTextOptions = field(default_factory=ShortTextOptions)


@dataclass(frozen=True)
class FingerprintBatch:
    fingerprint: np.ndarray  # int64 (two's-complement view); meaningful only where has_fingerprint
    has_fingerprint: np.ndarray  # bool
    status: list[str]
    n_chars: np.ndarray  # int64 letters (shingles.letters) after normalization (0 for null text)
    n_features: np.ndarray  # int64
    # with a check filter: what each row keeps for it (None for a short text or a row without features),
    # else None
    check_summary: list[bytes | None] | None = None


class Fingerprinter:
    """Per-process fingerprinting state: build once, call ``batch`` for every Arrow batch.

    With mix64 character n-grams (the default), the documents ``core.char_table`` can normalize
    character by character are normalized a batch at a time with array operations (``core.batch_text``)
    and, unless short, hashed, voted on and summarized straight from the batch's letters
    (``shingles.run_ngram_hashes``); the others, and every document of the other feature modes, one by
    one.

    Exact duplicates (identical text after normalization) among the documents normalized one by one are
    segmented once per process: a bounded memo maps the normalized text's 128-bit hash to its
    fingerprint, so boilerplate repeated across a corpus costs one jieba pass per worker instead of one
    per copy. Results are the same either way.

    ``check`` (``check_filter`` below: the features are the check's n-grams): each row also gets what the
    text check filters its pairs with (``CheckFilter.summary`` of its feature hashes).
    """

    def __init__(self, model: ModelOptions, check: CheckFilter | None = None) -> None:
        self.model = model
        self.check = check
        self.extractor = FeatureExtractor(model.features, model.tokenizer)
        # key -> (fingerprint, n_features, check summary)
        self._memo: OrderedDict[bytes, tuple[int, int, bytes | None]] = OrderedDict()
        feats = model.features
        # char n-grams hashed with mix64: every n-gram of a document in a few numpy operations
        self._vectorized = feats.mode == "char_ngram" and model.fingerprint.hash == "mix64"
        # and then most documents are normalized a batch at a time (core.batch_text)
        self._table: CharTable | None = (
            char_table(model.normalize) if self._vectorized and model.normalize.variants == "none" else None
        )

    def _remember(self, key: bytes, value: tuple[int, int, bytes | None]) -> None:
        self._memo[key] = value
        if len(self._memo) > self.model.fingerprint.memo_size:
            self._memo.popitem(last=False)

    def hashed_features(
        self, texts: Sequence[str], kept: Sequence[np.ndarray]
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """(uint64 feature hashes, float64 weights) of each normalized text (``kept``: their
        ``compact_codepoints``)."""
        out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        together = []  # mix64 n-grams of texts that are not short: hashed in one pass
        for j, (text, cps) in enumerate(zip(texts, kept, strict=True)):
            if self._vectorized and not self._is_short(len(cps)):
                together.append(j)
            else:
                out[j] = self._features(text, cps)
        if together:
            opts = self.model.features
            many = codepoint_ngram_hashes_many(
                [kept[j] for j in together], opts.ngram_size, binary=opts.shingle_weights == "binary"
            )
            out.update(zip(together, many, strict=True))
        return [out[j] for j in range(len(texts))]

    def _features(self, text: str, kept: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``hashed_features`` of one text that is short, or whose features are not mix64 n-grams."""
        short = self.model.short_texts
        if self._is_short(len(kept)):
            if self.model.fingerprint.hash == "mix64":
                return codepoint_ngram_hashes(kept, short.ngram_size)
            grams = sorted(char_shingles(text, short.ngram_size))
            return hash_many(grams, self.model.fingerprint.hash), np.ones(len(grams), dtype=np.float64)
        feats = self.extractor.extract(text)
        return (
            hash_many([f for f, _ in feats], self.model.fingerprint.hash),
            np.array([w for _, w in feats], dtype=np.float64),
        )

    def _is_short(self, n_letters: int) -> bool:
        short = self.model.short_texts
        return bool(short.below_letters) and short.is_short(n_letters)

    def batch(self, texts: Sequence[str | None]) -> FingerprintBatch:
        state = _BatchState(len(texts))
        use_memo = self.model.fingerprint.memo_size > 0
        if self._table is None:
            for i, raw in enumerate(texts):
                self._one(state, i, raw, use_memo)
            self._hash_queued(state)
            return self._vote(state)
        flat = flat_rows(texts, self._table, self.model.normalize.max_chars, self.model.fingerprint.min_chars)
        state.n_chars[:] = flat.n_letters
        # the rows normalized here whose n-grams are hashed and voted on straight from the flat letters
        together = flat.alone & (flat.n_letters > self.model.features.ngram_size)
        together &= flat.n_letters >= self.model.short_texts.below_letters  # not short (0: none is)
        for i in np.flatnonzero(~together).tolist():
            if flat.alone[i]:  # short, or no longer than an n-gram; no memo: a few array operations
                a, k = int(flat.starts[i]), int(flat.n_letters[i])
                state.queued.append((i, "", flat.letters[a : a + k], False))
            else:
                self._one(state, i, texts[i], use_memo)
        self._hash_queued(state)
        self._hash_together(state, flat, np.flatnonzero(together))
        return self._vote(state)

    def _hash_together(self, st: _BatchState, flat: FlatRows, rows: np.ndarray) -> None:
        """Fingerprints (and check summaries) of ``rows``: rows of ``flat`` longer than the n-gram, not
        short, all hashed and voted on at once."""
        if not len(rows):
            return
        opts = self.model.features
        runs = run_ngram_hashes(
            flat.letters,
            flat.starts[rows],
            flat.n_letters[rows],
            opts.ngram_size,
            binary=opts.shingle_weights == "binary",
        )
        st.out[rows] = simhash_batch(runs.hashes, runs.weights, runs.counts)
        st.counts[rows] = runs.counts
        if self.check is not None:
            for i, summary in zip(
                rows.tolist(), self.check.run_summaries(runs.hashes, runs.counts), strict=True
            ):
                st.summaries[i] = summary

    def _one(self, st: _BatchState, i: int, raw: str | None, use_memo: bool) -> None:
        """Normalize row ``i``; answer it from the memo, or queue it to be hashed for the vote."""
        if raw is None:
            st.statuses[i] = NULL_TEXT
            return
        norm = normalize(raw, self.model.normalize)
        kept = compact_codepoints(norm.text)
        st.n_chars[i] = len(kept)
        if not norm.text:
            st.statuses[i] = EMPTY
            return
        if len(norm.text) < self.model.fingerprint.min_chars:
            st.statuses[i] = TOO_SHORT
            return
        if use_memo:
            key = xxhash.xxh3_128_digest(norm.text.encode("utf-8", "surrogatepass"))
            hit = self._memo.get(key)
            if hit is not None:
                self._memo.move_to_end(key)
                st.out[i], n_feats, st.summaries[i] = hit
                st.statuses[i] = NO_FEATURES if not n_feats else (TRUNCATED if norm.truncated else OK)
                st.counts[i] = n_feats
                return
            if key in st.pending:
                st.copies.append((i, st.pending[key], norm.truncated))
                return
            st.pending[key] = i
            st.fresh.append((i, key))
        st.queued.append((i, norm.text, kept, norm.truncated))

    def _hash_queued(self, st: _BatchState) -> None:
        """The features of every row the batch computes (in row order, as the vote reads them)."""
        texts = [text for _, text, _, _ in st.queued]
        kept = [cps for _, _, cps, _ in st.queued]
        summarized: list[tuple[int, np.ndarray]] = []
        for (i, _, cps, truncated), (h, w) in zip(st.queued, self.hashed_features(texts, kept), strict=True):
            if self.check is not None and len(h) and not self._is_short(len(cps)):
                # the check compares two texts of this length on the same n-grams (sorted, distinct)
                summarized.append((i, h))
            st.hash_parts.append(h)
            st.weight_parts.append(w)
            st.counts[i] = len(h)
            if not st.counts[i]:
                st.statuses[i] = NO_FEATURES
            elif truncated:
                st.statuses[i] = TRUNCATED
        if self.check is not None and summarized:
            for (i, _), summary in zip(
                summarized, self.check.summaries([h for _, h in summarized]), strict=True
            ):
                st.summaries[i] = summary

    def _vote(self, st: _BatchState) -> FingerprintBatch:
        """One vectorized vote over every queued row, then the memo and the in-batch copies."""
        n = len(st.statuses)
        hashes = np.concatenate(st.hash_parts) if st.hash_parts else np.zeros(0, dtype=np.uint64)
        vote_weights = np.concatenate(st.weight_parts) if st.weight_parts else np.zeros(0, dtype=np.float64)
        # rows served from the memo or copied contribute no features here: a zero count for the vote
        vote_counts = np.zeros(n, dtype=np.int64)
        computed = np.array([i for i, _, _, _ in st.queued], dtype=np.int64)
        vote_counts[computed] = st.counts[computed]
        fps = simhash_batch(hashes, vote_weights, vote_counts)
        fresh_rows = vote_counts > 0
        st.out[fresh_rows] = fps[fresh_rows]
        for i, key in st.fresh:
            self._remember(key, (int(st.out[i]), int(st.counts[i]), st.summaries[i]))
        for i, src, truncated in st.copies:
            st.out[i], st.counts[i], st.summaries[i] = st.out[src], st.counts[src], st.summaries[src]
            st.statuses[i] = NO_FEATURES if not st.counts[i] else (TRUNCATED if truncated else OK)
        return FingerprintBatch(
            fingerprint=to_signed(st.out),
            has_fingerprint=st.counts > 0,
            status=st.statuses,
            n_chars=st.n_chars,
            n_features=st.counts,
            check_summary=st.summaries if self.check is not None else None,
        )


class _BatchState:
    """One batch in progress: per-row results, and the rows whose features wait for the vote."""

    def __init__(self, n: int) -> None:
        self.statuses: list[str] = [OK] * n
        self.n_chars = np.zeros(n, dtype=np.int64)
        self.counts = np.zeros(n, dtype=np.int64)
        self.out = np.zeros(n, dtype=np.uint64)
        self.summaries: list[bytes | None] = [None] * n
        # rows to compute, in order: (row, normalized text, its compact code points, truncated)
        self.queued: list[tuple[int, str, np.ndarray, bool]] = []
        self.hash_parts: list[np.ndarray] = []  # per computed row: its feature hashes and weights
        self.weight_parts: list[np.ndarray] = []
        self.fresh: list[tuple[int, bytes]] = []  # rows computed in this batch, to memoize afterwards
        self.pending: dict[bytes, int] = {}  # memo key -> row computed in this batch
        self.copies: list[tuple[int, int, bool]] = []  # (row, row it copies, truncated)


def check_filter_problem(model: ModelOptions, verify: VerifyOptions) -> str | None:
    """Why the fingerprint's features are not the check's n-grams (another measure, feature mode, hash or
    n), or ``None`` when they are. The check must normalize as ``model`` does (one ``normalize`` section
    serves both)."""
    feats = model.features
    if verify.measure != "char_jaccard":
        return f'needs verify.measure = "char_jaccard", not {verify.measure!r}'
    if feats.mode != "char_ngram" or model.fingerprint.hash != "mix64":
        return 'needs the fingerprint features of features.mode = "char_ngram" and fingerprint.hash = "mix64"'
    if feats.ngram_size != verify.ngram_size:
        return f"needs features.ngram_size = verify.ngram_size ({feats.ngram_size} != {verify.ngram_size})"
    return None


def check_filter(model: ModelOptions, verify: VerifyOptions) -> CheckFilter | None:
    """The filter whose summaries the fingerprint pass emits for the check, or ``None`` when
    ``verify.prefix_filter`` and ``verify.sketch_filter`` are off or the features are not the check's
    n-grams."""
    if check_filter_problem(model, verify) is not None:
        return None
    return requested(verify)
