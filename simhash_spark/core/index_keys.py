"""The index's key tables, as data (pure numpy): the key rows an entry stores, the probes a looked-up
document makes, and which stored rows a probe meets.

An entry is stored once (``entries/``, sorted by fingerprint). What finds it is a few key rows, each a
(key, fingerprint) pair, kept in one sorted table per kind of key:

- table 0, **ids**: Spark's ``xxhash64`` of the id — is a batch id indexed already?
- tables 1–4, the fingerprint's **four 16-bit segments** (the original article's): the key is the
  fingerprint rotated so that segment s leads. A lookup reads them through windows of its plan
  (``SegmentPlan``): four windows of 16 bits (tables 1–4), two of 32 (tables 1 and 3, whose keys lead
  with segments 0–1 and 2–3) or one of 64 (table 1: the fingerprint itself). Two fingerprints within d
  bits differ in at most ⌊d/w⌋ bits of one of w windows (pigeonhole), so a document probes each window
  with its own bits and every value up to ρ bits from them; a probe is the range of keys whose leading
  bits are the probed value. Every fingerprint within w(ρ + 1) − 1 bits is met; beyond, the share
  ``window_recall`` gives. Wider windows meet fewer unrelated entries per probe (entries / 2^width), so
  a large index is read through them.
- tables 5–12, the **sketch bands** (an index with sketch bands): the key is a band's four bins as one
  uint32. A document probes the range of keys that share its first ``SKETCH_PREFIX_BINS`` bins: a stored
  key equal to its own shares the band (a candidate whatever the distance, as the one-shot run's sketch
  bands make it one), a key sharing the prefix only is kept when within k bits.

The key rows are few (13 per entry at most, fewer where fingerprints or keys repeat) and sorted, so a
lookup reads the row groups whose key range holds a probe — what the batch's documents can touch — not
the history. The plan is decided once per lookup (``plan_segments``) from the index's size and the
batch's: exact while the rows a document meets at random, and the batch's probes, stay within bounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations
from math import comb
from typing import Any

import numpy as np

from simhash_spark.core.simhash import popcount
from simhash_spark.core.sketch_bands import BANDS, NO_KEY

ID_TABLE = 0
SEGMENTS = 4
SEGMENT_BITS = 16
FIRST_SEGMENT_TABLE = 1
FIRST_SKETCH_TABLE = FIRST_SEGMENT_TABLE + SEGMENTS
SKETCH_PREFIX_BINS = 3
SKETCH_PREFIX_SHIFT = 8 * (4 - SKETCH_PREFIX_BINS)  # the bits of a band key below its probed prefix
# a batch's probes of the fingerprint tables, at most
MAX_BATCH_PROBES = 10_000_000
# what a lookup plan may read of the segment tables: this many rows per unrelated row its documents may
# meet, or this many rows in all, whichever is more (a small batch reads a small index whole)
READ_ROWS_PER_MET_ROW = 64
MIN_READ_BOUND = 16_000_000
GROUP_ROWS = 8192  # key rows per row group, as the index's files are written (about)
_MEET_CHUNK = 1 << 18  # probes met at once (each meets up to a few thousand rows)


def tables(sketch_bands: bool) -> list[int]:
    """The key tables of an index: ids, segments and, with sketch bands, the bands."""
    return list(range(FIRST_SKETCH_TABLE + (BANDS if sketch_bands else 0)))


def sketch_prefix(key: np.ndarray) -> np.ndarray:
    return np.asarray(key, dtype=np.int64) >> SKETCH_PREFIX_SHIFT


# --- keys --------------------------------------------------------------------------------------------


def rotate(fingerprints: np.ndarray, segment: int) -> np.ndarray:
    """Signed fingerprints rotated left by 16·``segment`` bits (segment 0 = the top 16 bits leads)."""
    u = np.asarray(fingerprints, dtype=np.int64).view(np.uint64)
    s = (SEGMENT_BITS * segment) % 64
    if s == 0:
        return u.view(np.int64).copy()
    return ((u << np.uint64(s)) | (u >> np.uint64(64 - s))).view(np.int64)


def unrotate(keys: np.ndarray, segment: int) -> np.ndarray:
    return rotate(keys, (SEGMENTS - segment) % SEGMENTS)


@dataclass(frozen=True)
class KeyRows:
    """One table's rows: keys and fingerprints, sorted by (key, fingerprint), each pair once."""

    table: int
    key: np.ndarray  # int64
    fingerprint: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.key)


def _sorted_unique(table: int, keys: np.ndarray, fps: np.ndarray) -> KeyRows:
    order = np.lexsort((fps, keys))
    k, f = keys[order], fps[order]
    keep = np.ones(len(k), dtype=bool)
    if len(k) > 1:
        keep[1:] = (k[1:] != k[:-1]) | (f[1:] != f[:-1])
    return KeyRows(table, k[keep], f[keep])


def key_rows(id_hashes: np.ndarray, fingerprints: np.ndarray, band_keys: np.ndarray | None) -> list[KeyRows]:
    """The rows entries store in every table (``tables``), given their id hashes, fingerprints and, for an
    index with sketch bands, their band keys ((n, BANDS) uint32, ``NO_KEY`` where a band has none)."""
    fps = np.asarray(fingerprints, dtype=np.int64)
    out = [_sorted_unique(ID_TABLE, np.asarray(id_hashes, dtype=np.int64), fps)]
    for s in range(SEGMENTS):
        out.append(_sorted_unique(FIRST_SEGMENT_TABLE + s, rotate(fps, s), fps))
    if band_keys is not None:
        for b in range(band_keys.shape[1]):
            has = band_keys[:, b] != NO_KEY
            out.append(_sorted_unique(FIRST_SKETCH_TABLE + b, band_keys[has, b].astype(np.int64), fps[has]))
    return out


# --- probes ------------------------------------------------------------------------------------------


@lru_cache(maxsize=16)
def flip_masks(width: int, radius: int) -> np.ndarray:
    """Every ``width``-bit mask of at most ``radius`` set bits (0 first), as uint64."""
    masks = [0]
    for r in range(1, radius + 1):
        masks += [sum(1 << b for b in bits) for bits in combinations(range(width), r)]
    return np.array(masks, dtype=np.uint64)


@dataclass(frozen=True)
class SegmentPlan:
    """How a lookup reads the segment tables: ``64 // width`` windows of ``width`` bits, each probed with
    the document's own bits and every value up to ``radius`` bits from them."""

    width: int = 16
    radius: int = 0

    @property
    def windows(self) -> int:
        return 64 // self.width

    def tables(self) -> list[int]:
        """The rotation tables whose keys lead with each window."""
        step = self.width // SEGMENT_BITS
        return [FIRST_SEGMENT_TABLE + w * step for w in range(self.windows)]

    @property
    def shift(self) -> int:
        return 64 - self.width

    def probes_per_document(self) -> int:
        return self.windows * len(flip_masks(self.width, self.radius))

    def exact_to(self) -> int:
        """The largest distance every pair within which the probes meet."""
        return self.windows * (self.radius + 1) - 1

    def recall(self, distance: int) -> float:
        return window_recall(distance, self.width, self.radius)

    def describe(self, k: int) -> dict[str, Any]:
        return {
            "probe_width": self.width,
            "probe_radius": self.radius,
            "probes_per_document": self.probes_per_document(),
            "exact_to_bits": self.exact_to(),
            "fingerprint_recall_at_k": round(self.recall(k), 4),
        }


PLANS = tuple(
    SegmentPlan(width, radius) for width, top in ((16, 4), (32, 3), (64, 2)) for radius in range(top + 1)
)


def rows_read(plan: SegmentPlan, entries: int, documents: int) -> float:
    """About how many segment-table rows a lookup of ``documents`` reads: of each window's table (about
    ``entries`` rows in groups of ``GROUP_ROWS``), the row groups some probe falls in."""
    groups = max(1.0, entries / GROUP_ROWS)
    probes = max(1, documents) * len(flip_masks(plan.width, plan.radius))
    return plan.windows * entries * -math.expm1(-probes / groups)


def plan_segments(k: int, entries: int, documents: int, rows_per_document: int) -> SegmentPlan:
    """The segment probes of a lookup of ``documents`` in an index of ``entries``, among the plans that
    stay within bounds — their probes meet at most ``rows_per_document`` unrelated entries per document
    (``entries / 2^width`` a probe), read at most ``READ_ROWS_PER_MET_ROW`` times that many rows per
    document or ``MIN_READ_BOUND`` rows (``rows_read``), and hold at most ``MAX_BATCH_PROBES`` probes;
    ``rows_per_document`` 0: no bound but the last —: the cheapest that meets every pair within ``k``;
    where none does, the one exact to the most bits (the near-identical pairs every run must find), then
    with the best recall at ``k``."""
    read_bound = max(MIN_READ_BOUND, max(1, documents) * READ_ROWS_PER_MET_ROW * rows_per_document)

    def fits(p: SegmentPlan) -> bool:
        if p.probes_per_document() * max(1, documents) > MAX_BATCH_PROBES:
            return False
        if rows_per_document <= 0:
            return True
        met = p.probes_per_document() * entries / (1 << p.width)
        return met <= rows_per_document and rows_read(p, entries, documents) <= read_bound

    allowed = [p for p in PLANS if fits(p)] or [SegmentPlan(64, 0)]
    exact = [p for p in allowed if p.exact_to() >= k]
    if exact:
        return min(exact, key=lambda p: p.probes_per_document())
    return max(allowed, key=lambda p: (p.exact_to(), round(p.recall(k), 6), -p.probes_per_document()))


@dataclass(frozen=True)
class Probes:
    """One table's probes: the value ``key >> shift`` must equal, and the document asking."""

    table: int
    value: np.ndarray  # int64
    query: np.ndarray  # int64: the document's position
    shift: int = 0

    def ranges(self) -> tuple[np.ndarray, np.ndarray]:
        """The key range [lo, hi] of each probe (signed, as keys are stored)."""
        if self.shift == 0:
            return self.value, self.value
        lo = self.value << np.int64(self.shift)  # a signed shift keeps the sign: the range stays contiguous
        return lo, lo + np.int64((1 << self.shift) - 1)


def _signed(values: np.ndarray, width: int) -> np.ndarray:
    """``width``-bit values read as the arithmetic shift of a stored (signed) key reads them."""
    v = values.astype(np.uint64)
    if width == 64:
        return v.view(np.int64)
    top = np.uint64(1 << (width - 1))
    out = v.astype(np.int64)
    return np.where(v >= top, out - np.int64(1 << width), out)


def segment_probes(fingerprints: np.ndarray, plan: SegmentPlan) -> list[Probes]:
    fps = np.asarray(fingerprints, dtype=np.int64)
    masks = flip_masks(plan.width, plan.radius)
    queries = np.repeat(np.arange(len(fps), dtype=np.int64), len(masks))
    out = []
    for window, table in enumerate(plan.tables()):
        rotated = rotate(fps, window * plan.width // SEGMENT_BITS).view(np.uint64)
        lead = rotated >> np.uint64(plan.shift) if plan.shift else rotated
        values = _signed(np.repeat(lead, len(masks)) ^ np.tile(masks, len(fps)), plan.width)
        out.append(Probes(table, values, queries, plan.shift))
    return out


def sketch_probes(band_keys: np.ndarray) -> list[Probes]:
    """The sketch tables' probes of documents with band keys ((n, BANDS) uint32)."""
    out = []
    for b in range(band_keys.shape[1]):
        has = np.flatnonzero(band_keys[:, b] != NO_KEY)
        values = sketch_prefix(band_keys[has, b].astype(np.int64))
        out.append(Probes(FIRST_SKETCH_TABLE + b, values, has.astype(np.int64), SKETCH_PREFIX_SHIFT))
    return out


def id_probes(id_hashes: np.ndarray) -> Probes:
    hashes = np.asarray(id_hashes, dtype=np.int64)
    return Probes(ID_TABLE, hashes, np.arange(len(hashes), dtype=np.int64))


# --- meeting stored rows -----------------------------------------------------------------------------


def meet(rows: KeyRows, probes: Probes) -> tuple[np.ndarray, np.ndarray]:
    """(probe, row) of every stored row a probe meets: ``rows.key >> shift == probe.value``."""
    lo, hi = probes.ranges()
    first = np.searchsorted(rows.key, lo, side="left")
    last = np.searchsorted(rows.key, hi, side="right")
    counts = last - first
    probe = np.repeat(np.arange(len(lo), dtype=np.int64), counts)
    starts = np.repeat(first - (np.cumsum(counts) - counts), counts)
    return probe, np.arange(len(probe), dtype=np.int64) + starts


def touched(
    rows: KeyRows,
    probes: Probes,
    query_fingerprints: np.ndarray,
    k: int,
    query_band_keys: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(query, stored fingerprint) of the stored rows a document's probes touch: within ``k`` bits of
    it, or (sketch tables) holding the very band key it holds (``query_band_keys``), whatever the
    distance. Ids: every row whose key is the probed hash. The probes meet their rows a chunk at a time:
    what is held at once stays bounded whatever the batch."""
    fps = np.asarray(query_fingerprints, dtype=np.int64)
    out_q, out_f = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for start in range(0, len(probes.value), _MEET_CHUNK):
        chunk = Probes(
            probes.table,
            probes.value[start : start + _MEET_CHUNK],
            probes.query[start : start + _MEET_CHUNK],
            probes.shift,
        )
        probe, row = meet(rows, chunk)
        query, stored = chunk.query[probe], rows.fingerprint[row]
        if rows.table != ID_TABLE:
            keep = popcount(stored ^ fps[query]) <= k
            if rows.table >= FIRST_SKETCH_TABLE and query_band_keys is not None:
                band = rows.table - FIRST_SKETCH_TABLE
                keep |= rows.key[row] == query_band_keys[query, band].astype(np.int64)
            query, stored = query[keep], stored[keep]
        out_q.append(query)
        out_f.append(stored)
    return np.concatenate(out_q), np.concatenate(out_f)


def groups_holding(lows: np.ndarray, highs: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Which of the row groups with key ranges [lows, highs] can hold a key of some probe range [lo, hi]."""
    if not len(lo):
        return np.zeros(len(lows), dtype=bool)
    order = np.argsort(lo, kind="stable")
    lo_sorted, hi_max = lo[order], np.maximum.accumulate(hi[order])
    upto = np.searchsorted(lo_sorted, highs, side="right")  # probes starting at or before the group's end
    held = upto > 0
    held[held] = hi_max[upto[held] - 1] >= lows[held]
    return held


def merged_ranges(lo: np.ndarray, hi: np.ndarray, most: int) -> list[tuple[int, int]]:
    """At most ``most`` ranges covering every [lo, hi]: overlapping ranges joined, then the smallest gaps
    closed (a reader pushes them down to skip what lies between)."""
    if not len(lo):
        return []
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], np.maximum.accumulate(hi[order])
    starts = np.ones(len(lo), dtype=bool)
    starts[1:] = lo[1:] > hi[:-1]
    first = np.flatnonzero(starts)
    ends = np.append(first[1:] - 1, len(lo) - 1)
    run_lo, run_hi = lo[first], hi[ends]
    if len(run_lo) > most:
        gaps = run_lo[1:].astype(np.float64) - run_hi[:-1].astype(np.float64)
        keep_gap = np.zeros(len(gaps), dtype=bool)
        keep_gap[np.argsort(-gaps, kind="stable")[: most - 1]] = True
        cut = np.append(np.flatnonzero(keep_gap), len(run_lo) - 1)
        begin = np.append(0, cut[:-1] + 1)
        run_lo, run_hi = run_lo[begin], run_hi[cut]
    return list(zip(run_lo.tolist(), run_hi.tolist(), strict=True))


# --- recall --------------------------------------------------------------------------------------------


@lru_cache(maxsize=512)
def window_recall(distance: int, width: int, radius: int) -> float:
    """The share of fingerprint pairs at ``distance`` bits that the probes of ``64 // width`` windows of
    ``width`` bits with ``radius`` meet: some window holds at most ``radius`` of the differing bits (an
    exact count over where the differing bits can lie)."""
    windows = 64 // width

    @lru_cache(None)
    def apart(window: int, left: int) -> int:  # placements with every window beyond the radius
        if window == windows:
            return 1 if left == 0 else 0
        top = min(width, left)
        return sum(comb(width, c) * apart(window + 1, left - c) for c in range(radius + 1, top + 1))

    return 1.0 - apart(0, distance) / comb(64, distance)
