"""Pairs within k bits inside band buckets, vectorized (pure numpy).

The band join used to be a Spark self-join: every random collision in a bucket became a joined row before
its popcount threw it away. Here the rows of a partition arrive sorted by (table, key), each bucket is
compared inside one task with XOR + popcount over numpy arrays, and only pairs within k leave. A random
collision then costs a few nanoseconds instead of a shuffled, joined row, which lets the designs for large k
use fewer tables of fewer bits (``core.bands.cheapest_lsh``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from simhash_spark.core.simhash import popcount, to_unsigned

SMALL = 128  # buckets below this size are compared together, grouped by size; larger ones one by one
CHUNK = 1 << 21  # pairs (or matrix cells) held at once


def group_starts(tables: np.ndarray | None, keys: np.ndarray) -> np.ndarray:
    """Start offsets of the runs of equal (table, key) in rows sorted by them (``tables`` None: one table),
    plus the end offset."""
    n = len(keys)
    if n == 0:
        return np.zeros(1, dtype=np.int64)
    differs = keys[1:] != keys[:-1]
    if tables is not None:
        differs |= tables[1:] != tables[:-1]
    change = np.flatnonzero(differs) + 1
    return np.concatenate(([0], change, [n])).astype(np.int64)


def _triu(size: int, cache: dict[int, tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    if size not in cache:
        i, j = np.triu_indices(size, 1)
        cache[size] = (i.astype(np.int64), j.astype(np.int64))
    return cache[size]


def _first_table_is(tables: np.ndarray, diff: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """Whether ``tables`` is the first table whose mask the pair's differing bits avoid; a pair colliding
    in several tables is kept from the first only, so no later distinct is needed."""
    keep = np.ones(len(diff), dtype=bool)
    step = max(1, CHUNK // max(1, len(masks)))
    for s in range(0, len(diff), step):
        shares = (diff[s : s + step, None] & masks[None, :]) == 0
        keep[s : s + step] = np.argmax(shares, axis=1) == tables[s : s + step]
    return keep


def band_join_finds(
    fps: np.ndarray, masks: Sequence[int] | np.ndarray, k: int
) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """Whether the band join over ``masks`` (at ``k``) gives the row pair (i, j) of ``fps``: its
    fingerprints are within ``k`` bits and share a key in some table (its bucket may be hot: then the
    hot-bucket forest stands for it)."""
    u = to_unsigned(np.asarray(fps))
    m = to_unsigned(np.asarray(masks, dtype=np.int64))

    def finds(i: np.ndarray, j: np.ndarray) -> np.ndarray:
        diff = u[i] ^ u[j]
        out = popcount(diff) <= k
        close = np.flatnonzero(out)
        step = max(1, CHUNK // max(1, len(m)))
        for s in range(0, len(close), step):
            part = close[s : s + step]
            out[part] = ((diff[part, None] & m[None, :]) == 0).any(axis=1)
        return out

    return finds


def bucket_pairs(
    tables: np.ndarray, keys: np.ndarray, fps: np.ndarray, *, k: int, masks: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row pairs (i < j) of the same bucket whose fingerprints differ in at most ``k`` bits, each pair once
    over all tables (from the first table in which it collides).

    ``tables`` (int), ``keys`` (int64), ``fps`` (int64 or uint64): rows sorted by (table, key), every bucket
    complete. ``masks``: the tables' masks (int64 or uint64), indexed by table. Returns (i, j, distance).
    """
    u = to_unsigned(fps)
    m = to_unsigned(masks)
    starts = group_starts(np.asarray(tables), np.asarray(keys))
    sizes = np.diff(starts)
    out_i: list[np.ndarray] = []
    out_j: list[np.ndarray] = []
    cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def emit(i: np.ndarray, j: np.ndarray) -> None:
        d = popcount(u[i] ^ u[j])
        close = d <= k
        if close.any():
            out_i.append(i[close])
            out_j.append(j[close])

    for size in np.unique(sizes[(sizes >= 2) & (sizes < SMALL)]).tolist():
        firsts = starts[:-1][sizes == size]
        ti, tj = _triu(size, cache)
        per = max(1, CHUNK // len(ti))
        for s in range(0, len(firsts), per):
            base = firsts[s : s + per, None]
            emit((base + ti).ravel(), (base + tj).ravel())
    for g in np.flatnonzero(sizes >= SMALL).tolist():
        lo, hi = int(starts[g]), int(starts[g + 1])
        block = max(1, CHUNK // (hi - lo))
        for r0 in range(lo, hi, block):
            r1 = min(hi, r0 + block)
            dist = popcount(u[r0:r1, None] ^ u[None, lo:hi])
            rows, cols = np.nonzero(dist <= k)
            i, j = rows + r0, cols + lo
            keep = j > i
            if keep.any():
                out_i.append(i[keep].astype(np.int64))
                out_j.append(j[keep].astype(np.int64))
    if not out_i:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0, dtype=np.int32)
    i = np.concatenate(out_i)
    j = np.concatenate(out_j)
    diff = u[i] ^ u[j]
    first = _first_table_is(np.asarray(tables)[i], diff, m)
    i, j, diff = i[first], j[first], diff[first]
    order = np.lexsort((j, i))
    return i[order], j[order], popcount(diff[order]).astype(np.int32)


@dataclass(frozen=True)
class TableJoin:
    """The band join of whole tables over one array of fingerprints (``join_tables``)."""

    i: np.ndarray  # int64 positions into the fingerprints, i < j, sorted by (i, j)
    j: np.ndarray
    distance: np.ndarray  # int32
    buckets: list[tuple[int, int, int]]  # (size, table, key): every hot bucket and each table's largest


def _table(
    fps: np.ndarray, t: int, masks: np.ndarray, *, k: int, limit: int, top: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[int, int, int]]]:
    """One table: its keys sorted in place (an unstable sort is enough: pairs are a set), buckets over
    ``limit`` left out, the rest compared (``bucket_pairs``, first-table rule over all ``masks``)."""
    keys = fps & masks[t]
    order = np.argsort(keys)
    keys = keys[order]
    starts = group_starts(None, keys)
    sizes = np.diff(starts)
    firsts = keys[starts[:-1]]
    # ties: the smaller key first, as for the Spark path's ordering of (size desc, band, key)
    largest = np.lexsort((firsts, -sizes))[:top]
    notable = {int(b) for b in largest.tolist()} | {int(b) for b in np.flatnonzero(sizes > limit).tolist()}
    buckets = [(int(sizes[b]), t, int(firsts[b])) for b in sorted(notable)]
    keep = np.repeat(sizes <= limit, sizes)
    rows, keys = order[keep], keys[keep]
    i, j, d = bucket_pairs(np.full(len(rows), t, dtype=np.int64), keys, fps[rows], k=k, masks=masks)
    a, b = rows[i], rows[j]
    return np.minimum(a, b), np.maximum(a, b), d, buckets


def rank_buckets(
    buckets: list[tuple[int, int, int]], limit: int, top: int = 10
) -> tuple[list[dict[str, int | str]], list[tuple[int, int]]]:
    """From (size, table, key) rows: the ``top`` largest as summary.json shows them (largest first, then
    by table and key; the key as 16 hex digits of its unsigned value), and the (table, key) of every bucket
    over ``limit``."""
    ranked = sorted(buckets, key=lambda b: (-b[0], b[1], b[2]))
    largest: list[dict[str, int | str]] = [
        {"band": table, "key": f"{key & 0xFFFFFFFFFFFFFFFF:016x}", "fingerprints": size}
        for size, table, key in ranked[:top]
    ]
    return largest, [(table, key) for size, table, key in ranked if size > limit]


def join_tables(
    fps: np.ndarray, masks: np.ndarray, tables: Iterable[int], *, k: int, limit: int, top: int = 10
) -> TableJoin:
    """Pairs within ``k`` bits that share a key in any of ``tables`` (indices into ``masks``), each pair
    from the first table of all ``masks`` in which it collides, so that tables joined apart (one task per
    group of tables) never repeat a pair. Buckets of more than ``limit`` fingerprints are not compared
    (their pairs are resolved as spanning forests) but reported, with each table's ``top`` largest.

    ``fps``: int64 fingerprints (several positions may hold the same value); ``masks``: int64, per table.
    """
    parts = [_table(fps, t, masks, k=k, limit=limit, top=top) for t in tables]
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return TableJoin(empty, empty, np.zeros(0, dtype=np.int32), [])
    i = np.concatenate([p[0] for p in parts])
    j = np.concatenate([p[1] for p in parts])
    d = np.concatenate([p[2] for p in parts])
    order = np.lexsort((j, i))
    return TableJoin(i[order], j[order], d[order].astype(np.int32), [b for p in parts for b in p[3]])
