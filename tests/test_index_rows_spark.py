"""The index-rows stage: keys and partitions computed in Spark equal the pure layout functions, and the
touched entries are exactly those within k on a shared key."""

import random

from simhash_spark import columns as C
from simhash_spark.core.index_model import choose_layout, doc_bucket, key_part
from simhash_spark.transforms.index_rows import doc_bucket as doc_bucket_column
from simhash_spark.transforms.index_rows import index_keys, touched_entries


def signed(u: int) -> int:
    return u - (1 << 64) if u >= 1 << 63 else u


def layout(k=3):
    return choose_layout(
        scheme="blocks:5", k=k, min_recall=0.99, expected_entries=1000, partitions=64, doc_buckets=8
    )[0]


def test_keys_parts_and_buckets_equal_the_pure_layout(spark):
    lay = layout()
    rng = random.Random(2)
    fps = [rng.getrandbits(64) - (1 << 63) for _ in range(200)]
    df = spark.createDataFrame(
        [(i, f, 100, "2026-01-01") for i, f in enumerate(fps)],
        "id long, fingerprint long, n_chars int, run_date string",
    )
    got = {(r[C.ID], r[C.BAND], r[C.PART], r[C.KEY]) for r in index_keys(df, layout=lay).collect()}
    masks, positions = lay.masks(), lay.prefix_positions()
    want = set()
    for i, f in enumerate(fps):
        for t, m in enumerate(masks):
            key = ((f & m) + (1 << 63)) % (1 << 64) - (1 << 63)  # the signed view of f & m
            want.add((i, t, key_part(t, f, positions[t], lay.prefix_bits), key))
    assert got == want
    buckets = {
        r["id"]: r["b"]
        for r in df.select("id", doc_bucket_column(df["fingerprint"], lay.doc_bits).alias("b")).collect()
    }
    assert buckets == {i: doc_bucket(f, lay.doc_bits) for i, f in enumerate(fps)}


def test_touched_entries_are_those_within_k_on_a_shared_key(spark):
    lay = layout()
    rng = random.Random(3)
    stored = [rng.getrandbits(64) for _ in range(300)]
    batch = [stored[i] ^ (1 << rng.randrange(64)) ^ (1 << rng.randrange(64)) for i in range(0, 300, 10)]
    schema = "id long, fingerprint long, n_chars int, run_date string"
    ik = index_keys(
        spark.createDataFrame([(i, signed(f), 9, "d") for i, f in enumerate(stored)], schema), layout=lay
    )
    bk = index_keys(
        spark.createDataFrame([(1000 + i, signed(f), 9, "e") for i, f in enumerate(batch)], schema),
        layout=lay,
    )
    got = {r[C.ID] for r in touched_entries(bk, ik, max_distance=3).collect()}
    want = {i for i, s in enumerate(stored) if any((s ^ b).bit_count() <= 3 for b in batch)}
    assert got == want and len(want) >= 30  # exact design: every entry within k is touched
