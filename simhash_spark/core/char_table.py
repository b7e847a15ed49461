"""What normalization does to each character on its own, as lookup tables over code points (pure numpy).

Most characters of real text normalize alone: NFKC, the punctuation map, lowercasing and the invisible
character class act on each independently, so a document made only of such characters normalizes to the
concatenation of what each becomes (whitespace then collapsed), and its letters, digits and ideographs
are those of each character in turn. ``CharTable`` records that per code point
(filled lazily with ``normalize.character_steps`` itself, so the two cannot disagree) and marks the
characters that need their neighbours — markup, combining marks and what they compose with, the final
sigma — or leave more than one letter. A document holding any of those is
normalized by ``normalize`` one by one; every other document of a batch is handled with array operations.
"""

from __future__ import annotations

import sys
import unicodedata
from dataclasses import replace
from functools import lru_cache

import numpy as np

from simhash_spark.core.normalize import NormalizeOptions, character_steps
from simhash_spark.core.shingles import compact_codepoints

NO_LETTER = -1  # a character that normalizes alone and leaves no letter, digit or ideograph
CONTEXT = -2  # a character that needs its neighbours
_UNKNOWN = -3
_HANGUL_VOWELS_AND_TRAILS = ((0x1161, 0x1175), (0x11A8, 0x11C2))  # compose algorithmically with a syllable


@lru_cache(maxsize=1)
def _composing() -> frozenset[int]:
    """Code points that canonical composition can join to the character before them."""
    seconds = set()
    for cp in range(sys.maxunicode + 1):
        parts = unicodedata.decomposition(chr(cp)).split()
        if len(parts) == 2 and not parts[0].startswith("<"):
            seconds.add(int(parts[1], 16))
    for lo, hi in _HANGUL_VOWELS_AND_TRAILS:
        seconds.update(range(lo, hi + 1))
    return frozenset(seconds)


class CharTable:
    """A lazily filled per-code-point table of one ``NormalizeOptions`` (one per process and options): the
    one letter, digit or ideograph a character leaves when normalized alone (its code point), NO_LETTER, or
    CONTEXT. ``max_length``: the most characters a character that normalizes alone became so far."""

    def __init__(self, opts: NormalizeOptions) -> None:
        if opts.variants != "none":
            raise ValueError("variant conversion reads phrases, not characters: no character table")
        self.opts = opts
        self.max_length = 1
        self._codes = np.full(sys.maxunicode + 1, _UNKNOWN, dtype=np.int32)

    def lookup(self, cps: np.ndarray) -> np.ndarray:
        """The table at ``cps`` (uint32 code points; int32 codes), learning the characters not seen before."""
        codes = self._codes[cps]
        unknown = codes == _UNKNOWN
        if unknown.any():
            for cp in np.unique(cps[unknown]).tolist():
                self._learn(cp)
            codes = self._codes[cps]
        return codes

    def _learn(self, cp: int) -> None:
        char = chr(cp)
        result = character_steps(char, self.opts)
        letters = compact_codepoints(result)
        if len(letters) > 1 or self._needs_context(char):
            self._codes[cp] = CONTEXT
            return
        self._codes[cp] = int(letters[0]) if len(letters) else NO_LETTER
        self.max_length = max(self.max_length, len(result))

    def _needs_context(self, char: str) -> bool:
        if self.opts.strip_html and char in "<&":
            return True
        # NFKC composes and reorders across characters only around combining marks and composing characters
        decomposed = unicodedata.normalize("NFKD", char) if self.opts.nfkc else char
        if any(unicodedata.combining(c) or ord(c) in _composing() for c in decomposed + char):
            return True
        # str.lower's one context rule: a capital sigma at a word's end becomes the final sigma
        return self.opts.lowercase and "Σ" in character_steps(char, replace(self.opts, lowercase=False))


@lru_cache(maxsize=4)
def char_table(opts: NormalizeOptions) -> CharTable:
    return CharTable(opts)
