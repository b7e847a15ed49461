import itertools
import random

import pytest

from simhash_spark.core.bands import parse_scheme
from simhash_spark.core.simhash import hamming


def test_4x16_is_the_article_layout():
    s = parse_scheme("4x16")
    assert s.block_masks() == [0xFFFF << 48, 0xFFFF << 32, 0xFFFF << 16, 0xFFFF]
    assert len(s.table_masks(3)) == 4 and s.max_exact_distance == 3
    assert not s.guarantees(4)
    with pytest.raises(ValueError):
        s.table_masks(4)


def test_blocks_scheme_table_counts():
    assert len(parse_scheme("blocks:5").table_masks(3)) == 10
    assert len(parse_scheme("blocks:6").table_masks(3)) == 20
    assert len(parse_scheme("blocks:6").table_masks(0)) == 1
    masks = parse_scheme("blocks:6").block_masks()
    assert sum(bin(m).count("1") for m in masks) == 64
    assert all(a & b == 0 for a, b in itertools.combinations(masks, 2))


@pytest.mark.parametrize("spec", ["4x15", "0x64", "blocks:0", "blocks:65", "sixteen", ""])
def test_invalid_specs(spec):
    with pytest.raises(ValueError):
        parse_scheme(spec)


@pytest.mark.parametrize(
    ("spec", "k"), [("4x16", 3), ("4x16", 1), ("blocks:5", 3), ("blocks:6", 4), ("8x8", 7)]
)
def test_pigeonhole_every_close_pair_shares_a_table(spec, k):
    rng = random.Random(3)
    masks = parse_scheme(spec).table_masks(k)
    for _ in range(3000):
        a = rng.getrandbits(64)
        b = a
        for bit in rng.sample(range(64), rng.randint(0, k)):
            b ^= 1 << bit
        assert hamming(a, b) <= k
        assert any(((a ^ b) & (m & (2**64 - 1))) == 0 for m in masks)


def test_lsh_masks_are_fixed_and_sized():
    s = parse_scheme("lsh:30,20")
    masks = s.table_masks(11)
    assert masks == parse_scheme("lsh:30,20").table_masks(3)  # fixed seed, independent of k
    assert len(masks) == 30 and all(bin(m & (2**64 - 1)).count("1") == 20 for m in masks)
    assert not s.exact and s.accepts(11) and not s.guarantees(11)


@pytest.mark.parametrize("d", [0, 3, 8, 11, 16])
def test_lsh_recall_matches_formula_empirically(d):
    from simhash_spark.core.bands import lsh_recall

    s = parse_scheme("lsh:12,18")
    masks = [m & (2**64 - 1) for m in s.table_masks(d)]
    rng = random.Random(d)
    trials, found = 4000, 0
    for _ in range(trials):
        a = rng.getrandbits(64)
        b = a
        for bit in rng.sample(range(64), d):
            b ^= 1 << bit
        found += any(((a ^ b) & m) == 0 for m in masks)
    p = lsh_recall(d, 12, 18)
    sigma = max((p * (1 - p) / trials) ** 0.5, 1e-9)
    assert abs(found / trials - p) <= 4 * sigma + 1e-9, (found / trials, p)


def test_cheapest_lsh_meets_recall_and_exact_candidates():
    from simhash_spark.core.bands import cheapest_lsh, exact_candidates, lsh_recall

    for k in (3, 8, 11, 12):
        s = cheapest_lsh(k, 0.99, 10**6)
        assert lsh_recall(k, s.blocks, s.sampled_bits) >= 0.99
    assert [d.spec for d in exact_candidates(3)][:3] == ["4x16", "blocks:4", "blocks:5"]
    assert all(d.guarantees(11) for d in exact_candidates(11))


def test_cheap_pairs_buy_fewer_tables_within_the_bucket_bound():
    from simhash_spark.core.bands import cheapest_lsh

    dear = cheapest_lsh(11, 0.99, 10**6)
    cheap = cheapest_lsh(11, 0.99, 10**6, pair_cost=0.005, max_bucket=250)
    assert cheap.blocks < dear.blocks and cheap.sampled_bits < dear.sampled_bits
    assert 10**6 * 2.0**-cheap.sampled_bits <= 250 and cheap.recall(11) >= 0.99


def test_auto_spec():
    s = parse_scheme("auto")
    assert s.auto and s.accepts(12) and not s.accepts(17)


def _skewed_fingerprints(n: int, ones: float, seed: int):
    import numpy as np

    bits = np.random.default_rng(seed).random((n, 64)) < ones
    return np.packbits(bits, axis=1, bitorder="little").view("<u8").ravel()


def _largest_bucket(fps, scheme, k: int) -> int:
    import numpy as np

    masks = [m & (1 << 64) - 1 for m in scheme.table_masks(k)]
    return max(int(np.unique(fps & np.uint64(m), return_counts=True)[1].max()) for m in masks)


def test_lsh_buckets_are_sized_for_skewed_bits_not_uniform_ones():
    """Real SimHash bits are skewed: a design sized by 2^-r keeps buckets 16x over its bound; sized by the
    measured bit frequencies, the fullest bucket stays near the bound (the hot-bucket limit is 4x it)."""
    from simhash_spark.core.bands import BitModel, cheapest_lsh

    n, k, bound = 100_000, 12, 250
    fps = _skewed_fingerprints(n, 0.7, seed=3)
    measured = BitModel(tuple(float(((fps >> i) & 1).mean()) for i in range(64)))
    uniform = cheapest_lsh(k, 0.99, n, pair_cost=0.005, max_bucket=bound)
    sized = cheapest_lsh(k, 0.99, n, pair_cost=0.005, max_bucket=bound, bits=measured)
    assert _largest_bucket(fps, uniform, k) > 4 * bound  # hot buckets: pairs_complete would be false
    assert _largest_bucket(fps, sized, k) <= 1.5 * bound
    assert sized.recall(k) >= 0.99
    # uniform bits give the uniform design
    assert cheapest_lsh(k, 0.99, n, pair_cost=0.005, max_bucket=bound, bits=BitModel.uniform()) == uniform


def test_the_driver_chooses_the_design_on_a_sample_whatever_the_order():
    """choose_design_local (the band join inside tasks) counts a hash sample of about sample_rows
    fingerprints, reports its fraction and all n, and does not depend on the order of the values."""
    import numpy as np

    from simhash_spark.core.designs import IN_TASK_PAIR_COST, DesignRules
    from simhash_spark.core.link_local import choose_design_local

    fps = np.random.default_rng(5).integers(-(2**63), 2**63 - 1, size=30_000, dtype=np.int64)
    rules = DesignRules(0.99, 50.0, 1000, 3_000, IN_TASK_PAIR_COST)
    scheme, report = choose_design_local(fps, 12, "auto", rules)
    again, report_again = choose_design_local(fps[::-1].copy(), 12, "auto", rules)
    assert (scheme, report) == (again, report_again)
    assert report["sample_fraction"] == 0.1
    everything, full = choose_design_local(
        fps, 12, "auto", DesignRules(0.99, 50.0, 1000, 10**6, IN_TASK_PAIR_COST)
    )
    assert full["sample_fraction"] == 1.0
    # the sample scales its counts back to all n: the estimates agree with counting everything
    for sampled, counted in zip(report["designs"], full["designs"], strict=True):
        assert 0.7 < sampled["estimated_candidate_pairs"] / counted["estimated_candidate_pairs"] < 1.3
        assert 0.7 < sampled["estimated_work"] / counted["estimated_work"] < 1.3  # rows of all n
    assert scheme == everything
