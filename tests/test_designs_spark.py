"""The band-design stage: ``auto`` takes the cheapest exact design within the pair budget, and LSH when
no exact design fits it."""

import random

from simhash_spark.config import BandsConfig
from simhash_spark.transforms.designs import choose_design, design_rules


def frame(spark, fps):
    return spark.createDataFrame([(i, f) for i, f in enumerate(fps)], "id long, fingerprint long")


def test_random_fingerprints_get_an_exact_design(spark):
    rng = random.Random(1)
    fps = [rng.getrandbits(63) for _ in range(3000)]
    scheme, report = choose_design(
        frame(spark, fps), n=len(fps), k=3, rules=design_rules(BandsConfig(), in_task=False)
    )
    assert scheme.exact and report["chosen"] == scheme.spec and report["reason"].startswith("cheapest exact")
    chosen = next(d for d in report["designs"] if d["scheme"] == scheme.spec)
    assert all(
        chosen["estimated_work"] <= d["estimated_work"]
        for d in report["designs"]
        if d["estimated_candidate_pairs"] <= 50 * len(fps)
    )


def test_a_tight_pair_budget_at_a_large_k_falls_back_to_lsh(spark):
    rng = random.Random(2)
    fps = [rng.getrandbits(63) for _ in range(3000)]
    cfg = BandsConfig(auto_max_pairs_per_doc=0.01)
    scheme, report = choose_design(
        frame(spark, fps), n=len(fps), k=12, rules=design_rules(cfg, in_task=False)
    )
    assert not scheme.exact and "cheapest LSH" in report["reason"]
    assert scheme.recall(12) >= cfg.min_recall


def test_lsh_fallback_sizes_buckets_from_the_sample_bits(spark):
    import numpy as np

    from simhash_spark.core.bands import BitModel, cheapest_lsh, parse_scheme
    from simhash_spark.transforms.designs import bit_frequencies

    bits = np.random.default_rng(5).random((4000, 64)) < 0.75
    fps = np.packbits(bits, axis=1, bitorder="little").view("<i8").ravel().tolist()
    measured = bit_frequencies(frame(spark, fps))
    assert all(abs(p - q) < 1e-9 for p, q in zip(measured.ones, bits.mean(axis=0), strict=True))
    cfg = BandsConfig(auto_max_pairs_per_doc=0.01, hot_bucket_limit=100)
    scheme, report = choose_design(
        frame(spark, fps), n=len(fps), k=12, rules=design_rules(cfg, in_task=False)
    )
    assert report["largest_bit_skew"] > 0.2
    assert scheme == cheapest_lsh(12, cfg.min_recall, len(fps), pair_cost=0.005, max_bucket=25, bits=measured)
    assert scheme != cheapest_lsh(12, cfg.min_recall, len(fps), pair_cost=0.005, max_bucket=25)
    assert parse_scheme(scheme.spec).recall(12) >= cfg.min_recall
    assert BitModel.uniform().ones == (0.5,) * 64
