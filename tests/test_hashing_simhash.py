import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from simhash_spark.core.hashing import HASHES, hash_function, hash_many, md5_64, murmur3_64, xxh64
from simhash_spark.core.simhash import (
    hamming,
    simhash_batch,
    simhash_reference,
    to_hex,
    to_signed,
)

FEATURES = [("新闻", 3.2), ("联播", 2.5), ("北京", 1.0), ("simhash", 0.7)]


def test_hash_known_values():
    # published reference values for the empty input, and MD5 per the original article's recipe
    assert xxh64("") == 0xEF46DB3751D8E999
    assert md5_64("") == 0xD41D8CD98F00B204
    assert murmur3_64("") == 0
    assert md5_64("新闻") == int("1d9c15c5d2162ce4", 16)
    assert xxh64("新闻") == 0x6F4492AC6974B67A
    assert murmur3_64("新闻") == 0x9D3227888E7B253E  # Guava murmur3_128().hashString(..).asLong(), unsigned


@pytest.mark.parametrize(
    ("name", "expected"),
    [("xxh64", 0x6F4452EC6974F67A), ("md5_64", 0x1D9C15E5D41E28E0), ("murmur3_64", 0x1DB225088F3A251E)],
)
def test_simhash_known_vectors(name, expected):
    fn = hash_function(name)
    hashes = [fn(f) for f, _ in FEATURES]
    weights = [w for _, w in FEATURES]
    assert simhash_reference(hashes, weights) == expected
    batch = simhash_batch(np.array(hashes, dtype=np.uint64), np.array(weights), [len(hashes)])
    assert int(batch[0]) == expected


def test_single_feature_fingerprint_is_its_hash():
    h = xxh64("唯一")
    assert int(simhash_batch(np.array([h], dtype=np.uint64), np.array([1.0]), [1])[0]) == h


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.integers(0, 2**64 - 1), st.floats(0.01, 100.0)), min_size=0, max_size=30),
        min_size=1,
        max_size=12,
    )
)
@example(docs=[[(0, 1.9872173672537876), (0, 34.0), (1, 1.9872173672537876), (1, 34.0)]])
@example(docs=[[(5, 1.0), (5, 1.0), (2, 1.0), (7, 1.0)], [(3, 2.0), (12, 2.0)]])  # ties, repeated hashes
def test_batch_equals_reference_loop(docs):
    hashes = np.array([h for d in docs for h, _ in d], dtype=np.uint64)
    weights = np.array([w for d in docs for _, w in d], dtype=np.float64)
    out = simhash_batch(hashes, weights, [len(d) for d in docs])
    for i, d in enumerate(docs):
        expected = simhash_reference([h for h, _ in d], [w for _, w in d]) if d else 0
        # A bit whose votes cancel exactly (e.g. +a +b -a -b) is a tie that float rounding decides
        # differently for different summation orders; every other bit must match the reference.
        scale = sum(w for _, w in d)
        ties = 0
        for bit in range(64):
            total = sum(w if (h >> bit) & 1 else -w for h, w in d)
            if abs(total) <= 1e-9 * scale:
                ties |= 1 << bit
        assert (int(out[i]) ^ expected) & ~ties == 0


def test_hash_many_matches_scalar():
    feats = ["a", "新闻", "😀", ""]
    for name in HASHES:
        fn = hash_function(name)
        assert hash_many(feats, name).tolist() == [fn(f) for f in feats]


def test_unknown_hash():
    with pytest.raises(ValueError, match="unknown hash"):
        hash_function("sha1")


def test_signed_view_hex_and_hamming_on_negative_values():
    u = np.array([0xFFFFFFFFFFFFFFFF, 0x8000000000000000, 1], dtype=np.uint64)
    s = to_signed(u)
    assert s.tolist() == [-1, -(2**63), 1]
    assert to_hex(-1) == "ffffffffffffffff" and to_hex(1) == "0000000000000001"
    assert hamming(-1, 0) == 64
    assert hamming(-(2**63), 0) == 1
    assert hamming(-1, 1) == 63
    m = [[hamming(int(a), int(b)) for b in s] for a in s]
    assert m == [[0, 63, 63], [63, 0, 2], [63, 2, 0]]


@given(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**63), 2**63 - 1))
def test_hamming_signed_equals_unsigned(a, b):
    mask = 2**64 - 1
    assert hamming(a, b) == bin((a & mask) ^ (b & mask)).count("1")


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 2**64 - 1), min_size=0, max_size=30), min_size=1, max_size=12),
    st.sampled_from([1.0, 2.5]),
)
def test_equal_weights_take_the_counting_path_with_the_same_bits(docs, w):
    """Shingle features all weigh the same: the integer majority count must equal the float vote, ties
    (an even number of features split evenly) included."""
    hashes = np.array([h for d in docs for h in d], dtype=np.uint64)
    out = simhash_batch(hashes, np.full(len(hashes), w), [len(d) for d in docs])
    for i, d in enumerate(docs):
        assert int(out[i]) == (simhash_reference(d, [w] * len(d)) if d else 0)


@given(st.text(min_size=0, max_size=40), st.integers(1, 8))
def test_mix64_windows_equal_the_scalar_hash(text, n):
    from simhash_spark.core.mix64 import codepoints, mix64, ngram_hashes

    if len(text) < n:
        return
    assert ngram_hashes(codepoints(text), n).tolist() == [
        mix64(text[i : i + n]) for i in range(len(text) - n + 1)
    ]


def test_mix64_windows_of_a_text_longer_than_a_block_equal_the_scalar_hash():
    """``ngram_hashes`` hashes a block of windows at a time: the windows on either side of each block's
    edge (and the text's last ones) hash as the scalar function does."""
    from simhash_spark.core import mix64 as m

    rng = np.random.default_rng(8)
    text = "".join(chr(c) for c in rng.integers(0x4E00, 0x4E00 + 3000, size=2 * m._BLOCK + 9))
    got = m.ngram_hashes(m.codepoints(text), 5)
    assert len(got) == len(text) - 4
    for start in (0, m._BLOCK - 1, m._BLOCK, 2 * m._BLOCK - 1, 2 * m._BLOCK, len(got) - 1):
        assert int(got[start]) == m.mix64(text[start : start + 5]), start


def test_mix64_bits_are_balanced_and_distinct():
    """The bit vote needs every output bit set about half the time, independently of the input."""
    from simhash_spark.core.mix64 import codepoints, ngram_hashes

    rng = np.random.default_rng(5)
    text = "".join(chr(c) for c in rng.integers(0x4E00, 0x4E00 + 3000, size=50_000))
    h = ngram_hashes(codepoints(text), 5)
    assert len(np.unique(h)) == len(h)
    bits = np.unpackbits(h.view(np.uint8).reshape(-1, 8), axis=1)
    assert np.all(np.abs(bits.mean(axis=0) - 0.5) < 0.01)


@given(st.lists(st.text(max_size=12), max_size=20))
def test_mix64_many_equals_the_scalar_hash(texts):
    from simhash_spark.core.mix64 import mix64, mix64_many

    assert mix64_many(texts).tolist() == [mix64(t) for t in texts]


def test_popcount_with_and_without_numpy_bitwise_count(monkeypatch):
    """numpy 1 (PySpark 3.5 environments) has no np.bitwise_count: the byte table gives the same counts."""
    from simhash_spark.core.simhash import popcount

    rng = np.random.default_rng(9)
    values = rng.integers(-(2**63), 2**63 - 1, size=(50, 3), dtype=np.int64)
    want = np.array([[bin(int(v) & (2**64 - 1)).count("1") for v in row] for row in values])
    assert (popcount(values) == want).all()
    monkeypatch.delattr(np, "bitwise_count", raising=False)
    assert (popcount(values.view(np.uint64)) == want).all() and popcount(values).shape == (50, 3)


def test_set_bits_of_short_texts_are_centred_on_half():
    """Short texts have few features, often an even number of them: ties in the bit vote are common. Ties
    must not all go one way (they went to 0, so short texts had ~27 of 64 bits set and shared all-zero band
    keys): over random short texts the set bits average 32, also for an even number of features."""
    from simhash_spark.config import load_config
    from simhash_spark.core.fingerprint import Fingerprinter
    from simhash_spark.core.simhash import popcount

    rng = np.random.default_rng(5)
    lengths = rng.integers(12, 40, size=3000)
    texts = ["".join(chr(0x4E00 + int(c)) for c in rng.integers(0, 3000, size=n)) for n in lengths]
    batch = Fingerprinter(load_config().model).batch(texts)
    bits = popcount(np.asarray(batch.fingerprint, dtype=np.int64))
    even = (lengths - load_config().model.features.ngram_size + 1) % 2 == 0
    assert abs(bits.mean() - 32) < 0.5, bits.mean()
    assert abs(bits[even].mean() - 32) < 0.5, bits[even].mean()
    assert (bits <= 20).mean() < 0.01


def test_bit_counts_agree_with_unpacked_bits_across_segment_and_chunk_edges():
    """Bit counts are summed in byte lanes over segments of 255 features, shifted a chunk at a time:
    documents of lengths around those edges, and runs of them crossing chunks, count every bit exactly."""
    from simhash_spark.core import simhash

    rng = np.random.default_rng(21)
    edges = [1, 2, 254, 255, 256, 509, 510, 511, simhash._CHUNK - 1, simhash._CHUNK, simhash._CHUNK + 1]
    counts = np.array(edges + rng.choice(edges, 40).tolist() + rng.integers(1, 3000, 200).tolist())
    hashes = rng.integers(0, 2**64, int(counts.sum()), dtype=np.uint64)
    hashes[: int(counts[:5].sum())] = np.uint64(2**64 - 1)  # every bit set: a byte reaches 255, no more
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    got = simhash._bit_counts(hashes, starts, counts)
    bits = simhash._unpacked(hashes).astype(np.int64)
    want = np.stack([bits[a : a + n].sum(axis=0) for a, n in zip(starts, counts, strict=True)])
    assert (got == want).all()


def test_a_document_of_more_features_than_a_counting_lane_holds_votes_exactly():
    """Bit counts are summed in byte lanes, 255 features at a time; a document of 70,000 features (past
    what a byte, or a 16-bit lane, would hold) votes as the reference does."""
    rng = np.random.default_rng(5)
    hashes = rng.integers(0, 2**63, 70_000, dtype=np.uint64) * np.uint64(2) | np.uint64(1)  # bit 0 always
    hashes &= ~np.uint64(1 << 16)  # bit 16 never
    short = rng.integers(0, 2**63, 7, dtype=np.uint64)
    both = np.concatenate([short, hashes])
    got = simhash_batch(both, np.ones(len(both)), [7, len(hashes)])
    assert int(got[1]) == simhash_reference(hashes.tolist(), [1.0] * len(hashes))
    assert int(got[1]) & 1 and not int(got[1]) >> 16 & 1
    assert int(got[0]) == simhash_reference(short.tolist(), [1.0] * 7)
