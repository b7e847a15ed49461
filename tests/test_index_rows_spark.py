"""The index-rows stage: key rows and probes computed in Spark equal the pure ``core.index_keys``, and the
fingerprints the Spark join touches are those the pure probes touch."""

import random

import numpy as np
import pytest

from simhash_spark import columns as C
from simhash_spark.core import index_keys as K
from simhash_spark.core.sketch_bands import BANDS, stored_keys
from simhash_spark.core.spark_hash import xxhash64
from simhash_spark.transforms.index_rows import id_matches, key_rows, probe_rows, touched_fingerprints


def signed(u: int) -> int:
    return u - (1 << 64) if u >= 1 << 63 else u


def _sketch(rng: random.Random, like: bytes | None = None) -> bytes | None:
    if like is None:
        return (
            None
            if rng.random() < 0.1
            else bytes(rng.randrange(0 if rng.random() < 0.1 else 1, 256) for _ in range(32))
        )
    out = bytearray(like)
    for i in rng.sample(range(32), rng.randint(0, 12)):
        out[i] = rng.randrange(1, 256)
    return bytes(out)


def _frame(spark, rows):
    return spark.createDataFrame(rows, "id string, fingerprint long, check_summary binary")


@pytest.fixture(scope="module")
def stored_and_batch():
    rng = random.Random(3)
    stored = [(f"s{i}", signed(rng.getrandbits(64)), _sketch(rng)) for i in range(400)]
    batch = []
    for i in range(0, 400, 8):
        fp = stored[i][1] & ((1 << 64) - 1)
        for b in rng.sample(range(64), rng.randint(0, 14)):
            fp ^= 1 << b
        batch.append((f"b{i}", signed(fp), _sketch(rng, stored[i][2])))
    return stored, batch


@pytest.mark.parametrize("sketch_bands", [False, True])
def test_key_rows_equal_the_pure_key_rows(spark, stored_and_batch, sketch_bands):
    stored, _ = stored_and_batch
    got = {
        (r[C.KEY_TABLE], r[C.INDEX_KEY], r[C.FINGERPRINT])
        for r in key_rows(_frame(spark, stored), sketch_bands=sketch_bands).collect()
    }
    fps = np.array([f for _, f, _ in stored], dtype=np.int64)
    hashes = np.array([xxhash64((i,), "string") for i, _, _ in stored], dtype=np.int64)
    keys = stored_keys([s for _, _, s in stored]) if sketch_bands else None
    want = {
        (rows.table, int(k), int(f))
        for rows in K.key_rows(hashes, fps, keys)
        for k, f in zip(rows.key, rows.fingerprint, strict=True)
    }
    assert got == want and len(want) >= 5 * len(stored)


@pytest.mark.parametrize(
    ("plan", "sketch_bands"),
    [
        (K.SegmentPlan(16, 0), False),
        (K.SegmentPlan(16, 2), True),
        (K.SegmentPlan(32, 2), True),
        (K.SegmentPlan(64, 1), False),
    ],
    ids=str,
)
def test_the_fingerprints_the_probes_touch_equal_the_pure_probes(spark, stored_and_batch, plan, sketch_bands):
    stored, batch = stored_and_batch
    k = 12
    rows = key_rows(_frame(spark, stored), sketch_bands=sketch_bands).where(f"{C.KEY_TABLE} != {K.ID_TABLE}")
    probes = probe_rows(_frame(spark, batch), plan=plan, sketch_bands=sketch_bands)
    got = {r[C.FINGERPRINT] for r in touched_fingerprints(probes, rows, max_distance=k, plan=plan).collect()}
    fps = np.array([f for _, f, _ in stored], dtype=np.int64)
    keys = stored_keys([s for _, _, s in stored]) if sketch_bands else None
    qfps = np.array([f for _, f, _ in batch], dtype=np.int64)
    qkeys = stored_keys([s for _, _, s in batch]) if sketch_bands else None
    pure = K.segment_probes(qfps, plan) + (K.sketch_probes(qkeys) if qkeys is not None else [])
    stored_rows = {r.table: r for r in K.key_rows(np.zeros(len(fps), np.int64), fps, keys)}
    want: set[int] = set()
    for p in pure:
        want |= set(K.touched(stored_rows[p.table], p, qfps, k, qkeys)[1].tolist())
    assert got == want and len(want) >= 3
    assert len(pure) == plan.windows + (BANDS if sketch_bands else 0)


def test_id_matches_are_the_fingerprints_stored_under_the_ids_hash(spark, stored_and_batch):
    stored, _ = stored_and_batch
    rows = key_rows(_frame(spark, stored), sketch_bands=False).where(f"{C.KEY_TABLE} = {K.ID_TABLE}")
    ids = spark.createDataFrame([("s3",), ("s17",), ("nope",)], "id string")
    got = {r[C.FINGERPRINT] for r in id_matches(ids, rows).collect()}
    assert got == {stored[3][1], stored[17][1]}
