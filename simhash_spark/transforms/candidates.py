"""The band join: candidate pairs whose fingerprints agree on a table key, then the Hamming filter."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.core.bands import BandScheme


def hamming_distance(a: Column, b: Column) -> Column:
    """Differing bits of two LONG fingerprints; correct for negative values (two's complement)."""
    return F.bit_count(a.bitwiseXOR(b))


def explode_band_keys(fps: DataFrame, *, masks: list[int]) -> DataFrame:
    """One row per (document, table).

    In: ``id``, ``fingerprint`` (non-null). Out: ``band``, ``band_key``, ``id``, ``fingerprint``.
    """
    keys = F.array(
        *[
            F.struct(F.lit(t).alias(C.TABLE), F.col(C.FINGERPRINT).bitwiseAND(F.lit(m)).alias(C.KEY))
            for t, m in enumerate(masks)
        ]
    )
    return fps.select(C.ID, C.FINGERPRINT, F.explode(keys).alias("_k")).select(
        F.col(f"_k.{C.TABLE}").alias(C.TABLE),
        F.col(f"_k.{C.KEY}").alias(C.KEY),
        F.col(C.ID),
        F.col(C.FINGERPRINT),
    )


def _first_shared_table(a: Column, b: Column, masks: list[int]) -> Column:
    """Index of the first table in which a and b collide (every candidate collides in at least one)."""
    diff = a.bitwiseXOR(b)
    expr = F.when(diff.bitwiseAND(F.lit(masks[0])) == 0, F.lit(0))
    for t, m in enumerate(masks[1:], start=1):
        expr = expr.when(diff.bitwiseAND(F.lit(m)) == 0, F.lit(t))
    return expr


def candidate_pairs(
    fps: DataFrame, *, scheme: BandScheme, max_distance: int, skip: DataFrame | None = None
) -> DataFrame:
    """Every pair of documents that shares a table key, once, with its Hamming distance.

    In: ``id``, ``fingerprint`` (non-null); optionally ``skip`` (``band``, ``band_key``: hot buckets
    resolved elsewhere, small enough to broadcast). Out: ``id_a`` < ``id_b``, ``distance``.
    A pair colliding in several tables is kept only from the first of them, so no distinct/shuffle is
    needed to deduplicate.
    """
    masks = scheme.table_masks(max_distance)
    keyed = explode_band_keys(fps, masks=masks)
    if skip is not None:
        keyed = keyed.join(F.broadcast(skip.select(C.TABLE, C.KEY)), on=[C.TABLE, C.KEY], how="left_anti")
    a = keyed.alias("a")
    # Never broadcast a side: both are the whole exploded key set, and Spark's size estimate after the
    # anti-join with the hot buckets can be far too small (seen at k=11 with LSH tables).
    b = keyed.alias("b").hint("merge")
    joined = a.join(
        b,
        on=(F.col(f"a.{C.TABLE}") == F.col(f"b.{C.TABLE}"))
        & (F.col(f"a.{C.KEY}") == F.col(f"b.{C.KEY}"))
        & (F.col(f"a.{C.ID}") < F.col(f"b.{C.ID}")),
        how="inner",
    )
    fa, fb = F.col(f"a.{C.FINGERPRINT}"), F.col(f"b.{C.FINGERPRINT}")
    return joined.where(F.col(f"a.{C.TABLE}") == _first_shared_table(fa, fb, masks)).select(
        F.col(f"a.{C.ID}").alias(C.ID_A),
        F.col(f"b.{C.ID}").alias(C.ID_B),
        hamming_distance(fa, fb).alias(C.DISTANCE),
    )


def accepted_pairs(candidates: DataFrame, *, max_distance: int) -> DataFrame:
    """In/out: ``id_a``, ``id_b``, ``distance``; keeps pairs within ``max_distance`` bits."""
    return candidates.where(F.col(C.DISTANCE) <= max_distance).select(C.ID_A, C.ID_B, C.DISTANCE)
