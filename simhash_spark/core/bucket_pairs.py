"""Pairs within k bits inside band buckets, vectorized (pure numpy).

The band join used to be a Spark self-join: every random collision in a bucket became a joined row before
its popcount threw it away. Here the rows of a partition arrive sorted by (table, key), each bucket is
compared inside one task with XOR + popcount over numpy arrays, and only pairs within k leave. A random
collision then costs a few nanoseconds instead of a shuffled, joined row, which lets the designs for large k
use fewer tables of fewer bits (``core.bands.cheapest_lsh``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from simhash_spark.core.simhash import popcount, to_unsigned

SMALL = 128  # buckets below this size are compared together, by offsets; larger ones one by one
CHUNK = 1 << 21  # pairs (or matrix cells) held at once
DENSE_SHARE = 0.2  # below this share of rows with a partner d places on, only those rows are compared


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


def _small_bucket_pairs(
    u: np.ndarray, starts: np.ndarray, sizes: np.ndarray, k: int
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Row pairs (i, i + d) within ``k`` of the buckets under ``SMALL`` rows, one offset d at a time: a row
    meets the row d places on when at least d rows follow it in its bucket. While most rows qualify the
    whole array is compared with itself shifted (no gathers); after that only the rows that still
    qualify, which shrink with d."""
    n = len(u)
    small = (sizes >= 2) & (sizes < SMALL)
    out_i: list[np.ndarray] = []
    out_j: list[np.ndarray] = []
    if not small.any():
        return out_i, out_j
    # rows after each row in its bucket; none for the rows of large buckets (compared apart)
    after = np.where(np.repeat(small, sizes), np.repeat(starts[1:], sizes) - np.arange(n) - 1, 0)
    after = after.astype(np.min_scalar_type(SMALL))  # fewer bytes to read at every offset
    rows: np.ndarray | None = None
    for d in range(1, int(sizes[small].max())):
        if rows is None:
            qualifies = after[: n - d] >= d
            if np.count_nonzero(qualifies) >= DENSE_SHARE * (n - d):
                found = np.flatnonzero(qualifies & (popcount(u[: n - d] ^ u[d:]) <= k))
                out_i.append(found)
                out_j.append(found + d)
                continue
            rows = np.flatnonzero(qualifies)
        else:
            rows = rows[after[rows] >= d]
        found = rows[popcount(u[rows] ^ u[rows + d]) <= k]
        out_i.append(found)
        out_j.append(found + d)
    return out_i, out_j


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
    fps: np.ndarray, masks: Sequence[int] | np.ndarray, k: int, flood: np.ndarray | None = None
) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """Whether the band join over ``masks`` (at ``k``) gives the row pair (i, j) of ``fps``: its
    fingerprints are within ``k`` bits and share a key in some table (its bucket may be hot: then the
    hot buckets' members stand for it), or both are ``flood`` members (``flood_rows``)."""
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
        if flood is not None:  # pairs of flood members: resolved by core.flood
            out |= flood[i] & flood[j]
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
    tables = np.asarray(tables)
    starts = group_starts(tables, np.asarray(keys))
    return _pairs_in_buckets(
        starts, lambda rows: tables[rows], to_unsigned(fps), k=k, masks=to_unsigned(masks)
    )


def _pairs_in_buckets(
    starts: np.ndarray,
    table_of: Callable[[np.ndarray], np.ndarray],
    u: np.ndarray,
    *,
    k: int,
    masks: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``bucket_pairs`` of the buckets ``u[starts[b]:starts[b + 1]]`` (uint64), ``table_of`` giving the table
    of rows (an array of row positions)."""
    sizes = np.diff(starts)
    out_i, out_j = _small_bucket_pairs(u, starts, sizes, k)
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
    first = _first_table_is(table_of(i), diff, masks)
    i, j, diff = i[first], j[first], diff[first]
    order = np.lexsort((j, i))
    return i[order], j[order], popcount(diff[order]).astype(np.int32)


def compact_keys(u: np.ndarray, mask: int) -> tuple[np.ndarray, int]:
    """(keys, width): the bits of ``u`` (uint64) under ``mask`` moved down to the low ``width`` bits, in
    order (what x86's PEXT does), as uint32 — two values share a key exactly when they agree under the
    mask, and keys sort as the masked values do; a mask of more than 32 bits: the masked values (uint64).

    One lookup per byte of the mask: a 256-entry table maps the byte's masked bits to their place in the
    key."""
    mask &= 0xFFFFFFFFFFFFFFFF
    width = mask.bit_count()
    if width > 32:
        return u & np.uint64(mask), width
    as_bytes = np.ascontiguousarray(u).view(np.uint8).reshape(-1, 8)
    values = np.arange(256, dtype=np.uint32)
    keys = np.zeros(len(u), dtype=np.uint32)
    shift = 0
    for byte in range(8):
        bits = [b for b in range(8) if mask >> (8 * byte + b) & 1]
        if not bits:
            continue
        lookup = np.zeros(256, dtype=np.uint32)
        for place, b in enumerate(bits):
            lookup |= ((values >> b) & 1) << (shift + place)
        shift += len(bits)
        keys |= np.take(lookup, as_bytes[:, byte if sys.byteorder == "little" else 7 - byte])
    return keys, width


def key_order(keys: np.ndarray, width: int) -> np.ndarray:
    """Positions that sort ``compact_keys``' keys: up to 32 bits, one or two stable passes over 16-bit
    digits (numpy sorts 16-bit integers by radix, in linear time); wider keys by comparison."""
    if width > 32:
        return np.argsort(keys)
    order = np.argsort(keys.astype(np.uint16), kind="stable")
    if width > 16:
        high = (keys >> np.uint32(16)).astype(np.uint16)[order]
        order = order[np.argsort(high, kind="stable")]
    return order


@dataclass(frozen=True)
class TableJoin:
    """The band join of whole tables over one array of fingerprints (``join_tables``)."""

    i: np.ndarray  # int64 positions into the fingerprints, i < j, sorted by (i, j)
    j: np.ndarray
    distance: np.ndarray  # int32
    buckets: list[tuple[int, int, int]]  # (size, table, key): every hot bucket and each table's largest


def _table(
    fps: np.ndarray,
    t: int,
    masks: np.ndarray,
    *,
    k: int,
    limit: int,
    top: int,
    flood: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[int, int, int]]]:
    """One table: its rows grouped by key (``compact_keys``, ``key_order``; any order inside a bucket is
    enough: pairs are a set), buckets over ``limit`` left out, the rest compared (first-table rule over all
    ``masks``)."""
    u = to_unsigned(fps)
    keys, width = compact_keys(u, int(masks[t]))
    order = key_order(keys, width)
    starts = group_starts(None, keys[order])
    sizes = np.diff(starts)

    def key_of(b: np.ndarray) -> np.ndarray:  # buckets' keys as the masked (signed) fingerprints
        return fps[order[starts[b]]] & masks[t]

    hot = np.flatnonzero(sizes > limit)
    notable = np.union1d(_largest_buckets(sizes, key_of, top), hot)
    keys_of_notable = key_of(notable).tolist()
    buckets = [(int(n), t, int(f)) for n, f in zip(sizes[notable].tolist(), keys_of_notable, strict=True)]
    rows, kept_starts = order, starts
    if len(hot) or flood is not None:
        kept = np.repeat(sizes <= limit, sizes)
        if flood is not None:
            kept &= ~flood[order]
        rows = order[kept]
        kept_sizes = np.diff(group_starts(None, keys[rows]))
        kept_starts = np.concatenate(([0], np.cumsum(kept_sizes))).astype(np.int64)
    table_m = to_unsigned(masks)
    i, j, d = _pairs_in_buckets(kept_starts, lambda r: np.full(len(r), t), u[rows], k=k, masks=table_m)
    a, b = rows[i], rows[j]
    if flood is not None:  # hot buckets' members are all resolved together: not merged
        small = order[np.repeat(sizes <= limit, sizes)]
        fa, fb, fd = _flood_pairs(u, keys, small, flood, t, k=k, masks=table_m)
        a, b, d = np.concatenate([a, fa]), np.concatenate([b, fb]), np.concatenate([d, fd])
    return np.minimum(a, b), np.maximum(a, b), d, buckets


def _flood_pairs(
    u: np.ndarray,
    keys: np.ndarray,
    order: np.ndarray,
    flood: np.ndarray,
    t: int,
    *,
    k: int,
    masks: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One table's pairs of a flood member and another fingerprint (flood members among themselves are
    resolved by ``core.flood``), among the rows ``order`` (sorted by key): each other fingerprint meets
    the flood members of its key."""
    sorted_keys = keys[order]
    is_flood = flood[order]
    f_rows, f_keys = order[is_flood], sorted_keys[is_flood]
    n_rows, n_keys = order[~is_flood], sorted_keys[~is_flood]
    lo = np.searchsorted(f_keys, n_keys, side="left")
    count = np.searchsorted(f_keys, n_keys, side="right") - lo
    if not count.sum():
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0, dtype=np.int32)
    a = np.repeat(n_rows, count)
    starts = np.repeat(lo - (np.cumsum(count) - count), count)
    b = f_rows[starts + np.arange(len(a))]
    diff = u[a] ^ u[b]
    close = (popcount(diff) <= k) & _first_table_is(np.full(len(a), t), diff, masks)
    return a[close], b[close], popcount(diff[close]).astype(np.int32)


PROBE_TABLES = 8  # tables a flood is looked for in
CROWD = 16  # a fingerprint meeting this many times the others chance would give it there is in a flood


def flood_rows(
    fps: np.ndarray, masks: np.ndarray, *, limit: int
) -> tuple[np.ndarray, list[tuple[int, int, int]]]:
    """The fingerprints of floods (many near-variants of one text), found before the join, and the
    buckets, as (size, table, key), through which ``transforms.hot_buckets`` gathers them.

    A flood puts its members in large buckets of every table. A fingerprint whose buckets in the first
    ``PROBE_TABLES`` tables hold more others than ``CROWD`` times what chance gives (n / 2^bits a table)
    and more than ``limit // CROWD`` makes one, and so does every fingerprint that shares one of those
    buckets with it. Their pairs among themselves are left out of the join (``join_tables(flood=...)``):
    all of them are resolved together (``core.flood``)."""
    u = to_unsigned(fps)
    degree = np.zeros(len(u), dtype=np.int64)
    tables = []
    for t in range(min(PROBE_TABLES, len(masks))):
        keys, width = compact_keys(u, int(masks[t]))
        order = key_order(keys, width)
        starts = group_starts(None, keys[order])
        sizes = np.diff(starts)
        tables.append((t, order, starts, sizes))
        degree[order] += np.repeat(sizes - 1, sizes)
    chance = sum(len(u) / 2 ** (int(m) & 0xFFFFFFFFFFFFFFFF).bit_count() for m in masks[: len(tables)])
    crowded = degree > max(limit // CROWD, CROWD * chance)
    member = crowded.copy()
    buckets: list[tuple[int, int, int]] = []
    if not crowded.any():
        return member, buckets
    for t, order, starts, sizes in tables:
        chosen = (np.add.reduceat(crowded[order].astype(np.int64), starts[:-1]) > 0) & (sizes > 1)
        buckets += _buckets_of(fps, masks, t, order, starts, sizes, np.flatnonzero(chosen))
        member[order[np.repeat(chosen, sizes)]] = True
    return member, buckets


def in_buckets(fps: np.ndarray, masks: np.ndarray, buckets: Sequence[tuple[int, int]]) -> np.ndarray:
    """Which of ``fps`` (int64) lie in one of ``buckets`` ((table, key), keys as Spark's LONG)."""
    by_table: dict[int, list[int]] = {}
    for table, key in buckets:
        by_table.setdefault(table, []).append(key)
    inside = np.zeros(len(fps), dtype=bool)
    for table, keys in by_table.items():
        inside |= np.isin(fps & np.int64(masks[table]), np.array(keys, dtype=np.int64))
    return inside


def _buckets_of(
    fps: np.ndarray,
    masks: np.ndarray,
    t: int,
    order: np.ndarray,
    starts: np.ndarray,
    sizes: np.ndarray,
    chosen: np.ndarray,
) -> list[tuple[int, int, int]]:
    firsts = to_unsigned(fps)[order[starts[chosen]]].view(np.int64) & masks[t]  # keys as Spark's LONG
    return [(int(n), t, int(f)) for n, f in zip(sizes[chosen].tolist(), firsts.tolist(), strict=True)]


def _largest_buckets(sizes: np.ndarray, key_of: Callable[[np.ndarray], np.ndarray], top: int) -> np.ndarray:
    """The ``top`` largest buckets (indices; ties: the smaller key first, ``key_of`` giving the keys of
    buckets, as the Spark path orders (size desc, band, key)). Only the buckets as large as the ``top``-th
    are ranked: a table holds tens of thousands."""
    if top <= 0:
        return np.zeros(0, dtype=np.int64)
    candidates = np.arange(len(sizes))
    if len(sizes) > top:
        cut = np.partition(sizes, len(sizes) - top)[len(sizes) - top]
        candidates = np.flatnonzero(sizes >= cut)
    ranked = candidates[np.lexsort((key_of(candidates), -sizes[candidates]))]
    return ranked[:top]


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
    fps: np.ndarray,
    masks: np.ndarray,
    tables: Iterable[int],
    *,
    k: int,
    limit: int,
    top: int = 10,
    flood: np.ndarray | None = None,
) -> TableJoin:
    """Pairs within ``k`` bits that share a key in any of ``tables`` (indices into ``masks``), each pair
    from the first table of all ``masks`` in which it collides, so that tables joined apart (one task per
    group of tables) never repeat a pair. Buckets of more than ``limit`` fingerprints are not compared
    (their pairs are resolved as spanning forests) but reported, with each table's ``top`` largest.

    ``fps``: int64 fingerprints (several positions may hold the same value); ``masks``: int64, per table.
    ``flood`` (``flood_rows``): fingerprints whose pairs among themselves are left out.
    """
    parts = [_table(fps, t, masks, k=k, limit=limit, top=top, flood=flood) for t in tables]
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return TableJoin(empty, empty, np.zeros(0, dtype=np.int32), [])
    i = np.concatenate([p[0] for p in parts])
    j = np.concatenate([p[1] for p in parts])
    d = np.concatenate([p[2] for p in parts])
    order = np.lexsort((j, i))
    return TableJoin(i[order], j[order], d[order].astype(np.int32), [b for p in parts for b in p[3]])
