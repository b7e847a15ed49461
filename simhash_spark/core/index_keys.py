"""The index's key tables, as data (pure numpy): the key rows an entry stores, the probes a looked-up
document makes, and which stored rows a probe meets.

An entry is stored once (``entries/``, sorted by fingerprint). What finds it is a few key rows, each a
(key, fingerprint) pair, kept in one sorted table per kind of key:

- table 0, **ids**: Spark's ``xxhash64`` of the id — is a batch id indexed already?
- tables 1–4, the fingerprint's **four 16-bit segments** (the original article's): the key is the
  fingerprint rotated so that segment s leads. Two fingerprints within d bits differ in at most ⌊d/4⌋
  bits of some segment (pigeonhole), so a document probes, in each segment table, its own segment with
  up to ρ of its 16 bits flipped; each probe is the range of keys whose leading 16 bits are the probed
  value. Every fingerprint within 4ρ + 3 bits is met; beyond that, a share ``segment_recall`` gives.
- tables 5–12, the **sketch bands** (an index with sketch bands): the key is a band's four bins as one
  uint32. A document probes the range of keys that share its first ``SKETCH_PREFIX_BINS`` bins: a stored
  key equal to its own shares the band (a candidate whatever the distance, as the one-shot run's sketch
  bands make it one), a key sharing the prefix only is kept when within k bits.

The key rows are few (13 per entry at most, fewer where fingerprints or keys repeat) and sorted, so a
lookup reads the row groups whose key range holds a probe — what the batch's documents can touch — not
the history. ρ is decided per lookup (``probe_radius``) from the index's size: exact while the rows a
document meets at random stay within a budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
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
MAX_RADIUS = 4  # 10,068 probes a document: exact to 19 bits


def tables(sketch_bands: bool) -> list[int]:
    """The key tables of an index: ids, segments and, with sketch bands, the bands."""
    return list(range(FIRST_SKETCH_TABLE + (BANDS if sketch_bands else 0)))


def table_kind(table: int) -> str:
    if table == ID_TABLE:
        return "id"
    return "segment" if table < FIRST_SKETCH_TABLE else "sketch"


def prefix_shift(table: int) -> int:
    """The bits of a key below the part a probe fixes: a probe meets the keys whose ``key >> shift`` is
    its value (ids: the whole key)."""
    kind = table_kind(table)
    if kind == "id":
        return 0
    return 64 - SEGMENT_BITS if kind == "segment" else SKETCH_PREFIX_SHIFT


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


@lru_cache(maxsize=8)
def flip_masks(radius: int) -> np.ndarray:
    """Every 16-bit mask of at most ``radius`` set bits (0 first), as uint64."""
    masks = [m for m in range(1 << SEGMENT_BITS) if m.bit_count() <= radius]
    return np.array(sorted(masks, key=lambda m: (m.bit_count(), m)), dtype=np.uint64)


def probes_per_document(radius: int, sketch_bands: bool) -> int:
    return 1 + SEGMENTS * len(flip_masks(radius)) + (BANDS if sketch_bands else 0)


@dataclass(frozen=True)
class Probes:
    """One table's probes: the value ``key >> prefix_shift(table)`` must equal, and the document asking."""

    table: int
    value: np.ndarray  # int64
    query: np.ndarray  # int64: the document's position

    def ranges(self) -> tuple[np.ndarray, np.ndarray]:
        """The key range [lo, hi] of each probe (signed, as keys are stored)."""
        shift = prefix_shift(self.table)
        if shift == 0:
            return self.value, self.value
        lo = self.value << np.int64(shift)  # a signed shift keeps the sign: the range stays contiguous
        return lo, lo + np.int64((1 << shift) - 1)


def segment_probes(fingerprints: np.ndarray, radius: int) -> list[Probes]:
    fps = np.asarray(fingerprints, dtype=np.int64)
    masks = flip_masks(radius)
    queries = np.repeat(np.arange(len(fps), dtype=np.int64), len(masks))
    out = []
    for s in range(SEGMENTS):
        lead = rotate(fps, s).view(np.uint64) >> np.uint64(64 - SEGMENT_BITS)
        values = (np.repeat(lead, len(masks)) ^ np.tile(masks, len(fps))).astype(np.int64)
        # as the stored key's arithmetic shift reads it: a leading 1 is negative
        values = np.where(values >= 1 << (SEGMENT_BITS - 1), values - (1 << SEGMENT_BITS), values)
        out.append(Probes(FIRST_SEGMENT_TABLE + s, values, queries))
    return out


def sketch_probes(band_keys: np.ndarray) -> list[Probes]:
    """The sketch tables' probes of documents with band keys ((n, BANDS) uint32)."""
    out = []
    for b in range(band_keys.shape[1]):
        has = np.flatnonzero(band_keys[:, b] != NO_KEY)
        values = band_keys[has, b].astype(np.int64) >> SKETCH_PREFIX_SHIFT
        out.append(Probes(FIRST_SKETCH_TABLE + b, values, has.astype(np.int64)))
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
    distance. Ids: every row whose key is the probed hash."""
    probe, row = meet(rows, probes)
    query = probes.query[probe]
    stored = rows.fingerprint[row]
    if rows.table == ID_TABLE:
        return query, stored
    keep = popcount(stored ^ np.asarray(query_fingerprints, dtype=np.int64)[query]) <= k
    if rows.table >= FIRST_SKETCH_TABLE and query_band_keys is not None:
        band = rows.table - FIRST_SKETCH_TABLE
        keep |= rows.key[row] == query_band_keys[query, band].astype(np.int64)
    return query[keep], stored[keep]


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


# --- the probe radius --------------------------------------------------------------------------------


def exact_to(radius: int) -> int:
    """The largest distance every pair within which the segment probes of ``radius`` meet."""
    return SEGMENTS * (radius + 1) - 1


def radius_for(k: int) -> int:
    """The smallest radius that meets every pair within ``k`` bits (capped at ``MAX_RADIUS``)."""
    return min(MAX_RADIUS, max(0, -(-(k + 1) // SEGMENTS) - 1))


@lru_cache(maxsize=256)
def segment_recall(distance: int, radius: int) -> float:
    """The share of fingerprint pairs at ``distance`` bits whose segment probes meet (exact count over
    where the differing bits can lie among the four segments)."""
    if distance <= exact_to(radius):
        return 1.0

    @lru_cache(None)
    def apart(segment: int, left: int) -> int:  # placements with every segment beyond the radius
        if segment == SEGMENTS:
            return 1 if left == 0 else 0
        top = min(SEGMENT_BITS, left)
        return sum(comb(SEGMENT_BITS, c) * apart(segment + 1, left - c) for c in range(radius + 1, top + 1))

    return 1.0 - apart(0, distance) / comb(64, distance)


def probe_radius(k: int, entries: int, rows_per_document: int) -> int:
    """The segment probes' radius for a lookup in an index of ``entries``: the exact one for ``k``
    (``radius_for``) while a document's probes meet at most ``rows_per_document`` rows of unrelated
    entries (each probe meets entries / 2^16 of them), else the largest within that; 0 at least.
    ``rows_per_document`` 0: always the exact one."""
    exact = radius_for(k)
    if rows_per_document <= 0:
        return exact
    per_probe = entries / (1 << SEGMENT_BITS)
    radius = 0
    for r in range(1, exact + 1):
        if SEGMENTS * len(flip_masks(r)) * per_probe <= rows_per_document:
            radius = r
    return radius


def describe_radius(radius: int, k: int) -> dict[str, Any]:
    return {
        "probe_radius": radius,
        "exact_to_bits": exact_to(radius),
        "fingerprint_recall_at_k": round(segment_recall(k, radius), 4),
    }
