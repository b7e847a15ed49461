"""Band (table) designs for the candidate join (pure Python).

Two fingerprints within k differing bits agree on at least B - k of any B disjoint blocks of bits
(pigeonhole), so keying each table on a different choice of B - k blocks finds every such pair in at
least one table: the join is exact, not approximate.

- ``"NxW"`` (N * W = 64), e.g. the default ``"4x16"``: N tables, each keyed on one W-bit block; exact for
  k <= N - 1.
- ``"blocks:B"``: B blocks, C(B, B - k) tables each keyed on B - k blocks; exact for any k < B, with far
  fewer random collisions per table than one-block keys.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

BITS = 64
_NXW = re.compile(r"^(\d+)x(\d+)$")
_BLOCKS = re.compile(r"^blocks:(\d+)$")


def _to_signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


@dataclass(frozen=True)
class BandScheme:
    spec: str
    blocks: int
    one_block_tables: bool  # "NxW": every table is keyed on a single block, whatever k

    @property
    def max_exact_distance(self) -> int:
        return self.blocks - 1

    def guarantees(self, k: int) -> bool:
        return 0 <= k < self.blocks

    def block_masks(self) -> list[int]:
        """Unsigned masks of the blocks, most significant block first (band 0 = bits 63..48 for 4x16,
        as the original article numbers its segments)."""
        base, extra = divmod(BITS, self.blocks)
        sizes = [base + (1 if i < extra else 0) for i in range(self.blocks)]
        masks, top = [], BITS
        for size in sizes:
            masks.append(((1 << size) - 1) << (top - size))
            top -= size
        return masks

    def table_masks(self, k: int) -> list[int]:
        """Signed (Spark LONG) masks, one per table: a pair collides in table t iff (a ^ b) & mask_t == 0."""
        if not self.guarantees(k):
            raise ValueError(f"bands {self.spec!r} are exact only up to k={self.max_exact_distance}, not {k}")
        blocks = self.block_masks()
        per_table = 1 if self.one_block_tables else self.blocks - k
        masks = []
        for combo in itertools.combinations(range(self.blocks), per_table):
            m = 0
            for i in combo:
                m |= blocks[i]
            masks.append(_to_signed(m))
        return masks


def parse_scheme(spec: str) -> BandScheme:
    m = _NXW.match(spec)
    if m:
        n, w = int(m.group(1)), int(m.group(2))
        if n * w != BITS or n < 1:
            raise ValueError(f"{spec!r}: N x W must cover exactly 64 bits")
        return BandScheme(spec, n, True)
    m = _BLOCKS.match(spec)
    if m:
        b = int(m.group(1))
        if not 1 <= b <= BITS:
            raise ValueError(f"{spec!r}: the number of blocks must be between 1 and 64")
        return BandScheme(spec, b, False)
    raise ValueError(f"{spec!r}: expected 'NxW' (e.g. '4x16') or 'blocks:B' (e.g. 'blocks:6')")
