"""The second tier in Spark: candidate pairs are checked against their texts (only theirs are joined)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.functions import pandas_udf

from simhash_spark import columns as C
from simhash_spark.core.normalize import NormalizeOptions
from simhash_spark.core.verify import FINGERPRINT, VERIFIED, ThresholdPolicy, VerifyOptions, similarities


def pair_threshold(policy: ThresholdPolicy, shorter_chars: Column) -> Column:
    """k of a pair from the length of its shorter document (a constant without length steps)."""
    if not policy.steps:
        return F.lit(policy.max_distance)
    expr = F.lit(policy.max_distance)
    for start, k in policy.steps:
        expr = F.when(shorter_chars >= start, F.lit(k)).otherwise(expr)
    return expr


def within_threshold(pairs: DataFrame, lengths: DataFrame, *, policy: ThresholdPolicy) -> DataFrame:
    """Pairs within their own k.

    In: ``pairs`` (``id_a``, ``id_b``, ``distance``), ``lengths`` (``id``, ``n_chars``).
    Out: ``id_a``, ``id_b``, ``distance``.
    """
    if not policy.steps:
        return pairs.where(F.col(C.DISTANCE) <= policy.max_distance).select(C.ID_A, C.ID_B, C.DISTANCE)
    la = lengths.select(F.col(C.ID).alias("_la_id"), F.col(C.N_CHARS).alias("_la"))
    lb = lengths.select(F.col(C.ID).alias("_lb_id"), F.col(C.N_CHARS).alias("_lb"))
    joined = pairs.join(la, on=F.col(C.ID_A) == F.col("_la_id"), how="inner").join(
        lb, on=F.col(C.ID_B) == F.col("_lb_id"), how="inner"
    )
    k = pair_threshold(policy, F.least("_la", "_lb"))
    return joined.where(F.col(C.DISTANCE) <= k).select(C.ID_A, C.ID_B, C.DISTANCE)


def _similarity_udf(opts: VerifyOptions, norm: NormalizeOptions) -> Any:
    @pandas_udf("double")  # type: ignore[call-overload]
    def similarity(batches: Iterator[tuple[pd.Series, pd.Series]]) -> Iterator[pd.Series]:
        for a, b in batches:
            a = a.where(a.notna(), None)
            b = b.where(b.notna(), None)
            yield pd.Series(similarities(a.tolist(), b.tolist(), opts, norm))

    return similarity


def verify_pairs(
    pairs: DataFrame, texts: DataFrame | None, *, opts: VerifyOptions, norm: NormalizeOptions
) -> DataFrame:
    """Keep the pairs whose texts pass the measure.

    In: ``pairs`` (``id_a``, ``id_b``, ``distance``), ``texts`` (``id``, ``text``).
    Out: ``id_a``, ``id_b``, ``distance``, ``similarity`` (null where not checked), ``reason``.
    Pairs within ``opts.accept_distance`` bits (every pair, with measure "none") pass unchecked.
    """
    unchecked = F.lit(True) if not opts.enabled else F.col(C.DISTANCE) <= opts.accept_distance
    direct = pairs.where(unchecked).select(
        C.ID_A,
        C.ID_B,
        C.DISTANCE,
        F.lit(None).cast("double").alias(C.SIMILARITY),
        F.lit(FINGERPRINT).alias(C.REASON),
    )
    if not opts.enabled:
        return direct
    if texts is None:
        raise ValueError(f"verify.measure={opts.measure!r} needs the documents' texts")
    ta = texts.select(F.col(C.ID).alias("_ta_id"), F.col(C.TEXT).alias("_ta"))
    tb = texts.select(F.col(C.ID).alias("_tb_id"), F.col(C.TEXT).alias("_tb"))
    checked = (
        pairs.where(~unchecked)
        .join(ta, on=F.col(C.ID_A) == F.col("_ta_id"), how="inner")
        .join(tb, on=F.col(C.ID_B) == F.col("_tb_id"), how="inner")
        .select(
            C.ID_A,
            C.ID_B,
            C.DISTANCE,
            _similarity_udf(opts, norm)(F.col("_ta"), F.col("_tb")).alias(C.SIMILARITY),
        )
        .where(F.col(C.SIMILARITY) >= opts.min_similarity)
        .select(C.ID_A, C.ID_B, C.DISTANCE, C.SIMILARITY, F.lit(VERIFIED).alias(C.REASON))
    )
    return direct.unionByName(checked)
