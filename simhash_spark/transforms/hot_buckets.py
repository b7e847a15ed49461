"""Buckets too large for the shuffle join: found before the join, resolved locally (see core.forest)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.core.forest import within_k_forest
from simhash_spark.transforms.candidates import explode_band_keys

SIZE = "bucket_size"


def bucket_sizes(fps: DataFrame, *, masks: list[int]) -> DataFrame:
    """In: ``id``, ``fingerprint``. Out: ``band``, ``band_key``, ``bucket_size`` (one row per bucket)."""
    return (
        explode_band_keys(fps, masks=masks)
        .groupBy(C.TABLE, C.KEY)
        .agg(F.count(F.lit(1)).alias(SIZE))
        .select(C.TABLE, C.KEY, SIZE)
    )


def hash_sample(fps: DataFrame, fraction: float) -> DataFrame:
    """About ``fraction`` of the rows, chosen by a hash of the fingerprint (not Spark's ``sample``): the
    same rows whatever the partitioning."""
    if fraction >= 1.0:
        return fps
    return fps.where(F.pmod(F.xxhash64(C.FINGERPRINT), F.lit(1_000_000)) < int(fraction * 1_000_000))


def large_buckets(
    fps: DataFrame, *, masks: list[int], fraction: float, limit: int, top: int = 10
) -> DataFrame:
    """Exact sizes of the buckets that may exceed ``limit`` and of the ``top`` largest.

    Candidates come from bucket counts over a hash sample (a bucket of ``limit`` fingerprints is expected
    to hold ``limit·fraction`` of them there; any sampled bucket with half that qualifies); their exact
    sizes come from a broadcast semi-join that filters the exploded keys where they are produced, so the
    full set of keys is never shuffled for counting. With ``fraction`` 1 the candidates are exact.
    Out: ``band``, ``band_key``, ``bucket_size``.
    """
    sample_sizes = bucket_sizes(hash_sample(fps, fraction), masks=masks)
    threshold = max(2, int(limit * fraction * 0.5))
    candidates = (
        sample_sizes.where(F.col(SIZE) >= threshold)
        .select(C.TABLE, C.KEY)
        .unionByName(sample_sizes.orderBy(F.desc(SIZE), C.TABLE, C.KEY).limit(top).select(C.TABLE, C.KEY))
        .distinct()
    )
    return (
        explode_band_keys(fps, masks=masks)
        .join(F.broadcast(candidates), on=[C.TABLE, C.KEY], how="left_semi")
        .groupBy(C.TABLE, C.KEY)
        .agg(F.count(F.lit(1)).alias(SIZE))
        .select(C.TABLE, C.KEY, SIZE)
    )


def hot_bucket_forest(fps: DataFrame, hot: DataFrame, *, masks: list[int], max_distance: int) -> DataFrame:
    """Spanning-forest edges of the within-k graph inside every hot bucket.

    In: ``fps`` (``id``, ``fingerprint``), ``hot`` (``band``, ``band_key``; small, broadcast).
    Out: ``id_a`` < ``id_b``, ``distance``; distinct.
    """
    id_type = fps.schema[C.ID].dataType.simpleString()
    members = explode_band_keys(fps, masks=masks).join(
        F.broadcast(hot.select(C.TABLE, C.KEY)), on=[C.TABLE, C.KEY], how="inner"
    )

    def forest(pdf: pd.DataFrame) -> pd.DataFrame:
        pdf = pdf.sort_values(C.ID, kind="stable").reset_index(drop=True)
        ids = pdf[C.ID].to_numpy()
        edges = within_k_forest(pdf[C.FINGERPRINT].to_numpy(dtype=np.int64), max_distance)
        return pd.DataFrame(
            {
                C.ID_A: [ids[i] for i, _, _ in edges],
                C.ID_B: [ids[j] for _, j, _ in edges],
                C.DISTANCE: np.array([d for _, _, d in edges], dtype=np.int32),
            }
        )

    schema = f"{C.ID_A} {id_type}, {C.ID_B} {id_type}, {C.DISTANCE} int"
    return (
        members.select(C.TABLE, C.KEY, C.ID, C.FINGERPRINT)
        .groupBy(C.TABLE, C.KEY)
        .applyInPandas(forest, schema=schema)
        .distinct()
    )
