"""A second source of candidate pairs, independent of the fingerprint's bits (pure numpy): documents whose
32-byte sketches (``core.sketch_filter``) agree in every bin of one of eight bands of four bins.

The sketch is a one-permutation MinHash: two documents at n-gram Jaccard J hold the same byte in a bin
with probability close to J, so all four bins of a band agree with probability about J⁴ and at least one
of the eight bands with 1 − (1 − J⁴)⁸: 0.985 at J = 0.8, 0.9996 at J = 0.9. A pair SimHash puts beyond k
(its bits vote on every n-gram with equal weight, so a few changed paragraphs can move 13–17 bits) is
found here with those odds, whatever its Hamming distance. Unrelated documents agree in a bin about once
in 255 (two different smallest hashes with the same byte), in a whole band about once in 4·10⁹ pairs:
they add a handful of candidates per million documents, which the sketch filter then drops unread.

A band with an empty bin has no key: empty bins agree without any evidence (short documents leave bins
empty), so such a band cannot make a pair a candidate. A key shared by more than ``limit`` documents is
not joined (``drop_hot``): its pairs would be checked one by one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from simhash_spark.core.bucket_pairs import group_starts
from simhash_spark.core.sketch_filter import BINS

BAND_BINS = 4
BANDS = BINS // BAND_BINS
NO_KEY = 0  # a band with an empty bin; a real key has four non-zero bytes, so it is never 0
_CHUNK = 1 << 21  # pairs held at once while a bucket's pairs are listed

PairFilter = Callable[[np.ndarray, np.ndarray], np.ndarray]


def sketch_keys(sketches: np.ndarray) -> np.ndarray:
    """Each document's key per band: its four bytes as one uint32, ``NO_KEY`` where a bin is empty.

    ``sketches``: (n, 32) uint8, one sketch per row. Returns (n, ``BANDS``) uint32."""
    s = np.ascontiguousarray(sketches, dtype=np.uint8).reshape(-1, BANDS, BAND_BINS)
    keys = np.ascontiguousarray(s).view(">u4").reshape(-1, BANDS).astype(np.uint32)
    keys[(s == 0).any(axis=2)] = NO_KEY
    return keys


def stored_keys(stored: Sequence[bytes | None]) -> np.ndarray:
    """``sketch_keys`` of stored sketches (a document without one has no key in any band)."""
    return arrow_stored_keys(pa.array(list(stored), type=pa.binary()))


def arrow_stored_keys(stored: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """``sketch_keys`` of a binary Arrow column of stored sketches (null: no sketch, no key in any band)."""
    return sketch_keys(arrow_sketch_matrix(stored)[0])


def arrow_sketch_matrix(stored: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """A binary Arrow column of stored sketches as ((n, 32) uint8, whether each row has one): a row
    without a sketch (null) is all zeros, whose bands have no key."""
    if isinstance(stored, pa.ChunkedArray):
        stored = stored.combine_chunks()
    raw = np.zeros((len(stored), BINS), dtype=np.uint8)
    present = stored.is_valid()
    held = present.to_numpy(zero_copy_only=False)
    # a sketch of another length raises here (pa.ArrowInvalid)
    fixed = stored.filter(present).cast(pa.binary(BINS))
    data = np.frombuffer(fixed.buffers()[1], dtype=np.uint8)
    raw[held] = data[fixed.offset * BINS : (fixed.offset + len(fixed)) * BINS].reshape(-1, BINS)
    return raw, held


def share_band(keys_a: np.ndarray, keys_b: np.ndarray) -> np.ndarray:
    """Per row of two key matrices: whether the two documents share a key in some band."""
    return ((keys_a == keys_b) & (keys_a != NO_KEY)).any(axis=1)


def rows_share_band(sketches: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """``share_band`` of the row pairs (i, j) of a sketch matrix ((n, 32) uint8, a row without a sketch all
    zeros: it shares no band)."""
    return share_band(sketch_keys(sketches[i]), sketch_keys(sketches[j]))


def stored_share_band(stored_a: Sequence[bytes | None], stored_b: Sequence[bytes | None]) -> np.ndarray:
    """``share_band`` of pairs of stored sketches (False where either document has none)."""
    return share_band(stored_keys(stored_a), stored_keys(stored_b))


@dataclass(frozen=True)
class HotKey:
    band: int
    key: int
    size: int


def drop_hot(keys: np.ndarray, limit: int) -> tuple[np.ndarray, list[HotKey]]:
    """``keys`` with every key held by more than ``limit`` documents in its band replaced by ``NO_KEY``,
    and those keys (by band, then key)."""
    out = keys.copy()
    hot: list[HotKey] = []
    for band in range(keys.shape[1]):
        column = keys[:, band]
        values, counts = np.unique(column[column != NO_KEY], return_counts=True)
        over = counts > limit
        if over.any():
            hot += [HotKey(band, int(v), int(c)) for v, c in zip(values[over], counts[over], strict=True)]
            out[np.isin(column, values[over]), band] = NO_KEY
    return out, hot


def without_keys(keys: np.ndarray, hot: Iterable[tuple[int, int]]) -> np.ndarray:
    """``keys`` with the given (band, key) pairs replaced by ``NO_KEY`` (the keys ``drop_hot`` dropped from
    the join: a pair sharing only those shares no band, wherever it is judged)."""
    out = keys.copy()
    for band, key in hot:
        out[out[:, band] == key, band] = NO_KEY
    return out


def _first_shared_band(keys: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """The first band in which rows i and j share a key (each pair shares one)."""
    return np.argmax((keys[i] == keys[j]) & (keys[i] != NO_KEY), axis=1)


def _bucket_pairs(rows: np.ndarray, starts: np.ndarray) -> Iterable[tuple[np.ndarray, np.ndarray]]:
    """Every pair of rows within each run ``rows[starts[g]:starts[g+1]]``, a chunk at a time."""
    sizes = np.diff(starts)
    for size in np.unique(sizes[sizes >= 2]).tolist():
        firsts = starts[:-1][sizes == size]
        ti, tj = np.triu_indices(size, 1)
        per = max(1, _CHUNK // len(ti))
        for s in range(0, len(firsts), per):
            base = firsts[s : s + per, None]
            yield rows[(base + ti).ravel()], rows[(base + tj).ravel()]


def band_pairs(
    keys: np.ndarray, bands: Iterable[int], *, skip: PairFilter | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Row pairs (i < j, sorted) that share a key in any of ``bands``, each from the first band of all in
    which they share one, so that bands joined apart (one task per group of bands) never repeat a pair.
    ``skip(i, j)``: True for the pairs another source already gives (not returned).

    ``keys``: (n, ``BANDS``) as ``sketch_keys`` (after ``drop_hot``)."""
    out_i: list[np.ndarray] = []
    out_j: list[np.ndarray] = []
    for band in bands:
        column = keys[:, band]
        rows = np.flatnonzero(column != NO_KEY)
        rows = rows[np.argsort(column[rows], kind="stable")]
        starts = group_starts(None, column[rows])
        for a, b in _bucket_pairs(rows, starts):
            i, j = np.minimum(a, b), np.maximum(a, b)
            keep = _first_shared_band(keys, i, j) == band
            if skip is not None:
                keep &= ~skip(i, j)
            out_i.append(i[keep])
            out_j.append(j[keep])
    if not out_i:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    i, j = np.concatenate(out_i).astype(np.int64), np.concatenate(out_j).astype(np.int64)
    order = np.lexsort((j, i))
    return i[order], j[order]
