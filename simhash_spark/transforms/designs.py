"""``bands.scheme = "auto"``: pick the table design from the data, before the join.

For every exact design worth considering, the number of candidate pairs its tables would produce is
Σ size·(size−1)/2 over its buckets: counted for all designs in one aggregation over (a deterministic
hash sample of) the distinct fingerprints and scaled by 1/fraction² when sampled. The estimated work of a
design is its exploded rows (fingerprints × tables) plus its candidate pairs at ``PAIR_COST`` rows each: a
row is shuffled and sorted, a pair is one vectorized popcount inside its bucket. The cheapest exact design
wins when its candidate pairs per fingerprint fit ``bands.auto_max_pairs_per_doc``; otherwise the cheapest
LSH design that reaches ``bands.min_recall`` at distance k, its bucket sizes estimated from the sample's
bit frequencies. Runs one action (two when it falls back to LSH).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.config import BandsConfig
from simhash_spark.core.bands import BITS, BandScheme, BitModel, cheapest_lsh, exact_candidates
from simhash_spark.transforms.hot_buckets import hash_sample

_MAX_TABLES_COUNTED = 80  # tables across all counted designs: bounds the counting job's rows
# The cost of comparing one in-bucket pair in place (core.bucket_pairs) relative to one exploded row through
# explode, shuffle, sort and Arrow; calibrated with bench/scale.py (docs/benchmarks.md has the numbers).
PAIR_COST = 0.005


def _designs(k: int) -> list[BandScheme]:
    chosen: list[BandScheme] = []
    total = 0
    for d in exact_candidates(k, max_tables=_MAX_TABLES_COUNTED):
        if total + d.n_tables(k) > _MAX_TABLES_COUNTED and chosen:
            break
        chosen.append(d)
        total += d.n_tables(k)
    return chosen


def _sampled_buckets(sample: DataFrame, designs: list[BandScheme], k: int) -> dict[int, Any]:
    """Per design (its index): random-collision pairs and the largest bucket in the sample."""
    keys = [
        F.struct(
            F.lit(i).alias("d"), F.lit(t).alias("t"), F.col(C.FINGERPRINT).bitwiseAND(F.lit(m)).alias("key")
        )
        for i, d in enumerate(designs)
        for t, m in enumerate(d.table_masks(k))
    ]
    rows = (
        sample.select(F.explode(F.array(*keys)).alias("x"))
        .groupBy("x.d", "x.t", "x.key")
        .count()
        .groupBy("d")
        .agg(
            F.sum(F.col("count") * (F.col("count") - 1) / 2).alias("pairs"),
            F.max("count").alias("largest_bucket"),
        )
        .collect()
    )
    return {int(r["d"]): r for r in rows}


def choose_design(fps: DataFrame, *, n: int, k: int, cfg: BandsConfig) -> tuple[BandScheme, dict[str, Any]]:
    """In: ``fps`` (``id``, ``fingerprint``), one row per distinct fingerprint, ``n`` of them.
    Returns the design and the numbers behind the choice (for summary.json)."""
    designs = _designs(k)
    fraction = min(1.0, cfg.auto_sample_rows / n) if n else 1.0
    measured = _sampled_buckets(hash_sample(fps, fraction), designs, k) if designs and n else {}
    report: list[dict[str, Any]] = []
    best: tuple[float, BandScheme] | None = None
    for i, d in enumerate(designs):
        r = measured.get(i)
        pairs = (float(r["pairs"]) if r else 0.0) / (fraction * fraction)
        work = PAIR_COST * pairs + n * d.n_tables(k)
        report.append(
            {
                "scheme": d.spec,
                "tables": d.n_tables(k),
                "estimated_candidate_pairs": round(pairs),
                "largest_bucket_in_sample": int(r["largest_bucket"]) if r else 0,
                "estimated_work": round(work),
            }
        )
        if pairs <= cfg.auto_max_pairs_per_doc * max(n, 1) and (best is None or work < best[0]):
            best = (work, d)
    extra: dict[str, Any] = {}
    if best is not None:
        chosen, why = best[1], "cheapest exact design within the pair budget"
    else:
        # random buckets well under the hot-bucket limit, so that only real pile-ups take the forest path;
        # bucket sizes from the sample's own bit frequencies (real SimHash bits are skewed), not 2^-r
        bits = bit_frequencies(hash_sample(fps, fraction)) if n else BitModel.uniform()
        chosen = cheapest_lsh(
            k, cfg.min_recall, max(n, 1), pair_cost=PAIR_COST, max_bucket=cfg.hot_bucket_limit / 4, bits=bits
        )
        why = f"no exact design within {cfg.auto_max_pairs_per_doc} pairs per fingerprint: cheapest LSH at recall >= {cfg.min_recall}"
        extra = {"largest_bit_skew": round(max(abs(p - 0.5) for p in bits.ones), 4)}
    return chosen, {
        "chosen": chosen.spec,
        "reason": why,
        "exact": chosen.exact,
        "recall_at_k": round(chosen.recall(k), 6),
        "sample_fraction": round(fraction, 6),
        "designs": report,
        **extra,
    }


def bit_frequencies(fps: DataFrame) -> BitModel:
    """The fraction of ``fps`` (``fingerprint``) with each bit set, LSB first (one aggregation)."""
    fp = F.col(C.FINGERPRINT)
    row = fps.agg(
        *[F.avg(F.shiftrightunsigned(fp, i).bitwiseAND(F.lit(1))).alias(f"b{i}") for i in range(BITS)]
    ).first()
    if row is None or row["b0"] is None:
        return BitModel.uniform()
    return BitModel(tuple(float(row[f"b{i}"]) for i in range(BITS)))
