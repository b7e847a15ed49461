"""The band join: candidate pairs whose fingerprints agree on a table key, then the Hamming filter."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.core.bands import BandScheme


def hamming_distance(a: Column, b: Column) -> Column:
    """Differing bits of two LONG fingerprints; correct for negative values (two's complement)."""
    return F.bit_count(a.bitwiseXOR(b))


def _masks(masks: list[int]) -> Column:
    """The table masks as one array literal: the plan stays the same size whatever the number of tables
    (hundreds for LSH designs), instead of one expression per table."""
    return F.lit(masks).cast("array<bigint>")


def explode_band_keys(fps: DataFrame, *, masks: list[int]) -> DataFrame:
    """One row per (document, table).

    In: ``id``, ``fingerprint`` (non-null). Out: ``band``, ``band_key``, ``id``, ``fingerprint``.
    """
    return fps.select(C.ID, C.FINGERPRINT, F.posexplode(_masks(masks)).alias("_t", "_m")).select(
        F.col("_t").alias(C.TABLE),
        F.col(C.FINGERPRINT).bitwiseAND(F.col("_m")).alias(C.KEY),
        F.col(C.ID),
        F.col(C.FINGERPRINT),
    )


def _first_shared_table(a: Column, b: Column, masks: list[int]) -> Column:
    """Index of the first table in which a and b collide (every candidate collides in at least one).

    A CASE chain rather than a higher-order function over the mask array: a lambda that refers to both
    join sides failed to bind inside the join condition at scale (INTERNAL_ERROR_ATTRIBUTE_NOT_FOUND).
    It runs after the Hamming test of the same condition, on the few pairs within k.
    """
    diff = a.bitwiseXOR(b)
    expr = F.when(diff.bitwiseAND(F.lit(masks[0])) == 0, F.lit(0))
    for t, m in enumerate(masks[1:], start=1):
        expr = expr.when(diff.bitwiseAND(F.lit(m)) == 0, F.lit(t))
    return expr


def partitioned_band_keys(fps: DataFrame, *, masks: list[int], skip: DataFrame | None = None) -> DataFrame:
    """The band keys, hash-partitioned on (``band``, ``band_key``) and sorted within partitions: what the
    self-join needs on both sides. Persisting the result lets both sides read one shuffle (with adaptive
    execution on, Spark otherwise shuffles the exploded keys once per side).

    In: ``id``, ``fingerprint``; optionally ``skip`` (``band``, ``band_key``: hot buckets resolved
    elsewhere, small enough to broadcast). Out: ``band``, ``band_key``, ``id``, ``fingerprint``.
    """
    keyed = explode_band_keys(fps, masks=masks)
    if skip is not None:
        keyed = keyed.join(F.broadcast(skip.select(C.TABLE, C.KEY)), on=[C.TABLE, C.KEY], how="left_anti")
    return keyed.repartition(C.TABLE, C.KEY).sortWithinPartitions(C.TABLE, C.KEY)


def band_join(keys: DataFrame, *, masks: list[int], max_distance: int) -> DataFrame:
    """Every pair sharing a table key within ``max_distance`` bits, once.

    In: ``partitioned_band_keys``. Out: ``id_a`` < ``id_b``, ``distance``.
    The Hamming test guards the first-shared-table test in one condition, so random collisions die on a
    popcount and the per-table test runs only on the few pairs within k; a pair colliding in several
    tables is kept only from the first of them, so no distinct/shuffle is needed to deduplicate.
    """
    a = keys.alias("a")
    # Never broadcast a side: both are the whole key set, and Spark's size estimate after the anti-join
    # with the hot buckets can be far too small (seen at k=11 with LSH tables).
    b = keys.alias("b").hint("merge")
    fa, fb = F.col(f"a.{C.FINGERPRINT}"), F.col(f"b.{C.FINGERPRINT}")
    first = F.col(f"a.{C.TABLE}") == _first_shared_table(fa, fb, masks)
    joined = a.join(
        b,
        on=(F.col(f"a.{C.TABLE}") == F.col(f"b.{C.TABLE}"))
        & (F.col(f"a.{C.KEY}") == F.col(f"b.{C.KEY}"))
        & (F.col(f"a.{C.ID}") < F.col(f"b.{C.ID}"))
        & F.when(hamming_distance(fa, fb) <= max_distance, first).otherwise(F.lit(False)),
        how="inner",
    )
    return joined.select(
        F.col(f"a.{C.ID}").alias(C.ID_A),
        F.col(f"b.{C.ID}").alias(C.ID_B),
        hamming_distance(fa, fb).alias(C.DISTANCE),
    )


def candidate_pairs(
    fps: DataFrame, *, scheme: BandScheme, max_distance: int, skip: DataFrame | None = None
) -> DataFrame:
    """``band_join`` over ``partitioned_band_keys`` (without persisting them in between).

    In: ``id``, ``fingerprint`` (non-null); optionally ``skip``. Out: ``id_a`` < ``id_b``, ``distance``.
    """
    masks = scheme.table_masks(max_distance)
    keys = partitioned_band_keys(fps, masks=masks, skip=skip)
    return band_join(keys, masks=masks, max_distance=max_distance)
