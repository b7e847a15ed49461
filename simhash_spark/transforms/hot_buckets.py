"""Buckets too large to list every pair of (floods of near-variants, near-identical pile-ups): found before
the join, their members resolved together, once, to accepted pairs spanning their clusters (see
core.flood)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.core.flood import DEFAULT_LIMITS, FloodLimits, flood_forest
from simhash_spark.core.rules import PairRule
from simhash_spark.core.sketch_bands import stored_keys, without_keys
from simhash_spark.transforms.candidates import explode_band_keys


def bucket_sizes(fps: DataFrame, *, masks: list[int]) -> DataFrame:
    """In: ``id``, ``fingerprint``. Out: ``band``, ``band_key``, ``bucket_size`` (one row per bucket)."""
    return (
        explode_band_keys(fps, masks=masks)
        .groupBy(C.BAND, C.KEY)
        .agg(F.count(F.lit(1)).alias(C.BUCKET_SIZE))
        .select(C.BAND, C.KEY, C.BUCKET_SIZE)
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
        sample_sizes.where(F.col(C.BUCKET_SIZE) >= threshold)
        .select(C.BAND, C.KEY)
        .unionByName(
            sample_sizes.orderBy(F.desc(C.BUCKET_SIZE), C.BAND, C.KEY).limit(top).select(C.BAND, C.KEY)
        )
        .distinct()
    )
    return (
        explode_band_keys(fps, masks=masks)
        .join(F.broadcast(candidates), on=[C.BAND, C.KEY], how="left_semi")
        .groupBy(C.BAND, C.KEY)
        .agg(F.count(F.lit(1)).alias(C.BUCKET_SIZE))
        .select(C.BAND, C.KEY, C.BUCKET_SIZE)
    )


FLOOD_CAPPED = "flood_capped"  # the one row that carries the capped members (``distance``) and all of
# them (``similarity``)


def _forest_frame(
    pdf: pd.DataFrame,
    rule: PairRule,
    with_sketches: bool,
    limits: FloodLimits,
    sketch_hot: Sequence[tuple[int, int]] = (),
) -> pd.DataFrame:
    """The hot buckets' members (``id``, ``fingerprint``, ``n_chars``, ``text``, ``title_fingerprint``,
    ``check_summary``) → the accepted pairs spanning their clusters (``core.flood.flood_forest``), and one
    row of reason ``FLOOD_CAPPED`` (``hot_bucket_forest``)."""
    pdf = pdf.sort_values(C.ID, kind="stable").reset_index(drop=True)
    ids = pdf[C.ID].to_numpy()
    titles = [None if pd.isna(t) else int(t) for t in pdf[C.TITLE_FINGERPRINT]]
    texts = [None if pd.isna(t) else t for t in pdf[C.TEXT]]
    summaries = [bytes(v) if isinstance(v, bytes | bytearray) else None for v in pdf[C.CHECK_SUMMARY]]
    keys = without_keys(stored_keys(summaries), sketch_hot) if with_sketches else None
    fps = pdf[C.FINGERPRINT].to_numpy(dtype=np.int64)
    found = flood_forest(fps, pdf[C.N_CHARS].astype(int).tolist(), texts, titles, rule, keys, limits)
    edges = [*found.edges, (0, 0, found.capped, float(len(ids)), FLOOD_CAPPED)] if len(ids) else []
    # typed columns: an empty result (no pair passed) must still convert to the schema
    id_dtype = pdf[C.ID].dtype
    return pd.DataFrame(
        {
            C.ID_A: pd.Series([ids[e[0]] for e in edges], dtype=id_dtype),
            C.ID_B: pd.Series([ids[e[1]] for e in edges], dtype=id_dtype),
            C.DISTANCE: np.array([e[2] for e in edges], dtype=np.int32),
            # NaN for "not checked"; null again in Spark
            C.SIMILARITY: np.array([np.nan if e[3] is None else e[3] for e in edges], dtype=np.float64),
            C.REASON: pd.Series([e[4] for e in edges], dtype=object),
        }
    )


def _members(fps: DataFrame, hot: DataFrame, masks: list[int], known: np.ndarray | None) -> DataFrame:
    """``id``, ``fingerprint`` of the documents of ``fps`` in a hot bucket: those of the fingerprints
    ``known`` (int64) when the driver named them, else those whose band keys are ``hot``."""
    if known is not None:
        named = fps.sparkSession.createDataFrame(pd.DataFrame({C.FINGERPRINT: known.astype(np.int64)}))
        return fps.select(C.ID, C.FINGERPRINT).join(F.broadcast(named), on=C.FINGERPRINT, how="left_semi")
    return (
        explode_band_keys(fps.select(C.ID, C.FINGERPRINT), masks=masks)
        .join(F.broadcast(hot.select(C.BAND, C.KEY)), on=[C.BAND, C.KEY], how="left_semi")
        .select(C.ID, C.FINGERPRINT)
        .distinct()
    )


def _member_rows(
    members: DataFrame, fps: DataFrame, rule: PairRule, texts: DataFrame | None, sketches: DataFrame | None
) -> DataFrame:
    """The members (``id``, ``fingerprint``) with what the task reads of them: ``n_chars``, ``text``,
    ``title_fingerprint``, ``check_summary`` (null where the rule or the run has none)."""
    members = members.join(fps.select(C.ID, C.N_CHARS), on=C.ID, how="inner")
    if rule.verify.enabled:
        if texts is None:
            raise ValueError(f"verify.measure={rule.verify.measure!r} needs the documents' texts")
        members = members.join(texts.select(C.ID, C.TEXT), on=C.ID, how="inner")
    else:
        members = members.withColumn(C.TEXT, F.lit(None).cast("string"))
    if rule.title_max_distance is not None:
        members = members.join(fps.select(C.ID, C.TITLE_FINGERPRINT), on=C.ID, how="inner")
    else:
        members = members.withColumn(C.TITLE_FINGERPRINT, F.lit(None).cast("long"))
    if sketches is not None:
        return members.join(sketches.select(C.ID, C.CHECK_SUMMARY), on=C.ID, how="left")
    return members.withColumn(C.CHECK_SUMMARY, F.lit(None).cast("binary"))


def hot_bucket_forest(
    fps: DataFrame,
    hot: DataFrame,
    *,
    masks: list[int],
    rule: PairRule,
    texts: DataFrame | None = None,
    sketches: DataFrame | None = None,
    limits: FloodLimits = DEFAULT_LIMITS,
    sketch_hot: Sequence[tuple[int, int]] = (),
    member_fingerprints: np.ndarray | None = None,
) -> DataFrame:
    """Accepted pairs (pairs ``rule`` accepts) spanning the clusters of the members of all hot buckets,
    resolved together in one task (``core.flood``): a flood fills hundreds of hot buckets, one per table,
    with the same members.

    In: ``fps`` (``id``, ``fingerprint``, ``n_chars``, and ``title_fingerprint`` (nullable) with the
    title rule), ``hot`` (``band``, ``band_key``; small, broadcast), ``texts`` (``id``, ``text``; needed when
    the rule checks texts), with sketch bands ``sketches`` (``id``, ``check_summary``: a pair beyond its
    k that shares a band is checked). Out: ``id_a`` < ``id_b``, ``distance``, ``similarity``, ``reason``;
    plus one row of reason ``FLOOD_CAPPED`` (``id_a`` = ``id_b``) counting in ``distance`` the members
    whose candidates or failed checks reached ``limits`` and in ``similarity`` all members.
    ``member_fingerprints`` (int64): the fingerprints in the hot buckets, when the driver knows them (a
    join on them instead of every document's keys of every table).
    """
    id_type = fps.schema[C.ID].dataType.simpleString()
    members = _member_rows(_members(fps, hot, masks, member_fingerprints), fps, rule, texts, sketches)
    with_sketches = sketches is not None  # the task's function must not hold the DataFrame
    dropped = tuple(sketch_hot)
    schema = (
        f"{C.ID_A} {id_type}, {C.ID_B} {id_type}, {C.DISTANCE} int, {C.SIMILARITY} double, {C.REASON} string"
    )
    return (
        members.select(C.ID, C.FINGERPRINT, C.N_CHARS, C.TEXT, C.TITLE_FINGERPRINT, C.CHECK_SUMMARY)
        .withColumn(C.FLOOD_GROUP, F.lit(0))
        .groupBy(C.FLOOD_GROUP)
        .applyInPandas(lambda pdf: _forest_frame(pdf, rule, with_sketches, limits, dropped), schema=schema)
        .select(
            C.ID_A,
            C.ID_B,
            C.DISTANCE,
            F.when(~F.isnan(C.SIMILARITY), F.col(C.SIMILARITY)).alias(C.SIMILARITY),
            C.REASON,
        )
    )
