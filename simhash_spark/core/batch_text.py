"""A batch of documents normalized with array operations over all their code points at once (pure numpy).

``flat_rows`` gives, for every document that ``core.char_table`` can normalize character by character,
what the fingerprint needs of ``normalize``'s result — its letters (``compact_codepoints``) — without
building the normalized string. The other documents (markup, combining marks, nulls, texts that may be
truncated, empty or too short) are left to ``normalize``; tests/test_batch_text.py holds the two to the
same results.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simhash_spark.core.char_table import CONTEXT, CharTable, char_table
from simhash_spark.core.normalize import NormalizeOptions, normalize
from simhash_spark.core.shingles import compact_codepoints

# Code points looked up in one pass: the per-character arrays stay a few tens of MB whatever the batch.
_GROUP_CODEPOINTS = 1 << 21


@dataclass(frozen=True)
class FlatRows:
    """Every row's letters back to back: row i's are ``letters[starts[i] : starts[i] + n_letters[i]]``
    where ``alone[i]`` (the rows normalized here; the others' are empty)."""

    alone: np.ndarray  # bool per row: normalized here (False: left to ``normalize``)
    letters: np.ndarray  # uint64 compact code points
    starts: np.ndarray  # int64 per row
    n_letters: np.ndarray  # int64 per row (0 where not alone)

    @property
    def kept(self) -> list[np.ndarray]:
        """Per row: its compact code points (empty where not alone)."""
        return [
            self.letters[a : a + k]
            for a, k in zip(self.starts.tolist(), self.n_letters.tolist(), strict=True)
        ]


def flat_rows(texts: Sequence[str | None], table: CharTable, max_chars: int, min_chars: int = 1) -> FlatRows:
    """``FlatRows`` of ``texts`` under ``table``'s options; ``max_chars`` (``normalize.max_chars``) and
    ``min_chars`` (``fingerprint.min_chars``) the lengths past which ``normalize`` decides: a row is
    normalized here only when it cannot be truncated (at most ``table.max_length`` characters per raw
    character) and keeps at least ``min_chars`` letters (its normalized text is then not too short)."""
    n = len(texts)
    raw = np.fromiter((-1 if t is None else len(t) for t in texts), dtype=np.int64, count=n)
    joined = (raw >= 0) & (raw * table.max_length <= max_chars)
    lengths = np.where(joined, raw, 0)
    alone = np.zeros(n, dtype=bool)
    n_letters = np.zeros(n, dtype=np.int64)
    starts = np.zeros(n, dtype=np.int64)
    parts: list[np.ndarray] = []
    offset = 0
    for start, stop in _groups(lengths):
        part = [t for t, j in zip(texts[start:stop], joined[start:stop].tolist(), strict=True) if j and t]
        group_alone, letters, counts = _group(part, lengths[start:stop], table)
        n_letters[start:stop] = counts
        starts[start:stop] = offset + np.cumsum(counts) - counts
        alone[start:stop] = group_alone & joined[start:stop] & (counts >= max(1, min_chars))
        parts.append(letters)
        offset += len(letters)
    # a row whose characters were learned in a later group may have grown the bound: check it again
    alone &= raw * table.max_length <= max_chars
    n_letters[~alone] = 0  # the letters of a row left to ``normalize`` stay unused where they lie
    return FlatRows(alone, np.concatenate(parts, dtype=np.uint64) if parts else _NONE, starts, n_letters)


_NONE = np.zeros(0, dtype=np.uint64)


def _groups(lengths: np.ndarray) -> list[tuple[int, int]]:
    """Consecutive row ranges of about ``_GROUP_CODEPOINTS`` characters (a longer row alone)."""
    ends = np.cumsum(lengths)
    out, start = [], 0
    while start < len(lengths):
        before = int(ends[start - 1]) if start else 0
        stop = max(start + 1, int(np.searchsorted(ends, before + _GROUP_CODEPOINTS, side="right")))
        out.append((start, min(stop, len(lengths))))
        start = out[-1][1]
    return out


def _group(
    texts: list[str], lengths: np.ndarray, table: CharTable
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Of rows whose non-empty texts are ``texts`` and whose lengths are ``lengths``: whether each
    normalizes character by character, and their letters (uint64 code points) back to back with each
    row's count."""
    cps = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    codes = table.lookup(cps)
    ends = np.cumsum(lengths)
    alone = np.ones(len(lengths), dtype=bool)
    alone[np.searchsorted(ends, np.flatnonzero(codes == CONTEXT), side="right")] = False
    has_letter = codes >= 0
    letters = codes[has_letter].astype(np.uint64)
    return alone, letters, _per_row_sums(has_letter, lengths, ends)


def _per_row_sums(flags: np.ndarray, lengths: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """How many of ``flags`` are set in each row, the rows lying back to back with ``lengths`` and ending at
    ``ends`` (their running sum; summing within the rows: a running count over every flag would write eight
    bytes per code point)."""
    counts = np.zeros(len(lengths), dtype=np.int64)
    filled = lengths > 0
    if filled.any():
        counts[filled] = np.add.reduceat(flags, (ends - lengths)[filled], dtype=np.int64)
    return counts


def normalized_letters(texts: Sequence[str], opts: NormalizeOptions) -> list[np.ndarray]:
    """``compact_codepoints(normalize(text, opts).text)`` of each text (uint64 code points), most of them
    computed a batch at a time."""
    if opts.variants != "none":
        return [compact_codepoints(normalize(t, opts).text) for t in texts]
    rows = flat_rows(texts, char_table(opts), opts.max_chars)
    return [
        letters if alone else compact_codepoints(normalize(text, opts).text)
        for text, alone, letters in zip(texts, rows.alone.tolist(), rows.kept, strict=True)
    ]
