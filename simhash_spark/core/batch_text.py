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
from itertools import pairwise

import numpy as np

from simhash_spark.core.char_table import CONTEXT, CharTable, char_table
from simhash_spark.core.normalize import NormalizeOptions, normalize
from simhash_spark.core.shingles import compact_codepoints

# Code points looked up in one pass: the per-character arrays stay a few tens of MB whatever the batch.
_GROUP_CODEPOINTS = 1 << 21


@dataclass(frozen=True)
class FlatRows:
    alone: np.ndarray  # bool per row: normalized here (False: left to ``normalize``)
    kept: list[np.ndarray]  # per row: its compact code points (uint64; empty where not alone)


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
    kept: list[np.ndarray] = []
    for start, stop in _groups(lengths):
        part = [t for t, j in zip(texts[start:stop], joined[start:stop].tolist(), strict=True) if j and t]
        group_alone, letters = _group(part, lengths[start:stop], table)
        n_letters = np.fromiter(map(len, letters), dtype=np.int64, count=stop - start)
        alone[start:stop] = group_alone & joined[start:stop] & (n_letters >= max(1, min_chars))
        kept += [x if a else _NONE for x, a in zip(letters, alone[start:stop].tolist(), strict=True)]
    # a row whose characters were learned in a later group may have grown the bound: check it again
    alone &= raw * table.max_length <= max_chars
    return FlatRows(alone, [x if a else _NONE for x, a in zip(kept, alone.tolist(), strict=True)])


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


def _group(texts: list[str], lengths: np.ndarray, table: CharTable) -> tuple[np.ndarray, list[np.ndarray]]:
    """Of rows whose non-empty texts are ``texts`` and whose lengths are ``lengths``: whether each
    normalizes character by character, and its letters (uint64 code points)."""
    cps = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    codes = table.lookup(cps)
    ends = np.cumsum(lengths)
    alone = np.ones(len(lengths), dtype=bool)
    alone[np.searchsorted(ends, np.flatnonzero(codes == CONTEXT), side="right")] = False
    has_letter = codes >= 0
    letters = codes[has_letter].astype(np.uint64)
    before = np.concatenate(([0], np.cumsum(has_letter, dtype=np.int64)))[
        ends
    ]  # letters up to each row's end
    bounds = np.concatenate(([0], before)).tolist()
    return alone, [letters[a:b] for a, b in pairwise(bounds)]


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
