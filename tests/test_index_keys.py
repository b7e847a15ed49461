"""The index's key tables (core.index_keys) against brute force: the segment probes meet every fingerprint
within 4r + 3 bits and a share of those beyond it that the stated recall gives; sketch probes meet equal
band keys (any distance) and shared prefixes (within k); row groups and pushed ranges never lose a probe."""

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_spark.core import index_keys as K
from simhash_spark.core.simhash import popcount
from simhash_spark.core.sketch_bands import BANDS, NO_KEY


def _flip(fp: int, bits: int, rng: random.Random) -> int:
    for b in rng.sample(range(64), bits):
        fp ^= 1 << b
    return fp - (1 << 64) if fp >= 1 << 63 else fp


def _signed(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


def _segment_hits(
    stored: np.ndarray, queries: np.ndarray, plan: K.SegmentPlan, k: int
) -> set[tuple[int, int]]:
    rows = {r.table: r for r in K.key_rows(np.arange(len(stored)), stored, None)}
    hits: set[tuple[int, int]] = set()
    for probes in K.segment_probes(queries, plan):
        q, f = K.touched(rows[probes.table], probes, queries, k)
        hits |= set(zip(q.tolist(), f.tolist(), strict=True))
    return hits


@pytest.mark.parametrize("plan", [p for p in K.PLANS if p.probes_per_document() <= 3000], ids=str)
def test_segment_probes_meet_every_fingerprint_within_the_distance_the_plan_states(plan):
    rng = random.Random(plan.width * 10 + plan.radius)
    stored = np.array([_signed(rng.getrandbits(64)) for _ in range(300)], dtype=np.int64)
    queries = np.array(
        [_flip(int(stored[i]) & ((1 << 64) - 1), rng.randint(0, 16), rng) for i in range(150)], dtype=np.int64
    )
    k = plan.exact_to()
    d = popcount(queries[:, None] ^ stored[None, :])
    want = {(int(i), int(stored[j])) for i, j in zip(*np.nonzero(d <= k), strict=True)}
    assert _segment_hits(stored, queries, plan, k) == want and len(want) >= 10


@pytest.mark.parametrize("plan", [K.SegmentPlan(16, r) for r in (0, 1, 2)] + [K.SegmentPlan(32, 1)], ids=str)
def test_beyond_the_exact_distance_the_share_met_is_the_stated_recall(plan):
    rng = random.Random(5)
    n, d = 2000, 12
    stored = np.array([_signed(rng.getrandbits(64)) for _ in range(n)], dtype=np.int64)
    queries = np.array([_flip(int(s) & ((1 << 64) - 1), d, rng) for s in stored], dtype=np.int64)
    hits = _segment_hits(stored, queries, plan, d)
    met = sum((i, int(stored[i])) in hits for i in range(n)) / n
    expected = plan.recall(d)
    assert 0 < expected < 1 and abs(met - expected) < 4 * (expected * (1 - expected) / n) ** 0.5, (
        met,
        expected,
    )


def test_rotation_round_trips_and_leads_with_the_segment():
    fps = np.array([_signed(0x0123_4567_89AB_CDEF), -1, 0, _signed(0xFFFF_0000_0000_0001)], dtype=np.int64)
    for s in range(K.SEGMENTS):
        rotated = K.rotate(fps, s)
        assert (K.unrotate(rotated, s) == fps).all()
        lead = rotated.view(np.uint64) >> np.uint64(48)
        assert (lead == (fps.view(np.uint64) >> np.uint64(48 - 16 * s)) & np.uint64(0xFFFF)).all()


def test_sketch_probes_meet_equal_keys_whatever_the_distance_and_shared_prefixes_within_k():
    stored_fp = np.array([0, -1, 7, 1 << 40], dtype=np.int64)
    keys = np.full((4, BANDS), NO_KEY, dtype=np.uint32)
    keys[0, 2] = 0x0A0B0C0D  # equal to the query's key: met at 64 bits
    keys[1, 2] = 0x0A0B0C0E  # the prefix only, 64 bits away: not met
    keys[2, 2] = 0x0A0B0CFF  # the prefix only, 3 bits away: met
    keys[3, 2] = 0x0A0B0D0D  # another prefix: not met
    rows = K.key_rows(np.arange(4), stored_fp, keys)[K.FIRST_SKETCH_TABLE + 2]
    query_keys = np.full((1, BANDS), NO_KEY, dtype=np.uint32)
    query_keys[0, 2] = 0x0A0B0C0D
    query_fp = np.array([0], dtype=np.int64)
    probes = K.sketch_probes(query_keys)[2]
    _, met = K.touched(rows, probes, query_fp, 3, query_keys)
    assert sorted(met.tolist()) == [0, 7]
    _, met_k0 = K.touched(rows, probes, np.array([0x5555], dtype=np.int64), 0, query_keys)
    assert met_k0.tolist() == [0]  # the equal key, whatever the distance


def test_key_rows_hold_each_key_and_fingerprint_once_sorted():
    fps = np.array([5, 5, 9, 5], dtype=np.int64)
    rows = K.key_rows(np.array([1, 2, 3, 1], dtype=np.int64), fps, None)
    assert [r.table for r in rows] == K.tables(False)
    ids = rows[K.ID_TABLE]
    assert list(zip(ids.key.tolist(), ids.fingerprint.tolist(), strict=True)) == [(1, 5), (2, 5), (3, 9)]
    for r in rows:
        order = np.lexsort((r.fingerprint, r.key))
        assert (order == np.arange(len(r))).all()
    assert len(rows[K.FIRST_SEGMENT_TABLE]) == 2


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(-50, 50), st.integers(0, 20)), min_size=1, max_size=30),
    st.lists(st.tuples(st.integers(-80, 80), st.integers(0, 30)), max_size=20),
    st.integers(1, 6),
)
def test_row_groups_and_merged_ranges_never_lose_a_probe(groups, ranges, most):
    lows = np.array([g[0] for g in groups], dtype=np.int64)
    highs = lows + np.array([g[1] for g in groups], dtype=np.int64)
    lo = np.array([r[0] for r in ranges], dtype=np.int64)
    hi = lo + np.array([r[1] for r in ranges], dtype=np.int64)
    held = K.groups_holding(lows, highs, lo, hi)
    brute = [
        any(a <= top and b >= bottom for a, b in zip(lo, hi, strict=True))
        for bottom, top in zip(lows, highs, strict=True)
    ]
    assert held.tolist() == brute
    merged = K.merged_ranges(lo, hi, most)
    assert len(merged) <= most
    for a, b in zip(lo, hi, strict=True):
        assert any(m_lo <= a and b <= m_hi for m_lo, m_hi in merged)


def test_the_plan_is_exact_on_a_small_index_and_stays_within_its_bounds_on_a_large_one():
    small = K.plan_segments(12, 20_000, 2000, 2048)
    assert small == K.SegmentPlan(16, 3) and small.exact_to() >= 12
    for entries in (10**6, 10**7, 10**8, 10**9):
        for documents in (20, 2000, 50_000, 10**6):
            plan = K.plan_segments(12, entries, documents, 2048)
            random_rows = plan.probes_per_document() * entries / 2**plan.width
            assert random_rows <= 2048, (entries, documents, plan)
            read = K.rows_read(plan, entries, documents)
            assert read <= max(K.MIN_READ_BOUND, documents * K.READ_ROWS_PER_MET_ROW * 2048), (entries, plan)
            assert plan.probes_per_document() * documents <= K.MAX_BATCH_PROBES, (entries, documents, plan)
    # a large index is read through wider windows: identical and near-identical fingerprints still met
    assert K.plan_segments(12, 10**8, 2000, 2048).exact_to() >= 3
    assert K.plan_segments(12, 10**8, 2000, 0).exact_to() >= 12  # 0: no bound on what is read
    assert K.plan_segments(3, 10**6, 2000, 2048) == K.SegmentPlan(16, 0)  # exact for k = 3 with 4 probes
    assert K.window_recall(12, 16, 2) == pytest.approx(0.9701, abs=1e-4)
    assert K.window_recall(11, 16, 2) == 1.0 and K.window_recall(5, 32, 2) == 1.0
