"""Large buckets are found on a hash sample and counted exactly."""

import collections

import numpy as np

from simhash_spark import columns as C
from simhash_spark.core.bands import parse_scheme
from simhash_spark.transforms.hot_buckets import SIZE, large_buckets


def test_large_buckets_on_a_sample_have_exact_sizes(spark):
    rng = np.random.default_rng(2)
    centre = int(rng.integers(0, 2**63))
    hot = set()
    while len(hot) < 3000:  # distinct values within 3 bits of a centre: its bands are shared widely
        v = centre
        for b in rng.choice(64, size=int(rng.integers(1, 4)), replace=False):
            v ^= 1 << int(b)
        hot.add(v)
    fps = np.concatenate([rng.integers(0, 2**63, size=20_000), np.array(sorted(hot))]).astype(np.int64)
    fps = np.unique(fps)
    df = spark.createDataFrame([(i, int(f)) for i, f in enumerate(fps)], [C.ID, C.FINGERPRINT])
    masks = parse_scheme("4x16").table_masks(3)
    got = {
        (r[C.TABLE], r[C.KEY]): r[SIZE]
        for r in large_buckets(df, masks=masks, fraction=0.05, limit=1000).collect()
    }
    exact = collections.Counter((t, int(f) & m) for f in fps for t, m in enumerate(masks))
    assert all(exact[key] == size for key, size in got.items())  # counted exactly
    truly_hot = {key for key, n in exact.items() if n > 1000}
    assert truly_hot and truly_hot <= set(got)  # every bucket far above the limit is found
