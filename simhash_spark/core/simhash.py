"""Weighted bit voting (SimHash) over batches of documents, and Hamming distance (pure numpy).

Bit i of a fingerprint is bit i of the feature hashes (LSB = bit 0): every feature adds its weight to
the bits it has set and subtracts it from the others; a bit is set when its sum is positive. A tie (sum
zero: common for short texts, whose features are few and often even in number) takes the value of the
nearest following bit (cyclically) whose vote is not tied. That is unbiased, since that bit is, and two
near-duplicates agree on it as often as on any fingerprint bit. Sending every tie to 0 crowded short
texts into fingerprints with few bits set, which then shared band keys.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

BITS = 64


def simhash_batch(hashes: np.ndarray, weights: np.ndarray, counts: Sequence[int] | np.ndarray) -> np.ndarray:
    """Fingerprints of a batch of documents.

    ``hashes`` (uint64) and ``weights`` (float64) hold every document's features back to back; ``counts``
    says how many belong to each document, in order. Returns uint64 fingerprints, 0 for a document
    without features (callers mark those by status, never by value).
    """
    counts = np.asarray(counts, dtype=np.int64)
    n_docs = len(counts)
    out = np.zeros(n_docs, dtype=np.uint64)
    if hashes.size == 0:
        return out
    hashes = np.asarray(hashes, dtype=np.uint64)  # no copy when they are uint64 already
    nonempty = counts > 0
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))[nonempty]
    if np.all(weights == weights[0]) and weights[0] > 0:
        # Equal weights (shingle features): a bit is set when more than half the features set it.
        # Integer counting gives the same bits as the float vote at a fraction of the memory traffic.
        margin = 2 * _bit_counts(hashes, starts, counts[nonempty]) - counts[nonempty, None]
    else:
        bits = _unpacked(hashes)
        w = weights.astype(np.float64)[:, None]
        votes = np.where(bits.view(bool), w, -w)  # +w where the bit is set, -w where it is not
        margin = np.add.reduceat(votes, starts, axis=0)
    set_bits = _resolve_ties(margin, np.minimum.reduceat(hashes, starts))
    packed = np.packbits(set_bits, axis=1, bitorder="little")
    out[nonempty] = packed.view("<u8").reshape(-1)
    return out


def _resolve_ties(margin: np.ndarray, smallest_hash: np.ndarray) -> np.ndarray:
    """Set bits from per-document vote margins (documents × 64): positive → 1, negative → 0, zero → the
    value of the nearest following non-zero margin, cyclically (every margin zero: the bits of the
    document's smallest feature hash)."""
    set_bits = margin > 0
    rows = np.flatnonzero((margin == 0).any(axis=1))
    if rows.size == 0:
        return set_bits
    part, open_ties, bits = margin[rows], margin[rows] == 0, set_bits[rows]
    for shift in range(1, BITS):
        following = np.roll(part, -shift, axis=1)
        take = open_ties & (following != 0)
        bits[take] = following[take] > 0
        open_ties &= ~take
        if not open_ties.any():
            break
    if open_ties.any():
        fallback = np.unpackbits(
            smallest_hash[rows].astype("<u8").view(np.uint8).reshape(-1, 8), axis=1, bitorder="little"
        )
        bits[open_ties] = fallback.view(bool)[open_ties]
    set_bits[rows] = bits
    return set_bits


_BYTE_LANES = np.uint64(0x0101_0101_0101_0101)  # the lowest bit of each byte of a uint64
_SEGMENT = 255  # features summed in one byte lane at most: the sum cannot carry into the next byte
_CHUNK = 1 << 15  # features shifted at a time: the shifted copy stays in the core's cache


def _unpacked(hashes: np.ndarray) -> np.ndarray:
    """Features × 64 array of 0/1 (uint8): bit i of each hash in column i."""
    return np.unpackbits(hashes.astype("<u8").view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")


def _bit_counts(hashes: np.ndarray, starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per document (``counts[i]`` > 0 hashes from ``starts[i]``, back to back to the end of ``hashes``),
    how many of its features set each bit.

    Shifted by k and masked, a hash holds bits k, k+8, ..., k+56 in its eight bytes, so one sum counts
    eight bits at once and eight shifts count all 64. A byte holds 255 at most: each document is summed
    in segments of ``_SEGMENT`` features, whose byte counts are then added per document. The features
    are shifted ``_CHUNK`` at a time (whole segments): the passes over them then read the cache, not
    memory."""
    segments = (counts + (_SEGMENT - 1)) // _SEGMENT
    first = np.cumsum(segments) - segments  # each document's first segment
    within = np.arange(int(segments.sum()), dtype=np.int64) - np.repeat(first, segments)
    seg_starts = np.repeat(np.asarray(starts, dtype=np.int64), segments) + _SEGMENT * within
    sums = np.empty((len(seg_starts), 8), dtype=np.uint64)  # [segment, shift]: eight byte counts
    shifted = np.empty(min(len(hashes), _CHUNK + _SEGMENT), dtype=np.uint64)
    bounds = np.unique(
        np.append(np.searchsorted(seg_starts, np.arange(0, len(hashes), _CHUNK)), len(seg_starts))
    )
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        lo, hi = int(seg_starts[a]), int(seg_starts[b]) if b < len(seg_starts) else len(hashes)
        part, out = hashes[lo:hi], shifted[: hi - lo]
        for k in range(8):
            np.right_shift(part, np.uint64(k), out=out)
            np.bitwise_and(out, _BYTE_LANES, out=out)
            sums[a:b, k] = np.add.reduceat(out, seg_starts[a:b] - lo)
    # byte j of the sum at shift k counts bit 8j + k
    per_bit = sums.astype("<u8", copy=False).view(np.uint8).reshape(-1, 8, 8).transpose(0, 2, 1)
    return np.add.reduceat(per_bit.reshape(-1, BITS), first, axis=0, dtype=np.int32)


def simhash_reference(hashes: Sequence[int], weights: Sequence[float]) -> int:
    """The original article's loop, bit by bit (a tie takes the nearest following untied bit): the
    reference the batched version is tested against."""
    vector = [0.0] * BITS
    for h, w in zip(hashes, weights, strict=True):
        for i in range(BITS):
            vector[i] += w if (h >> i) & 1 else -w
    fp = 0
    for i in range(BITS):
        decided = next((vector[(i + s) % BITS] for s in range(BITS) if vector[(i + s) % BITS] != 0), None)
        if decided is None:  # every bit tied
            bit = bool(hashes) and (min(hashes) >> i) & 1
        else:
            bit = decided > 0
        if bit:
            fp |= 1 << i
    return fp


def to_signed(values: np.ndarray) -> np.ndarray:
    """uint64 → int64 two's-complement view (what Spark's LONG holds)."""
    return np.asarray(values, dtype=np.uint64).view(np.int64)


def to_unsigned(values: np.ndarray) -> np.ndarray:
    """int64 (Spark's LONG view) or unsigned values → uint64, without copying int64 input."""
    a = np.asarray(values)
    return a.view(np.uint64) if a.dtype == np.int64 else np.asarray(a, np.uint64)


_BYTE_BITS = np.array([bin(b).count("1") for b in range(256)], dtype=np.uint8)


def popcount(values: np.ndarray) -> np.ndarray:
    """Set bits of each uint64 (or int64) value, as uint8: ``np.bitwise_count`` on numpy 2, a byte table
    on numpy 1 (which PySpark 3.5 environments often pin)."""
    u = to_unsigned(values)  # numpy counts a negative int64's absolute value
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(u)
    flat = np.ascontiguousarray(u.reshape(-1))
    return _BYTE_BITS[flat.view(np.uint8)].reshape(-1, 8).sum(axis=1, dtype=np.uint8).reshape(u.shape)


def to_hex(value: int) -> str:
    """16 lowercase hex digits of the unsigned value (signed input accepted)."""
    return f"{value & 0xFFFFFFFFFFFFFFFF:016x}"


def hamming(a: int, b: int) -> int:
    """Differing bits between two fingerprints, signed or unsigned."""
    return ((a ^ b) & 0xFFFFFFFFFFFFFFFF).bit_count()
