"""The prefix filter never rejects a pair the check passes, and rejects unrelated documents."""

import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_spark.core.prefix_filter import may_pass, ngram_prefix, prefix_length
from simhash_spark.core.shingles import char_ngram_hashes, hashed_jaccard

ALPHABET = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可也你能"


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=ALPHABET, min_size=0, max_size=80),
    st.text(alphabet=ALPHABET, min_size=0, max_size=80),
    st.sampled_from([0.5, 0.7, 0.8, 0.9, 1.0]),
    st.sampled_from([2, 3, 5]),
)
def test_no_pair_that_passes_is_rejected(a, b, t, n):
    ha, hb = char_ngram_hashes(a, n)[0], char_ngram_hashes(b + a[: len(a) // 2], n)[0]
    if hashed_jaccard(ha, hb) >= t:
        assert may_pass(ngram_prefix(ha, t), ngram_prefix(hb, t))


def test_near_copies_pass_and_unrelated_documents_are_rejected():
    rng = random.Random(3)
    chars = [chr(c) for c in range(0x4E00, 0x4E00 + 3000)]
    base = "".join(rng.choice(chars) for _ in range(1000))
    edited = base[:300] + "".join(rng.choice(chars) for _ in range(20)) + base[320:]
    others = ["".join(rng.choice(chars) for _ in range(1000)) for _ in range(50)]
    h = {name: char_ngram_hashes(text, 5)[0] for name, text in [("base", base), ("edited", edited)]}
    assert hashed_jaccard(h["base"], h["edited"]) >= 0.8
    assert may_pass(ngram_prefix(h["base"], 0.8), ngram_prefix(h["edited"], 0.8))
    rejected = sum(
        not may_pass(ngram_prefix(h["base"], 0.8), ngram_prefix(char_ngram_hashes(o, 5)[0], 0.8))
        for o in others
    )
    assert rejected == len(others)


def test_prefix_length():
    assert [prefix_length(n, 0.8) for n in (0, 1, 5, 10, 11)] == [0, 1, 2, 3, 3]
    assert prefix_length(10, 1.0) == 1
    assert len(ngram_prefix(np.arange(1, 11, dtype=np.uint64) << np.uint64(32), 0.8)) == 3
