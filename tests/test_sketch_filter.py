"""The sketch filter: what a sketch holds, the agreement bound, and empirically that it keeps the pairs at
the check's threshold and drops unrelated documents (the Spark stage and a whole run with it:
tests/test_prefix_filter.py, which runs both filters)."""

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_spark.core.check_filter import SKETCH, CheckFilter
from simhash_spark.core.fingerprint import Fingerprinter, ModelOptions
from simhash_spark.core.mix64 import scramble as mix64_array
from simhash_spark.core.normalize import NormalizeOptions
from simhash_spark.core.shingles import char_ngram_hashes
from simhash_spark.core.sketch_filter import (
    BINS,
    MISS_RATE,
    agreements,
    min_agreements,
    ngram_sketch,
    ngram_sketches,
    stored_sketches_may_pass,
)
from simhash_spark.core.verify import VerifyOptions, similarities

SKETCH_08 = CheckFilter(SKETCH, 0.8)
CHARS = [chr(c) for c in range(0x4E00, 0x4E00 + 3000)]


def naive_sketch(hashes: list[int]) -> bytes:
    out = [0] * BINS
    for b in range(BINS):
        inside = [h for h in hashes if h >> 59 == b]
        if inside:
            out[b] = min(inside) % 255 + 1
    return bytes(out)


@settings(max_examples=300, deadline=None)
@given(st.sets(st.integers(min_value=0, max_value=2**64 - 1), max_size=200))
def test_a_sketch_holds_one_byte_of_each_bins_smallest_hash(values):
    hashes = sorted(values)
    assert ngram_sketch(np.array(hashes, dtype=np.uint64)) == naive_sketch(hashes)


# hashes in the top three bins as well as anywhere: neighbouring documents then often end and start in
# the same bin, which must not join their bins
_HASHES = st.integers(min_value=0, max_value=2**64 - 1) | st.builds(
    lambda b, low: b << 59 | low, st.integers(29, 31), st.integers(0, 2**59 - 1)
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sets(_HASHES, max_size=80), max_size=12))
def test_sketches_of_a_batch_are_each_documents_sketch(documents):
    arrays = [np.array(sorted(d), dtype=np.uint64) for d in documents]
    assert ngram_sketches(arrays) == [naive_sketch(sorted(d)) for d in documents]


def _tail_below(a: int, t: float) -> float:
    return sum(math.comb(BINS, i) * t**i * (1 - t) ** (BINS - i) for i in range(a))


@pytest.mark.parametrize("t", [0.5, 0.7, 0.8, 0.9, 0.95])
def test_the_bound_is_the_largest_that_misses_at_most_the_stated_rate(t):
    a = min_agreements(t)
    assert _tail_below(a, t) <= MISS_RATE < _tail_below(a + 1, t)
    assert min_agreements(0.8) == 10


def _sets_at(jaccard: float, union: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Two sets of distinct uint64 hashes (mix64 of random ids, as the n-gram hashes are spread) whose
    Jaccard similarity is ``jaccard`` up to rounding, sorted."""
    ids = rng.choice(2**62, size=union, replace=False).astype(np.uint64)
    hashes = mix64_array(ids)
    common = round(jaccard * union)
    only_a = (union - common) // 2
    a = np.sort(hashes[: common + only_a])
    b = np.sort(np.concatenate((hashes[:common], hashes[common + only_a :])))
    return a, b


def test_pairs_at_the_threshold_are_kept_and_unrelated_sets_dropped():
    """Stated: a pair at the threshold is dropped with probability at most 1e-9; 20,000 pairs at
    Jaccard 0.8 (the hardest case; 40 to 3,000 distinct n-grams) are all kept, and pairs of unrelated
    sets (Jaccard 0 and 0.05) are dropped."""
    rng = np.random.default_rng(3)
    kept = []
    for _ in range(20_000):
        a, b = _sets_at(0.8, int(rng.integers(40, 3000)), rng)
        kept.append((ngram_sketch(a), ngram_sketch(b)))
    assert stored_sketches_may_pass([a for a, _ in kept], [b for _, b in kept], 0.8).all()
    for j in (0.0, 0.05):
        pairs = [
            tuple(map(ngram_sketch, _sets_at(j, int(rng.integers(200, 3000)), rng))) for _ in range(2000)
        ]
        dropped = ~stored_sketches_may_pass([a for a, _ in pairs], [b for _, b in pairs], 0.8)
        assert dropped.all()


def test_edited_texts_are_kept_and_unrelated_texts_dropped():
    rng = random.Random(9)

    def words(k: int) -> str:
        return "".join(rng.choice(CHARS) for _ in range(k))

    base = [words(rng.randrange(100, 2000)) for _ in range(300)]
    edited = []
    for text in base:
        chars = list(text)
        for _ in range(len(text) // 100):
            at = rng.randrange(len(chars))
            chars[at : at + 1] = words(1)
        edited.append("".join(chars))
    scores = similarities(base, edited, VerifyOptions(), NormalizeOptions())
    assert (scores >= 0.8).mean() > 0.9
    sketches = [SKETCH_08.summary(char_ngram_hashes(t, 5)[0]) for t in base + edited]
    near = SKETCH_08.may_pass(sketches[:300], sketches[300:])
    assert near[scores >= 0.8].all()
    unrelated = SKETCH_08.may_pass(sketches[:299], sketches[301:])
    assert not unrelated.any()


def test_documents_without_a_sketch_are_kept_and_empty_bins_agree():
    full = ngram_sketch(np.sort(mix64_array(np.arange(1000, dtype=np.uint64))))
    other = ngram_sketch(np.sort(mix64_array(np.arange(5000, 6000, dtype=np.uint64))))
    assert stored_sketches_may_pass([None, full, full], [full, None, other], 0.8).tolist() == [
        True,
        True,
        False,
    ]
    empty = ngram_sketch(np.zeros(0, dtype=np.uint64))
    assert empty == bytes(BINS)
    assert stored_sketches_may_pass([empty], [empty], 0.8).tolist() == [True]
    a = np.frombuffer(full, dtype=np.uint8).reshape(1, BINS)
    assert agreements(a, a).tolist() == [BINS]


def test_the_fingerprinter_emits_sketches_and_the_same_fingerprints():
    rng = random.Random(4)
    docs: list[str | None] = ["".join(rng.choice(CHARS) for _ in range(400)) for _ in range(5)]
    docs += [docs[0], "短文本", None]
    plain = Fingerprinter(ModelOptions()).batch(docs)
    fp = Fingerprinter(ModelOptions(), SKETCH_08)
    for res in (fp.batch(docs), fp.batch(docs)):  # the second is answered from the memo
        assert res.fingerprint.tolist() == plain.fingerprint.tolist() and res.status == plain.status
        summaries = res.check_summary or []
        for text, summary in zip(docs, summaries, strict=True):
            if text is None:
                assert summary is None
                continue
            assert summary == ngram_sketch(char_ngram_hashes(text, 5)[0])


@pytest.mark.heavy
def test_pairs_the_sketches_leave_few_are_checked_with_only_their_texts_joined(spark):
    """More candidates than ``cluster.local_max_edges`` before the filter and fewer after it: the texts
    are joined by the broadcast ids of the pairs left (the other plan), with the same outputs."""
    from simhash_spark.config import load_config
    from simhash_spark.demo.corpus import generate
    from simhash_spark.pipeline import dedup

    raw = spark.createDataFrame(generate(200, seed=8).to_pandas())
    wide = ["cluster.local_max_documents=0", "match.max_distance=16"]  # many unrelated pairs within k

    def run(*overrides):
        res = dedup(spark, raw, load_config(overrides=[*wide, *overrides]))
        out = sorted(map(tuple, res.pairs.collect())), sorted(map(tuple, res.documents.collect())), res.stats
        res.unpersist()
        return out

    pairs, docs, stats = run("verify.sketch_filter=false")
    n = stats["candidate_pairs_within_k"]
    f_pairs, f_docs, f_stats = run("verify.sketch_filter=true", f"cluster.local_max_edges={n - 1}")
    assert n - 1 >= n - f_stats["verify"]["sketch_rejected"]  # few once filtered
    assert f_stats["verify"]["sketch_rejected"] > 0
    assert (f_pairs, f_docs) == (pairs, docs) and pairs
