"""Band (table) designs for the candidate join (pure Python).

Two fingerprints within k differing bits agree on at least B - k of any B disjoint blocks of bits
(pigeonhole), so keying each table on a different choice of B - k blocks finds every such pair in at
least one table: the join is exact, not approximate.

- ``"NxW"`` (N * W = 64), e.g. the default ``"4x16"``: N tables, each keyed on one W-bit block; exact for
  k <= N - 1.
- ``"blocks:B"``: B blocks, C(B, B - k) tables each keyed on B - k blocks; exact for any k < B, with far
  fewer random collisions per table than one-block keys.
- ``"lsh:L,r"``: L tables, each keyed on r bit positions sampled with a fixed seed. Not exact: a pair at
  distance d collides in one table with probability C(64 - d, r) / C(64, r) (≈ (1 - d/64)^r), so it is
  found with probability 1 - (1 - that)^L (``lsh_recall``). For the large k (10-12) that exact designs
  cannot afford.
- ``"auto"``: chosen per run from the data (see ``simhash_spark.transforms.designs``).
"""

from __future__ import annotations

import functools
import itertools
import math
import random
import re
from dataclasses import dataclass

BITS = 64
_NXW = re.compile(r"^(\d+)x(\d+)$")
_BLOCKS = re.compile(r"^blocks:(\d+)$")
_LSH = re.compile(r"^lsh:(\d+),(\d+)$")
LSH_SEED = 0x5EED_51A5
MAX_AUTO_K = 16


def _to_signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


@dataclass(frozen=True)
class BandScheme:
    spec: str
    blocks: int  # exact designs: number of blocks; lsh: number of tables
    one_block_tables: bool  # "NxW": every table is keyed on a single block, whatever k
    sampled_bits: int = 0  # lsh: bits per table (0 for exact designs)

    @property
    def exact(self) -> bool:
        return self.sampled_bits == 0

    @property
    def max_exact_distance(self) -> int:
        return self.blocks - 1 if self.exact else -1

    def guarantees(self, k: int) -> bool:
        """Whether every pair within k bits is found (LSH designs find them with ``recall(k)``)."""
        return self.exact and 0 <= k < self.blocks

    @property
    def auto(self) -> bool:
        return self.spec == "auto"

    def accepts(self, k: int) -> bool:
        if self.auto:
            return 0 <= k <= MAX_AUTO_K
        return self.guarantees(k) or (not self.exact and 0 <= k <= BITS)

    def recall(self, d: int) -> float:
        """Probability that a pair at distance d shares at least one table key."""
        if self.exact:
            return 1.0 if d <= self.max_exact_distance else float("nan")
        return lsh_recall(d, self.blocks, self.sampled_bits)

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
        if not self.exact:
            rng = random.Random(LSH_SEED)
            masks = []
            for _ in range(self.blocks):
                m = 0
                for bit in rng.sample(range(BITS), self.sampled_bits):
                    m |= 1 << bit
                masks.append(_to_signed(m))
            return masks
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

    def n_tables(self, k: int) -> int:
        if not self.exact or self.one_block_tables:
            return self.blocks
        return math.comb(self.blocks, self.blocks - k)


def lsh_recall(d: int, tables: int, bits: int) -> float:
    """1 - (1 - C(64-d, r)/C(64, r))^L: sampling r distinct positions, none of the d differing ones."""
    p = math.comb(BITS - d, bits) / math.comb(BITS, bits) if d <= BITS - bits else 0.0
    return 1.0 - (1.0 - p) ** tables


@dataclass(frozen=True)
class BitModel:
    """How often each fingerprint bit is set (``ones[i]``: fraction with bit i set, LSB = bit 0), measured
    on a sample. Real SimHash bits are skewed (short texts most of all), so keys of r bits do not split n
    fingerprints into 2^r even buckets: the fullest key is the one of every bit's majority value."""

    ones: tuple[float, ...]

    @staticmethod
    def uniform() -> BitModel:
        return BitModel((0.5,) * BITS)

    def largest_bucket(self, n: int, mask: int) -> float:
        """Expected size of a table's fullest bucket (bits taken as independent)."""
        return n * math.prod(max(p, 1 - p) for i, p in enumerate(self.ones) if mask >> i & 1)

    def collision(self, mask: int) -> float:
        """Probability that two random fingerprints share the table's key."""
        return math.prod(p * p + (1 - p) * (1 - p) for i, p in enumerate(self.ones) if mask >> i & 1)


def cheapest_lsh(
    k: int,
    min_recall: float,
    n: int,
    max_tables: int = 400,
    *,
    pair_cost: float = 1.0,
    max_bucket: float | None = None,
    bits: BitModel | None = None,
) -> BandScheme:
    """The LSH design meeting ``min_recall`` at distance k with the least expected work for n fingerprints:
    n·L exploded rows plus ``pair_cost`` · n²/2 · Σ_tables P(random collision) (a collision costs
    ``pair_cost`` rows). ``max_bucket``: largest expected bucket allowed; when no design keeps under it,
    the one with the smallest largest bucket (its hot buckets then take the forest path). ``bits``: the
    measured bit frequencies (default: uniform bits, 2^-r per table)."""
    model = bits or BitModel.uniform()
    options: list[tuple[float, float, int, int]] = []  # (largest bucket, work, tables, r)
    for r in range(4, 41):
        p = math.comb(BITS - k, r) / math.comb(BITS, r) if k <= BITS - r else 0.0
        if p <= 0:
            break
        if p >= 1:
            tables = 1
        else:
            tables = (
                math.ceil(math.log(1 - min_recall) / math.log(1 - p)) if min_recall < 1 else max_tables + 1
            )
        if tables > max_tables:
            continue
        masks = [m & (1 << BITS) - 1 for m in parse_scheme(f"lsh:{tables},{r}").table_masks(k)]
        largest = max(model.largest_bucket(n, m) for m in masks)
        work = n * tables + pair_cost * (n * n / 2) * sum(model.collision(m) for m in masks)
        options.append((largest, work, tables, r))
    if not options:
        raise ValueError(
            f"no LSH design with at most {max_tables} tables reaches recall {min_recall} at k={k}"
        )
    fitting = [o for o in options if max_bucket is None or o[0] <= max_bucket]
    best = min(fitting, key=lambda o: o[1]) if fitting else min(options, key=lambda o: (o[0], o[1]))
    return parse_scheme(f"lsh:{best[2]},{best[3]}")


def exact_candidates(k: int, max_tables: int = 512) -> list[BandScheme]:
    """Exact designs worth counting for k: 4x16 where it applies, and blocks:B for B = k+1 ... while the
    number of tables stays reasonable."""
    out = [parse_scheme("4x16")] if k <= 3 else []
    for b in range(k + 1, BITS + 1):
        if math.comb(b, b - k) > max_tables:
            break
        out.append(parse_scheme(f"blocks:{b}"))
    return out


@functools.lru_cache(maxsize=64)
def parse_scheme(spec: str) -> BandScheme:
    m = _NXW.match(spec)
    if m:
        n, w = int(m.group(1)), int(m.group(2))
        if n * w != BITS or n < 1:
            raise ValueError(f"{spec!r}: N x W must cover exactly 64 bits")
        return BandScheme(spec, n, True)
    if spec == "auto":
        return BandScheme(spec, 0, False)  # resolved per run by transforms.designs.choose_design
    m = _LSH.match(spec)
    if m:
        tables, bits = int(m.group(1)), int(m.group(2))
        if not 1 <= tables <= 4096 or not 1 <= bits <= BITS:
            raise ValueError(f"{spec!r}: L must be 1..4096 tables and r 1..64 bits")
        return BandScheme(spec, tables, False, bits)
    m = _BLOCKS.match(spec)
    if m:
        b = int(m.group(1))
        if not 1 <= b <= BITS:
            raise ValueError(f"{spec!r}: the number of blocks must be between 1 and 64")
        return BandScheme(spec, b, False)
    raise ValueError(
        f"{spec!r}: expected 'NxW' (e.g. '4x16'), 'blocks:B' (e.g. 'blocks:6'), 'lsh:L,r' or 'auto'"
    )
