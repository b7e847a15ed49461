"""``bands.scheme = "auto"``: the bucket counts behind the choice of a table design, counted by Spark
for all designs in one aggregation over (a deterministic hash sample of) the distinct fingerprints; the
choice itself is ``core.designs.decide_design``. Runs one action (two when it falls back to LSH: the
sample's bit frequencies).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.config import BandsConfig
from simhash_spark.core.bands import BITS, BandScheme, BitModel
from simhash_spark.core.designs import (
    IN_TASK_PAIR_COST,
    SHUFFLED_PAIR_COST,
    DesignRules,
    auto_designs,
    decide_design,
)
from simhash_spark.transforms.hot_buckets import hash_sample


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


def design_rules(cfg: BandsConfig, *, in_task: bool) -> DesignRules:
    """What ``core.designs.decide_design`` needs of the ``[bands]`` configuration, priced for the band join
    that will run (``in_task``: tables sorted inside tasks, or the shuffled join)."""
    pair_cost = IN_TASK_PAIR_COST if in_task else SHUFFLED_PAIR_COST
    return DesignRules(
        cfg.min_recall, cfg.auto_max_pairs_per_doc, cfg.hot_bucket_limit, cfg.auto_sample_rows, pair_cost
    )


def choose_design(fps: DataFrame, *, n: int, k: int, rules: DesignRules) -> tuple[BandScheme, dict[str, Any]]:
    """In: ``fps`` (``id``, ``fingerprint``), one row per distinct fingerprint, ``n`` of them.
    Returns the design and the numbers behind the choice (for summary.json)."""
    designs = auto_designs(k)
    fraction = min(1.0, rules.sample_rows / n) if n else 1.0
    rows = _sampled_buckets(hash_sample(fps, fraction), designs, k) if designs and n else {}
    measured = {i: (float(r["pairs"]), int(r["largest_bucket"])) for i, r in rows.items()}
    return decide_design(
        designs,
        measured,
        n=n,
        k=k,
        fraction=fraction,
        rules=rules,
        bits=lambda: bit_frequencies(hash_sample(fps, fraction)),
    )


def bit_frequencies(fps: DataFrame) -> BitModel:
    """The fraction of ``fps`` (``fingerprint``) with each bit set, LSB first (one aggregation)."""
    fp = F.col(C.FINGERPRINT)
    row = fps.agg(
        *[F.avg(F.shiftrightunsigned(fp, i).bitwiseAND(F.lit(1))).alias(f"b{i}") for i in range(BITS)]
    ).first()
    if row is None or row["b0"] is None:
        return BitModel.uniform()
    return BitModel(tuple(float(row[f"b{i}"]) for i in range(BITS)))
