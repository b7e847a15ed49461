"""The band join returns exactly the brute-force set of pairs within k bits."""

import collections

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.core.bands import BandScheme, parse_scheme
from simhash_spark.core.simhash import popcount
from simhash_spark.transforms.candidates import (
    band_join,
    collect_fingerprints,
    hamming_distance,
    in_task_band_join,
    partitioned_band_keys,
)


def planted_fingerprints(seed: int, n_random: int, n_centres: int, k: int) -> np.ndarray:
    """Random fingerprints plus clusters around centres at distances 0..k+3 (near misses included)."""
    rng = np.random.default_rng(seed)
    out = [rng.integers(0, 2**64, size=n_random, dtype=np.uint64)]
    for _ in range(n_centres):
        centre = rng.integers(0, 2**64, dtype=np.uint64)
        members = [centre]
        for _ in range(int(rng.integers(1, 8))):
            flips = rng.choice(64, size=int(rng.integers(0, k + 4)), replace=False)
            v = int(centre)
            for b in flips:
                v ^= 1 << int(b)
            members.append(np.uint64(v))
        out.append(np.array(members, dtype=np.uint64))
    return np.concatenate(out).view(np.int64)


def brute_force_pairs(ids: list, fps: np.ndarray, k: int) -> set:
    u = fps.view(np.uint64)
    d = popcount(u[:, None] ^ u[None, :])
    out = set()
    for i, j in zip(*np.nonzero(d <= k), strict=True):
        a, b = ids[i], ids[j]
        if a < b:
            out.add((a, b, int(d[i, j])))
    return out


def candidate_pairs(fps, *, scheme: BandScheme, max_distance: int, min_rows: int = 1 << 16):
    """The job's two candidate steps, band keys then the in-place band join, without persisting between."""
    masks = scheme.table_masks(max_distance)
    return band_join(
        partitioned_band_keys(fps, masks=masks), masks=masks, max_distance=max_distance, min_rows=min_rows
    )


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 2**32 - 1),
    design=st.sampled_from(
        [("4x16", 3), ("4x16", 2), ("4x16", 0), ("blocks:5", 3), ("blocks:6", 4), ("blocks:8", 6)]
    ),
    string_ids=st.booleans(),
    min_rows=st.sampled_from([1, 1 << 16]),
)
def test_band_join_equals_brute_force(spark, seed, design, string_ids, min_rows):
    """min_rows=1 compares every Arrow batch as it arrives: buckets spanning batches are held back."""
    scheme_spec, k = design
    fps = planted_fingerprints(seed, n_random=1500, n_centres=300, k=k)
    # duplicate fingerprints too: identical values must pair with each other
    fps = np.concatenate([fps, fps[:50]])
    ids = [f"d{i:05d}" for i in range(len(fps))] if string_ids else list(range(len(fps)))
    df = spark.createDataFrame(list(zip(ids, fps.tolist(), strict=True)), [C.ID, C.FINGERPRINT])
    got_rows = candidate_pairs(
        df.repartition(3), scheme=parse_scheme(scheme_spec), max_distance=k, min_rows=min_rows
    ).collect()
    examined = [(r[C.ID_A], r[C.ID_B], r[C.DISTANCE]) for r in got_rows]
    assert len(examined) == len(set(examined)), "a pair was examined twice"
    got = {p for p in examined if p[2] <= k}
    assert got == brute_force_pairs(ids, fps, k)


def test_hamming_distance_on_negative_longs(spark):
    rows = [(-1, 0, 64), (-(2**63), 0, 1), (-1, 1, 63), (5, 5, 0), (-2, -1, 1)]
    df = spark.createDataFrame(rows, ["a", "b", "want"])
    out = df.select(hamming_distance(F.col("a"), F.col("b")).alias("d"), "want").collect()
    assert all(r["d"] == r["want"] for r in out)


def test_lsh_join_finds_exactly_the_pairs_sharing_a_sampled_key(spark):
    """Not exact by design, but deterministic: the pairs within k that collide in some table, no others."""
    k = 9
    scheme = parse_scheme("lsh:20,16")
    fps = planted_fingerprints(7, n_random=800, n_centres=250, k=k)
    ids = list(range(len(fps)))
    df = spark.createDataFrame(list(zip(ids, fps.tolist(), strict=True)), [C.ID, C.FINGERPRINT])
    got = {
        (r[C.ID_A], r[C.ID_B], r[C.DISTANCE])
        for r in candidate_pairs(df, scheme=scheme, max_distance=k).collect()
    }
    got = {p for p in got if p[2] <= k}
    masks = np.array(scheme.table_masks(k), dtype=np.int64).view(np.uint64)
    u = fps.view(np.uint64)
    want = {
        (a, b, d)
        for a, b, d in brute_force_pairs(ids, fps, k)
        if any(int((u[a] ^ u[b]) & m) == 0 for m in masks)
    }
    assert got == want
    assert len(want) < len(brute_force_pairs(ids, fps, k))  # some pairs were missed: it is approximate


@pytest.mark.parametrize("string_ids", [False, True])
def test_in_task_band_join_equals_the_shuffled_join(spark, string_ids):
    """Same pairs as the shuffled join over three tasks of an LSH design (approximate, so both must find
    exactly the colliding pairs within k), and the buckets it reports are exact."""
    k, scheme = 9, parse_scheme("lsh:20,16")
    fps = planted_fingerprints(11, n_random=900, n_centres=250, k=k)
    fps = np.concatenate([fps, fps[:30]])  # repeated values: distinct representatives may share one
    ids = [f"d{i:05d}" for i in range(len(fps))][::-1] if string_ids else list(range(len(fps)))
    df = spark.createDataFrame(list(zip(ids, fps.tolist(), strict=True)), [C.ID, C.FINGERPRINT])
    masks = scheme.table_masks(k)
    rows = in_task_band_join(
        spark, collect_fingerprints(df), masks=masks, max_distance=k, hot_bucket_limit=10_000, tasks=3
    ).collect()
    pairs = [(r[C.ID_A], r[C.ID_B], r[C.DISTANCE]) for r in rows if r[C.BUCKET_SIZE] is None]
    assert len(pairs) == len(set(pairs)) and all(a < b for a, b, _ in pairs)
    shuffled = {
        (r[C.ID_A], r[C.ID_B], r[C.DISTANCE])
        for r in candidate_pairs(df, scheme=scheme, max_distance=k).collect()
    }
    assert set(pairs) == shuffled and len(pairs) > 100
    exact = collections.Counter((t, int(f) & m) for f in fps.tolist() for t, m in enumerate(masks))
    buckets = [(r[C.BAND], r[C.KEY], r[C.BUCKET_SIZE]) for r in rows if r[C.BUCKET_SIZE] is not None]
    assert len(buckets) == 10 * len(masks) and all(exact[(t, key)] == n for t, key, n in buckets)


def test_in_task_band_join_judges_each_pair_as_the_stored_sketches_do(spark):
    """With the sketch filter, every pair the tasks find carries what ``CheckFilter.may_pass`` and
    ``stored_share_band`` say of the two documents' stored sketches — a document without a sketch is kept
    for the check and shares no band — and the pairs are the same as without it."""
    from simhash_spark.core.check_filter import SKETCH, CheckFilter
    from simhash_spark.core.sketch_bands import stored_share_band

    k, scheme = 9, parse_scheme("lsh:20,16")
    fps = planted_fingerprints(5, n_random=400, n_centres=150, k=k)
    rng = np.random.default_rng(9)
    ids = [f"d{i:04d}" for i in range(len(fps))]
    # every other sketch close to one common sketch (two of them agree in most bins), the rest random (they
    # agree in almost none); every 7th document has none
    base = rng.integers(1, 256, size=(len(fps), 32), dtype=np.uint8)
    close = (np.arange(len(fps)) % 2 == 0)[:, None] & (rng.random((len(fps), 32)) < 0.9)
    near = np.where(close, base[0], base)
    stored = [None if i % 7 == 0 else bytes(row) for i, row in enumerate(near)]
    df = spark.createDataFrame(list(zip(ids, fps.tolist(), strict=True)), [C.ID, C.FINGERPRINT])
    summaries = spark.createDataFrame(
        [(i, s) for i, s in zip(ids, stored, strict=True) if i != "d0003"],  # one has no row at all
        f"{C.ID} string, {C.CHECK_SUMMARY} binary",
    )
    check = CheckFilter(SKETCH, 0.5)
    reps = collect_fingerprints(df, summaries, keys=False, sketches=True)
    masks = scheme.table_masks(k)
    rows = in_task_band_join(
        spark, reps, masks=masks, max_distance=k, hot_bucket_limit=10_000, tasks=3, check=check
    ).collect()
    pairs = [r for r in rows if r[C.BUCKET_SIZE] is None]
    plain = in_task_band_join(
        spark, collect_fingerprints(df), masks=masks, max_distance=k, hot_bucket_limit=10_000, tasks=3
    ).collect()
    assert {(r[C.ID_A], r[C.ID_B]) for r in pairs} == {
        (r[C.ID_A], r[C.ID_B]) for r in plain if r[C.BUCKET_SIZE] is None
    }
    by_id = dict(zip(ids, stored, strict=True)) | {"d0003": None}
    a = [by_id[r[C.ID_A]] for r in pairs]
    b = [by_id[r[C.ID_B]] for r in pairs]
    assert [r[C.MAY_PASS] for r in pairs] == check.may_pass(a, b).tolist()
    assert [r[C.SHARES_BAND] for r in pairs] == stored_share_band(a, b).tolist()
    verdicts = collections.Counter(r[C.MAY_PASS] for r in pairs)
    assert verdicts[True] > 10 and verdicts[False] > 10  # both verdicts are exercised
    assert any(r[C.SHARES_BAND] for r in pairs)
