"""Buckets too large to list every pair of (near-identical pile-ups): found before the join, resolved to a
spanning forest (see core.forest)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.core.forest import within_k_forest
from simhash_spark.core.normalize import NormalizeOptions
from simhash_spark.core.verify import FINGERPRINT, VERIFIED, ThresholdPolicy, VerifyOptions, similarity
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


def hot_bucket_forest(
    fps: DataFrame,
    hot: DataFrame,
    *,
    masks: list[int],
    policy: ThresholdPolicy,
    verify: VerifyOptions,
    norm: NormalizeOptions,
    texts: DataFrame | None = None,
    title_max_distance: int | None = None,
) -> DataFrame:
    """Spanning-forest edges of the accepted-pairs graph inside every hot bucket: pairs within their k
    (``policy``, by the shorter document's length) that pass the text check (``verify``, when enabled).

    In: ``fps`` (``id``, ``fingerprint``, ``n_chars``), ``hot`` (``band``, ``band_key``; small, broadcast),
    ``texts`` (``id``, ``text``; needed when verifying). With ``title_max_distance``, ``fps`` also has
    ``title_fingerprint`` (nullable) and two titled members must have titles that close (rule "and").
    Out: ``id_a`` < ``id_b``, ``distance``, ``similarity``, ``reason``; distinct.
    """
    id_type = fps.schema[C.ID].dataType.simpleString()
    members = explode_band_keys(fps.select(C.ID, C.FINGERPRINT), masks=masks).join(
        F.broadcast(hot.select(C.TABLE, C.KEY)), on=[C.TABLE, C.KEY], how="inner"
    )
    members = members.join(fps.select(C.ID, C.N_CHARS), on=C.ID, how="inner")
    checking = verify.enabled and texts is not None
    if checking:
        assert texts is not None
        members = members.join(texts.select(C.ID, C.TEXT), on=C.ID, how="inner")
    else:
        members = members.withColumn(C.TEXT, F.lit(None).cast("string"))
    if title_max_distance is not None:
        members = members.join(fps.select(C.ID, C.TITLE_FINGERPRINT), on=C.ID, how="inner")
    else:
        members = members.withColumn(C.TITLE_FINGERPRINT, F.lit(None).cast("long"))

    def forest(pdf: pd.DataFrame) -> pd.DataFrame:
        pdf = pdf.sort_values(C.ID, kind="stable").reset_index(drop=True)
        ids = pdf[C.ID].to_numpy()
        n_chars = pdf[C.N_CHARS].to_numpy(dtype=np.int64)
        texts_ = pdf[C.TEXT].tolist()
        tfp = pdf[C.TITLE_FINGERPRINT]
        has_title = tfp.notna().to_numpy()
        titles_ = tfp.fillna(0).to_numpy(dtype=np.int64).view(np.uint64)
        scores: dict[tuple[int, int], float] = {}

        def accept(i: int, j: int, d: int) -> bool:
            if d > policy.k_for_length(int(min(n_chars[i], n_chars[j]))):
                return False
            if (
                title_max_distance is not None
                and has_title[i]
                and has_title[j]
                and int(np.bitwise_count(titles_[i] ^ titles_[j])) > title_max_distance
            ):
                return False
            if not checking or d <= verify.accept_distance:
                return True
            score = similarity(texts_[i], texts_[j], verify, norm)
            scores[(i, j)] = score
            return score >= verify.min_similarity

        edges = within_k_forest(pdf[C.FINGERPRINT].to_numpy(dtype=np.int64), policy.largest, accept)
        sims = [scores.get((i, j)) for i, j, _ in edges]
        # typed columns: an empty result (no pair passed) must still convert to the schema
        id_dtype = pdf[C.ID].dtype
        return pd.DataFrame(
            {
                C.ID_A: pd.Series([ids[i] for i, _, _ in edges], dtype=id_dtype),
                C.ID_B: pd.Series([ids[j] for _, j, _ in edges], dtype=id_dtype),
                C.DISTANCE: np.array([d for _, _, d in edges], dtype=np.int32),
                # NaN for "not checked"; null again below
                C.SIMILARITY: np.array([np.nan if x is None else x for x in sims], dtype=np.float64),
                C.REASON: pd.Series([FINGERPRINT if x is None else VERIFIED for x in sims], dtype=object),
            }
        )

    schema = (
        f"{C.ID_A} {id_type}, {C.ID_B} {id_type}, {C.DISTANCE} int, {C.SIMILARITY} double, {C.REASON} string"
    )
    return (
        members.select(C.TABLE, C.KEY, C.ID, C.FINGERPRINT, C.N_CHARS, C.TEXT, C.TITLE_FINGERPRINT)
        .groupBy(C.TABLE, C.KEY)
        .applyInPandas(forest, schema=schema)
        .select(
            C.ID_A,
            C.ID_B,
            C.DISTANCE,
            F.when(~F.isnan(C.SIMILARITY), F.col(C.SIMILARITY)).alias(C.SIMILARITY),
            C.REASON,
        )
        .distinct()
    )
