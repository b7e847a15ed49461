"""Large buckets are found on a hash sample and counted exactly."""

import collections

import numpy as np
import pytest

from simhash_spark import columns as C
from simhash_spark.core.bands import parse_scheme
from simhash_spark.transforms.hot_buckets import large_buckets


def test_large_buckets_on_a_sample_have_exact_sizes(spark):
    rng = np.random.default_rng(2)
    centre = int(rng.integers(0, 2**63))
    hot = set()
    while len(hot) < 3000:  # distinct values within 3 bits of a centre: its bands are shared widely
        v = centre
        for b in rng.choice(64, size=int(rng.integers(1, 4)), replace=False):
            v ^= 1 << int(b)
        hot.add(v)
    # the signed view of the unsigned values: mixing int64 with integers >= 2**63 would go through float64
    hot_signed = np.array(sorted(hot), dtype=np.uint64).view(np.int64)
    fps = np.unique(np.concatenate([rng.integers(0, 2**63, size=20_000, dtype=np.int64), hot_signed]))
    assert set(hot_signed.tolist()) <= set(fps.tolist())  # all 3,000 intended hot fingerprints, exactly
    df = spark.createDataFrame([(i, int(f)) for i, f in enumerate(fps)], [C.ID, C.FINGERPRINT])
    masks = parse_scheme("4x16").table_masks(3)
    got = {
        (r[C.BAND], r[C.KEY]): r[C.BUCKET_SIZE]
        for r in large_buckets(df, masks=masks, fraction=0.05, limit=1000).collect()
    }
    exact = collections.Counter((t, int(f) & m) for f in fps for t, m in enumerate(masks))
    assert all(exact[key] == size for key, size in got.items())  # counted exactly
    truly_hot = {key for key, n in exact.items() if n > 1000}
    assert truly_hot and truly_hot <= set(got)  # every bucket far above the limit is found


@pytest.mark.parametrize("k", [3, 11])
def test_link_from_parquet_with_hot_buckets_matches_brute_force(spark, tmp_path, k):
    """The scale benchmark's path: fingerprints read from Parquet, a hot cluster, auto design (LSH at
    k = 11), no texts. Clusters must be the union-find of every pair within k."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    from simhash_spark.config import load_config
    from simhash_spark.context import RunContext
    from simhash_spark.linking import LinkParams, link
    from tests.test_candidates_spark import brute_force_pairs
    from tests.test_components_spark import union_find

    rng = np.random.default_rng(k)
    centre = int(rng.integers(0, 2**63))
    hot = [centre ^ (1 << int(b)) ^ (1 << int(c)) for b, c in rng.integers(0, 64, size=(300, 2))]
    hot_signed = np.array(hot, dtype=np.uint64).view(np.int64)
    fps = np.concatenate([rng.integers(-(2**63), 2**63 - 1, size=1500, dtype=np.int64), hot_signed])
    path = tmp_path / "fps.parquet"
    pq.write_table(pa.table({"id": np.arange(len(fps), dtype=np.int64), "fingerprint": fps}), path)
    keyed = spark.read.parquet(str(path)).withColumn("n_chars", F.lit(1000))
    cfg = load_config(
        overrides=[
            f"match.max_distance={k}",
            "bands.scheme=auto",
            "verify.measure=none",
            "bands.hot_bucket_limit=50",
        ]
    )
    ctx = RunContext()
    linked = link(keyed, LinkParams.from_config(cfg, titled=False), ctx)
    assert linked.stats["hot_buckets"] > 0
    got = {r["node"]: r["component"] for r in linked.assignments.collect()}
    want = union_find([(a, b) for a, b, _ in brute_force_pairs(list(range(len(fps))), fps, k)])
    if not linked.stats["bands"]["exact"]:  # LSH: a subset of the components' links, nearly all
        assert set(got) <= set(want) and len(got) >= 0.97 * len(want)
    else:
        assert got == want
    ctx.release()
