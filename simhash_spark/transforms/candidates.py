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
    """Index of the first table in which a and b collide (every candidate collides in at least one)."""
    diff = a.bitwiseXOR(b)
    collides = F.transform(_masks(masks), lambda m: diff.bitwiseAND(m) == 0)
    return (F.array_position(collides, True) - 1).cast("int")


def candidate_pairs(
    fps: DataFrame, *, scheme: BandScheme, max_distance: int, skip: DataFrame | None = None
) -> DataFrame:
    """Every pair of documents that shares a table key and lies within ``max_distance`` bits, once.

    In: ``id``, ``fingerprint`` (non-null); optionally ``skip`` (``band``, ``band_key``: hot buckets
    resolved elsewhere, small enough to broadcast). Out: ``id_a`` < ``id_b``, ``distance``.
    The Hamming test is part of the join condition, so random collisions die inside the join; a pair
    colliding in several tables is then kept only from the first of them (a test over every table's mask,
    run on the few survivors only), so no distinct/shuffle is needed to deduplicate.
    """
    masks = scheme.table_masks(max_distance)
    keyed = explode_band_keys(fps, masks=masks)
    if skip is not None:
        keyed = keyed.join(F.broadcast(skip.select(C.TABLE, C.KEY)), on=[C.TABLE, C.KEY], how="left_anti")
    a = keyed.alias("a")
    # Never broadcast a side: both are the whole exploded key set, and Spark's size estimate after the
    # anti-join with the hot buckets can be far too small (seen at k=11 with LSH tables).
    b = keyed.alias("b").hint("merge")
    fa, fb = F.col(f"a.{C.FINGERPRINT}"), F.col(f"b.{C.FINGERPRINT}")
    joined = a.join(
        b,
        on=(F.col(f"a.{C.TABLE}") == F.col(f"b.{C.TABLE}"))
        & (F.col(f"a.{C.KEY}") == F.col(f"b.{C.KEY}"))
        & (F.col(f"a.{C.ID}") < F.col(f"b.{C.ID}"))
        & (hamming_distance(fa, fb) <= max_distance),
        how="inner",
    )
    return joined.where(F.col(f"a.{C.TABLE}") == _first_shared_table(fa, fb, masks)).select(
        F.col(f"a.{C.ID}").alias(C.ID_A),
        F.col(f"b.{C.ID}").alias(C.ID_B),
        hamming_distance(fa, fb).alias(C.DISTANCE),
    )
