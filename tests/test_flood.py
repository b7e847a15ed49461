"""Floods (many distinct near-variants of one text) resolved in bounded work with exact clusters: the
n-gram join against brute force, the limits, the detection, and whole runs against the exhaustive path."""

import random

import numpy as np
import pandas as pd
import pytest
from pyspark.testing import assertDataFrameEqual

from simhash_spark.config import load_config
from simhash_spark.core.bands import parse_scheme
from simhash_spark.core.bucket_pairs import flood_rows, in_buckets
from simhash_spark.core.flood import FloodLimits, flood_forest
from simhash_spark.core.normalize import NormalizeOptions
from simhash_spark.core.rules import PairRule
from simhash_spark.core.verify import ThresholdPolicy, VerifyOptions
from simhash_spark.pipeline import dedup
from tests.test_components_spark import union_find

NOTICE = (
    "市场监管总局发布今日农产品批发价格监测公告：全国重点监测的农产品批发市场中，猪肉平均价格为每公斤{a}元，"
    "比前一日{b}百分之{c}；牛肉平均价格为每公斤{d}元；羊肉平均价格为每公斤{e}元；鸡蛋平均价格为每公斤{f}元；"
    "重点监测的二十八种蔬菜平均价格为每公斤{h}元。本公告数据来源于全国农产品批发市场价格信息系统，仅供参考。"
)


def notice(rng: random.Random, fields: dict[str, str] | None = None) -> tuple[str, dict[str, str]]:
    values = fields or {
        "a": f"{rng.uniform(20, 40):.2f}",
        "b": rng.choice(["上涨", "下降"]),
        "c": f"{rng.uniform(0, 3):.1f}",
        "d": f"{rng.uniform(60, 90):.2f}",
        "e": f"{rng.uniform(60, 90):.2f}",
        "f": f"{rng.uniform(8, 12):.2f}",
        "h": f"{rng.uniform(4, 6):.2f}",
    }
    return NOTICE.format(**values), values


def flood_texts(n: int, seed: int, reprints: int) -> list[str]:
    """``n`` variants of the notice, and ``reprints`` of them again with one figure changed (a near
    duplicate of its original; most variants are not near duplicates of each other)."""
    rng = random.Random(seed)
    texts, kept = [], []
    for _ in range(n):
        text, values = notice(rng)
        texts.append(text)
        kept.append(values)
    for values in rng.sample(kept, reprints):
        texts.append(notice(rng, {**values, "h": f"{rng.uniform(4, 6):.2f}"})[0])
    return texts


def brute_force(fps, n_chars, texts, rule):
    accepted = []
    for i in range(len(texts)):
        for j in range(i + 1, len(texts)):
            d = int(fps[i] ^ fps[j]).bit_count()
            sim = rule.similarity(texts[i], texts[j]) if rule.needs_text_check(d) else None
            reason = rule.reason(d, n_chars[i], n_chars[j], similarity=sim)
            if reason is not None:
                accepted.append((i, j, d, sim, reason))
    return accepted


@pytest.mark.parametrize(("seed", "threshold"), [(1, 0.8), (2, 0.8), (3, 0.85), (4, 0.9)])
def test_the_ngram_join_links_what_brute_force_links(seed, threshold):
    texts = flood_texts(160, seed, reprints=25)
    rng = np.random.default_rng(seed)
    fps = rng.integers(0, 2**16, size=len(texts)).astype(np.uint64)  # all within k: the text decides
    n_chars = [len(t) for t in texts]
    rule = PairRule(ThresholdPolicy(64), VerifyOptions(min_similarity=threshold), NormalizeOptions())
    found = flood_forest(fps.view(np.int64), n_chars, texts, [None] * len(texts), rule)
    want = brute_force(fps, n_chars, texts, rule)
    assert found.capped == 0 and len(want) >= 10
    assert set(found.edges) <= set(want)  # every edge is an accepted pair, labelled as the rule labels it
    assert union_find([e[:2] for e in found.edges]) == union_find([e[:2] for e in want])
    n = len(texts)
    assert found.checks < n * (n - 1) // 8  # not a check per close pair: most are never compared


@pytest.mark.parametrize(("seed", "block"), [(8, 1), (9, 5), (10, 64)])
def test_blocks_of_members_probed_together_link_what_brute_force_links(monkeypatch, seed, block):
    """Many trees grown at once (blocks of roots), and members sharing a fingerprint (accepted unchecked
    by distance 0 when the rule allows): the same clusters as one member at a time."""
    import simhash_spark.core.flood as flood

    monkeypatch.setattr(flood, "_BLOCK", block)
    texts = flood_texts(140, seed, reprints=30)
    rng = np.random.default_rng(seed)
    fps = rng.integers(0, 48, size=len(texts)).astype(np.uint64)  # many share their fingerprint
    n_chars = [len(t) for t in texts]
    rule = PairRule(ThresholdPolicy(64), VerifyOptions(min_similarity=0.8), NormalizeOptions())
    found = flood_forest(fps.view(np.int64), n_chars, texts, [None] * len(texts), rule)
    want = brute_force(fps, n_chars, texts, rule)
    assert found.capped == 0 and len(want) >= 10
    assert set(found.edges) <= set(want)
    assert union_find([e[:2] for e in found.edges]) == union_find([e[:2] for e in want])


def test_a_member_whose_lists_were_too_long_probes_again_once_they_are_short():
    """Variants differing only in a serial number share the notice's n-grams: the first members meet
    lists longer than their budget; they probe again once the members of their cluster left the lists,
    so none stays capped and the cluster is whole (unrelated variants first: blocks have grown)."""
    rng = random.Random(12)
    fixed = notice(rng)[1]
    texts = [notice(rng)[0] for _ in range(40)]
    texts += [notice(rng, fixed)[0] + f"编号{rng.randrange(10**8):08d}。" for _ in range(260)]
    fps = np.random.default_rng(12).integers(0, 2**16, size=len(texts)).astype(np.uint64)
    n_chars = [len(t) for t in texts]
    rule = PairRule(ThresholdPolicy(64), VerifyOptions(min_similarity=0.8), NormalizeOptions())
    found = flood_forest(
        fps.view(np.int64), n_chars, texts, [None] * len(texts), rule, None, FloodLimits(64, 64)
    )
    want = brute_force(fps, n_chars, texts, rule)
    assert found.capped == 0
    assert set(found.edges) <= set(want)
    assert union_find([e[:2] for e in found.edges]) == union_find([e[:2] for e in want])


def test_other_measures_search_by_distance_with_failed_checks_bounded():
    texts = flood_texts(120, 5, reprints=20)
    fps = np.random.default_rng(5).integers(0, 2**12, size=len(texts)).astype(np.uint64)
    n_chars = [len(t) for t in texts]
    rule = PairRule(
        ThresholdPolicy(64), VerifyOptions(measure="edit", min_similarity=0.97), NormalizeOptions()
    )
    exhaustive = flood_forest(
        fps.view(np.int64), n_chars, texts, [None] * len(texts), rule, None, FloodLimits(10**6, 10**6)
    )
    want = brute_force(fps, n_chars, texts, rule)
    assert exhaustive.capped == 0 and want
    assert union_find([e[:2] for e in exhaustive.edges]) == union_find([e[:2] for e in want])
    bounded = flood_forest(
        fps.view(np.int64), n_chars, texts, [None] * len(texts), rule, None, FloodLimits(10**6, 3)
    )
    assert bounded.capped > 0 and bounded.checks < exhaustive.checks  # reported, never silent
    assert set(bounded.edges) <= set(want)


def test_members_over_the_limits_are_counted():
    texts = flood_texts(200, 6, reprints=30)
    fps = np.arange(len(texts), dtype=np.int64)  # all within k: the text decides
    n_chars, titles = [len(t) for t in texts], [None] * len(texts)
    rule = PairRule(ThresholdPolicy(64), VerifyOptions(min_similarity=0.6), NormalizeOptions())
    tight = flood_forest(fps, n_chars, texts, titles, rule, None, FloodLimits(8, 1))
    loose = flood_forest(fps, n_chars, texts, titles, rule, None, FloodLimits(10**6, 10**6))
    want = brute_force(fps.view(np.uint64), n_chars, texts, rule)
    assert tight.capped > 0 and loose.capped == 0 and tight.checks < loose.checks
    assert set(tight.edges) <= set(want)  # cut short, never wrong
    assert union_find([e[:2] for e in loose.edges]) == union_find([e[:2] for e in want])


def test_floods_are_found_and_random_fingerprints_are_not():
    rng = np.random.default_rng(7)
    masks = np.array(parse_scheme("lsh:387,18").table_masks(12), dtype=np.int64)
    randoms = rng.integers(-(2**63), 2**63 - 1, size=200_000, dtype=np.int64)
    member, buckets = flood_rows(randoms, masks, limit=1000)
    assert not member.any() and not buckets
    centre = int(rng.integers(0, 2**63))
    variants = [centre ^ sum(1 << int(b) for b in rng.choice(64, 6, replace=False)) for _ in range(3000)]
    fps = np.concatenate([randoms[:20_000], np.array(variants, dtype=np.uint64).view(np.int64)])
    member, buckets = flood_rows(fps, masks, limit=1000)
    assert member[20_000:].mean() > 0.99  # the flood
    assert member[:20_000].mean() < 0.05  # only the few random fingerprints that share its buckets
    assert buckets


def test_the_members_of_hot_buckets_are_the_fingerprints_whose_keys_are_hot():
    """The driver names the hot buckets' members for the Spark task as the band keys would (signed keys)."""
    rng = np.random.default_rng(13)
    masks = np.array(parse_scheme("lsh:387,18").table_masks(12), dtype=np.int64)
    fps = rng.integers(-(2**63), 2**63 - 1, size=3000, dtype=np.int64)
    fps[:50] = fps[0] ^ rng.integers(0, 2**10, size=50)  # share low-bit buckets
    hot = [(int(t), int(fps[i] & masks[t])) for t, i in [(0, 0), (5, 7), (200, 2999), (386, 40)]]
    want = np.array([any(int(fp & masks[t]) == key for t, key in hot) for fp in fps])
    assert (in_buckets(fps, masks, hot) == want).all() and want.sum() >= 4


def flood_frame(spark, n: int, reprints: int):
    from simhash_spark.demo.corpus import generate

    texts = flood_texts(n, 11, reprints)
    news = generate(60, seed=3).to_pandas()[["id", "text"]]
    rows = pd.concat([pd.DataFrame({"id": [f"f{i:05d}" for i in range(len(texts))], "text": texts}), news])
    return spark.createDataFrame(rows.reset_index(drop=True))


@pytest.mark.heavy
@pytest.mark.parametrize("driver", [True, False])
def test_a_flood_gives_the_exhaustive_runs_clusters(spark, driver):
    """The exhaustive path (no flood found: every pair of every bucket compared) against the flood path
    (found at a low limit): the same documents and clusters; pairs/ a subset, the summary saying so."""
    df = flood_frame(spark, 700, reprints=40)
    where = [] if driver else ["cluster.local_max_documents=0"]
    exhaustive = dedup(spark, df, load_config(overrides=[*where, "bands.hot_bucket_limit=1000000"]))
    flooded = dedup(spark, df, load_config(overrides=[*where, "bands.hot_bucket_limit=40"]))
    assert exhaustive.stats["flood"]["members"] == 0 and exhaustive.stats["pairs_complete"] is True
    flood = flooded.stats["flood"]
    assert flood["members"] >= 700 and flood["capped"] == 0 and flooded.stats["pairs_complete"] is False
    assert exhaustive.stats["clusters"] >= 30
    assertDataFrameEqual(flooded.documents, exhaustive.documents)
    assertDataFrameEqual(flooded.clusters, exhaustive.clusters)
    full = {tuple(r) for r in exhaustive.pairs.collect()}
    assert {tuple(r) for r in flooded.pairs.collect()} <= full
    for r in (exhaustive, flooded):
        r.unpersist()
