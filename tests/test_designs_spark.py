"""The band-design stage: ``auto`` takes the cheapest exact design within the pair budget, and LSH when
no exact design fits it."""

import random

from simhash_spark.config import BandsConfig
from simhash_spark.transforms.designs import choose_design


def frame(spark, fps):
    return spark.createDataFrame([(i, f) for i, f in enumerate(fps)], "id long, fingerprint long")


def test_random_fingerprints_get_an_exact_design(spark):
    rng = random.Random(1)
    fps = [rng.getrandbits(63) for _ in range(3000)]
    scheme, report = choose_design(frame(spark, fps), n=len(fps), k=3, cfg=BandsConfig())
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
    scheme, report = choose_design(frame(spark, fps), n=len(fps), k=12, cfg=cfg)
    assert not scheme.exact and "cheapest LSH" in report["reason"]
    assert scheme.recall(12) >= cfg.min_recall
