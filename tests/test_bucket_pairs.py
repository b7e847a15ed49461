"""Vectorized in-bucket comparison against a brute-force loop over the same rows."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_spark.core import bucket_pairs as bp
from simhash_spark.core.bands import parse_scheme
from simhash_spark.core.simhash import popcount


def brute(tables, keys, fps, k, masks):
    u, m = fps.view(np.uint64), masks.view(np.uint64)
    out = set()
    for i in range(len(fps)):
        for j in range(i + 1, len(fps)):
            if tables[i] != tables[j] or keys[i] != keys[j]:
                continue
            diff = u[i] ^ u[j]
            d = int(popcount(diff))
            first = next(t for t in range(len(m)) if diff & m[t] == 0)
            if d <= k and first == tables[i]:
                out.add((i, j, d))
    return out


def rows_for(fps: np.ndarray, masks: np.ndarray):
    """(table, key, fingerprint) rows for every table, sorted as the Spark partition delivers them."""
    t = np.repeat(np.arange(len(masks)), len(fps))
    f = np.tile(fps, len(masks))
    key = f & masks[t]
    order = np.lexsort((f, key, t))
    return t[order], key[order], f[order]


def design_and_fingerprints(seed: int, spec: tuple[str, int], n_near: int):
    """(masks, k, 40 random fingerprints, ``n_near`` around one centre at 0..k+2 bits)."""
    scheme, k = parse_scheme(spec[0]), spec[1]
    masks = np.array(scheme.table_masks(k), dtype=np.int64)
    rng = np.random.default_rng(seed)
    centre = rng.integers(0, 2**63, dtype=np.int64)
    near = [
        centre
        ^ np.int64(sum(1 << int(b) for b in rng.choice(63, size=int(rng.integers(0, k + 3)), replace=False)))
        for _ in range(n_near)
    ]
    random = rng.integers(-(2**63), 2**63 - 1, size=40, dtype=np.int64)
    return masks, k, random, np.array(near, dtype=np.int64)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    spec=st.sampled_from([("4x16", 3), ("blocks:6", 4), ("lsh:6,5", 9), ("lsh:3,2", 12)]),
    small=st.sampled_from([2, 4, 48]),
    dense=st.sampled_from([0.0, 0.2, 1.01]),
)
def test_bucket_pairs_equal_brute_force(seed, spec, small, dense):
    masks, k, random, near = design_and_fingerprints(seed, spec, 60)
    fps = np.unique(np.concatenate([random, near]))
    t, key, f = rows_for(fps, masks)
    # every code path: small buckets by offsets (the whole array shifted, then the rows that qualify) and
    # large ones one by one
    old = bp.SMALL, bp.DENSE_SHARE
    bp.SMALL, bp.DENSE_SHARE = small, dense
    try:
        i, j, d = bp.bucket_pairs(t, key, f, k=k, masks=masks)
    finally:
        bp.SMALL, bp.DENSE_SHARE = old
    got = set(zip(i.tolist(), j.tolist(), d.tolist(), strict=True))
    assert got == brute(t, key, f, k, masks)
    assert len(got) == len(i)


def test_every_pair_within_k_once_with_an_exact_design():
    rng = np.random.default_rng(1)
    base = rng.integers(-(2**63), 2**63 - 1, size=300, dtype=np.int64)
    flips = np.array([1 << int(b) for b in rng.integers(0, 63, size=300)], dtype=np.int64)
    fps = np.unique(np.concatenate([base, base ^ flips, base ^ flips ^ np.int64(1 << 63 - 1)]))
    masks = np.array(parse_scheme("blocks:5").table_masks(3), dtype=np.int64)
    t, key, f = rows_for(fps, masks)
    i, j, d = bp.bucket_pairs(t, key, f, k=3, masks=masks)
    by_row = {(int(f[a]), int(f[b])) for a, b in zip(i, j, strict=True)}
    u = fps.view(np.uint64)
    dist = popcount(u[:, None] ^ u[None, :])
    want = {(int(fps[a]), int(fps[b])) for a, b in zip(*np.nonzero(dist <= 3), strict=True) if a != b}
    assert {tuple(sorted(p)) for p in by_row} == {tuple(sorted(p)) for p in want}
    assert len(by_row) == len(i) and (d <= 3).all()


def test_empty_and_singletons():
    masks = np.array(parse_scheme("4x16").table_masks(3), dtype=np.int64)
    for n in (0, 1):
        fps = np.arange(n, dtype=np.int64)
        t, key, f = rows_for(fps, masks)
        i, j, d = bp.bucket_pairs(t, key, f, k=3, masks=masks)
        assert len(i) == len(j) == len(d) == 0


def brute_table_join(fps, masks, k, limit):
    """Every pair (positions i < j) within k that collides in some table, from the first table in which it
    collides; dropped when that table's bucket holds more than ``limit`` fingerprints."""
    u, m = fps.view(np.uint64), masks.view(np.uint64)
    size = [dict(zip(*np.unique(u & mt, return_counts=True), strict=True)) for mt in m]
    out = set()
    for i in range(len(u)):
        for j in range(i + 1, len(u)):
            diff = u[i] ^ u[j]
            d = int(popcount(diff))
            first = next((t for t in range(len(m)) if diff & m[t] == 0), None)
            if d <= k and first is not None and size[first][u[i] & m[first]] <= limit:
                out.add((i, j, d))
    return out, size


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    # keys of up to 16 bits, of 17-32 (two radix passes) and of more than 32 (compared)
    spec=st.sampled_from(
        [
            ("4x16", 3),
            ("blocks:6", 4),
            ("lsh:6,5", 9),
            ("lsh:3,2", 12),
            ("lsh:4,24", 8),
            ("2x32", 1),
            ("lsh:3,40", 6),
        ]
    ),
    groups=st.integers(1, 4),
    limit=st.sampled_from([3, 8, 10_000]),
)
def test_tables_joined_in_groups_equal_brute_force(seed, spec, groups, limit):
    """join_tables over every ``groups``-th table, unioned: each pair within k once, from its first
    table, none from a hot bucket; every hot bucket and each table's ten largest reported with exact sizes."""
    masks, k, random, near = design_and_fingerprints(seed, spec, 50)
    fps = np.concatenate([random, near, random[:5]])  # repeated values too
    parts = [
        bp.join_tables(fps, masks, range(g, len(masks), groups), k=k, limit=limit) for g in range(groups)
    ]
    got = [(int(i), int(j), int(d)) for p in parts for i, j, d in zip(p.i, p.j, p.distance, strict=True)]
    want, size = brute_table_join(fps, masks, k, limit)
    assert len(got) == len(set(got)) and set(got) == want
    buckets = [b for p in parts for b in p.buckets]
    u = masks.view(np.uint64)
    for n, t, key in buckets:
        assert size[t][np.int64(key).view(np.uint64) & u[t]] == n
    hot = {(t, key) for t in range(len(masks)) for key, n in size[t].items() if n > limit}
    assert {(t, np.int64(key).view(np.uint64)) for n, t, key in buckets if n > limit} == hot
    for t in range(len(masks)):
        top = sorted(size[t].values(), reverse=True)[:10]
        assert sorted((n for n, bt, _ in buckets if bt == t), reverse=True)[: len(top)] == top


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    mask=st.integers(0, 2**64 - 1),
    n=st.integers(0, 300),
    few=st.integers(1, 8),
)
def test_compact_keys_group_and_sort_as_the_masked_values(seed, mask, n, few):
    """``compact_keys`` + ``key_order`` against the masked fingerprints themselves: equal keys exactly for
    equal masked values, sorted in the same order, at every mask width (values drawn from a few so that
    buckets hold several rows)."""
    rng = np.random.default_rng(seed)
    pool = rng.integers(0, 2**64, size=few, dtype=np.uint64)
    u = pool[rng.integers(0, few, size=n)] ^ rng.integers(0, 2**64, size=n, dtype=np.uint64) & np.uint64(
        rng.integers(0, 2**64, dtype=np.uint64)
    )
    keys, width = bp.compact_keys(u, mask)
    assert width == bin(mask).count("1")
    masked = u & np.uint64(mask)
    order = bp.key_order(keys, width)
    assert sorted(order.tolist()) == list(range(n))
    assert np.all(masked[order][1:] >= masked[order][:-1])
    _, by_masked = np.unique(masked, return_inverse=True)
    _, by_key = np.unique(keys, return_inverse=True)
    assert np.array_equal(by_masked, by_key)


@settings(max_examples=100, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 6), max_size=60),
    seed=st.integers(0, 2**32 - 1),
    top=st.integers(0, 12),
)
def test_largest_buckets_rank_as_a_full_sort(sizes, seed, top):
    """The largest buckets, ties by the smaller (signed) key, as ranking every bucket gives them: many
    buckets share a size, and only those as large as the top-th are ranked."""
    sizes_a = np.array(sizes, dtype=np.int64)
    keys = np.random.default_rng(seed).integers(-(2**63), 2**63 - 1, size=len(sizes), dtype=np.int64)
    want = np.lexsort((keys, -sizes_a))[:top]
    assert bp._largest_buckets(sizes_a, lambda b: keys[b], top).tolist() == want.tolist()
