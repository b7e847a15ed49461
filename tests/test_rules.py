"""One pair rule: the pure ``PairRule``, its Spark twin (the verify stage) and the hot-bucket forests agree."""

import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from simhash_spark.core.flood import flood_forest
from simhash_spark.core.normalize import NormalizeOptions
from simhash_spark.core.rules import PairRule
from simhash_spark.core.verify import FINGERPRINT, IDENTICAL, VERIFIED, ThresholdPolicy, VerifyOptions
from simhash_spark.transforms.verify import accept_pairs, reason_column, rows_of_pairs
from tests.test_components_spark import union_find

NORM = NormalizeOptions()


def random_rule(rng: random.Random) -> PairRule:
    steps = tuple(
        sorted({(rng.choice([0, 50, 100, 300]), rng.randint(0, 14)) for _ in range(rng.randint(0, 2))})
    )
    starts = [s for s, _ in steps]
    if len(set(starts)) != len(starts):
        steps = ()
    measure = rng.choice(["char_jaccard", "edit", "none"])
    verify = VerifyOptions(
        measure=measure, min_similarity=rng.choice([0.5, 0.8]), accept_distance=rng.randint(0, 3)
    )
    return PairRule(ThresholdPolicy(rng.randint(0, 14), steps), verify, NORM, rng.choice([None, 2, 6]))


def test_the_rule_reads_as_documented():
    rule = PairRule(ThresholdPolicy(12, ((0, 5), (100, 12))), VerifyOptions(accept_distance=1), NORM, 6)
    assert rule.reason(13, 500, 500) is None  # beyond k
    assert rule.reason(8, 50, 500, similarity=0.99) is None  # the shorter document sets k = 5
    assert rule.reason(0, 500, 500, same_text=True) == IDENTICAL
    assert rule.reason(0, 500, 500) == FINGERPRINT  # same fingerprint, other text: accepted unchecked
    assert rule.reason(1, 500, 500) == FINGERPRINT
    assert rule.reason(9, 500, 500, similarity=0.8) == VERIFIED
    assert rule.reason(9, 500, 500, similarity=0.79) is None
    assert rule.reason(9, 500, 500, similarity=0.9, title_distance=7) is None  # titles too far apart
    assert rule.reason(9, 500, 500, similarity=0.9, title_distance=None) == VERIFIED  # a side has no title
    # sketches sharing a band make a pair beyond k a candidate, which only the check accepts
    assert rule.reason(13, 500, 500, similarity=0.8, shares_band=True) == VERIFIED
    assert rule.reason(13, 500, 500, similarity=0.79, shares_band=True) is None
    assert rule.reason(8, 50, 500, similarity=0.99, shares_band=True) == VERIFIED
    assert rule.reason(13, 500, 500, similarity=0.9, title_distance=7, shares_band=True) is None
    wide = PairRule(ThresholdPolicy(3), VerifyOptions(accept_distance=5), NORM)
    assert wide.reason(4, 500, 500, similarity=0.1, shares_band=True) is None  # beyond k: checked
    assert wide.needs_text_check(4, within_k=False) and not wide.needs_text_check(3)
    unchecked = PairRule(ThresholdPolicy(3), VerifyOptions(measure="none"), NORM)
    assert unchecked.reason(5, 500, 500, shares_band=True) is None


def test_the_spark_twin_gives_the_rules_answer_on_random_cases(spark):
    rng = random.Random(11)
    for _ in range(6):
        rule = random_rule(rng)
        cases = []
        for i in range(300):
            d = rng.randint(0, 16)
            cases.append(
                (
                    i,
                    d,
                    rng.choice([10, 60, 99, 100, 150, 400]),
                    rng.random() < 0.3,
                    round(rng.random(), 3),
                    rng.choice([None, rng.randint(0, 10)]),
                    rng.random() < 0.3,
                )
            )
        df = spark.createDataFrame(
            cases, "i int, d int, shorter int, same boolean, sim double, td int, band boolean"
        )
        reason = reason_column(
            rule,
            F.col("d"),
            F.col("shorter"),
            same_text=F.col("same"),
            similarity=F.col("sim"),
            title_distance=F.col("td"),
            shares_band=F.col("band"),
        )
        got = {r["i"]: r["reason"] for r in df.select("i", reason.alias("reason")).collect()}
        for i, d, shorter, same, sim, td, band in cases:
            want = rule.reason(
                d, shorter, shorter + 1, same_text=same, similarity=sim, title_distance=td, shares_band=band
            )
            assert got[i] == want, (rule, d, shorter, same, sim, td, band)


TEXTS = [
    "国务院常务会议部署稳就业工作，强调就业是最大的民生。",
    "国务院常务会议部署稳就业工作，强调就业是最大民生。",
    "国务院常务会议部署稳就业工作。",
    "今年夏粮再获丰收，产量创历史新高。",
]


def test_the_verify_stage_accepts_what_the_rule_accepts(spark):
    rng = random.Random(5)
    for round_ in range(4):
        rule = random_rule(rng)
        n = 24
        texts = [rng.choice(TEXTS) + ("" if rng.random() < 0.5 else "附") for _ in range(n)]
        n_chars = [rng.choice([20, 80, 120, 500]) for _ in range(n)]
        titles = [None if rng.random() < 0.3 else rng.getrandbits(63) for _ in range(n)]
        cands = [
            (a, b, rng.randint(0, 15), rng.random() < 0.3)
            for a in range(n)
            for b in range(a + 1, n)
            if rng.random() < 0.3
        ]
        pairs = spark.createDataFrame(cands, "id_a long, id_b long, distance int, shares_band boolean")
        lengths = spark.createDataFrame(list(enumerate(n_chars)), "id long, n_chars int")
        tdf = spark.createDataFrame(list(enumerate(texts)), "id long, text string")
        titled = spark.createDataFrame(
            [(i, t) for i, t in enumerate(titles) if t is not None], "id long, title_fingerprint long"
        )
        got = {
            (r["id_a"], r["id_b"]): r["reason"]
            for r in accept_pairs(
                pairs,
                rule=rule,
                lengths=lengths,
                texts=rows_of_pairs(pairs, tdf) if round_ % 2 else tdf,
                titles=titled,
            ).collect()
        }
        want = {}
        for a, b, d, band in cands:
            td = None if titles[a] is None or titles[b] is None else (titles[a] ^ titles[b]).bit_count()
            within_k = d <= rule.k(n_chars[a], n_chars[b])
            sim = rule.similarity(texts[a], texts[b]) if rule.needs_text_check(d, within_k=within_k) else None
            reason = rule.reason(
                d, n_chars[a], n_chars[b], similarity=sim, title_distance=td, shares_band=band
            )
            if reason is not None:
                want[(a, b)] = reason
        assert got == want, rule


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32), st.integers(2, 40))
def test_hot_bucket_forests_link_exactly_what_the_rule_accepts(seed, n):
    rng = random.Random(seed)
    rule = random_rule(rng)
    centre = rng.getrandbits(64)
    fps = np.array(
        [centre ^ sum(1 << b for b in rng.sample(range(64), rng.randint(0, 8))) for _ in range(n)],
        dtype=np.uint64,
    )
    n_chars = [rng.choice([20, 80, 120, 500]) for _ in range(n)]
    texts = [rng.choice(TEXTS) for _ in range(n)]
    titles = [None if rng.random() < 0.3 else rng.getrandbits(64) for _ in range(n)]
    edges = flood_forest(fps.view(np.int64), n_chars, texts, titles, rule).edges
    accepted = []
    for i in range(n):
        for j in range(i + 1, n):
            d = int(fps[i] ^ fps[j]).bit_count()
            td = None if titles[i] is None or titles[j] is None else (titles[i] ^ titles[j]).bit_count()
            sim = rule.similarity(texts[i], texts[j]) if rule.needs_text_check(d) else None
            reason = rule.reason(d, n_chars[i], n_chars[j], similarity=sim, title_distance=td)
            if reason is not None:
                accepted.append((i, j, d, sim, reason))
    assert set(edges) <= set(accepted)  # every forest edge is an accepted pair, labelled by the rule
    assert union_find([(i, j) for i, j, *_ in edges]) == union_find([(i, j) for i, j, *_ in accepted])
