"""The linking on the driver, for small inputs: ``core.link_local`` over the documents collected (or held
by the caller), with the same pairs, clusters and statistics as the Spark path, handed back as
DataFrames."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from simhash_spark import columns as C
from simhash_spark.context import RunContext
from simhash_spark.core.link_local import (
    Documents,
    LinkSettings,
    LocalLinked,
    PairRow,
    find_candidates,
    link_local,
)
from simhash_spark.core.rules import PairRule
from simhash_spark.core.sketch_bands import stored_keys
from simhash_spark.link_model import (
    Design,
    Flood,
    Linked,
    LinkParams,
    SketchBands,
    finish_stats,
    link_stats,
)
from simhash_spark.transforms.designs import design_rules
from simhash_spark.transforms.driver_frames import driver_frame


def on_driver(keyed: DataFrame, params: LinkParams, n_docs: int | None) -> bool:
    """Small enough for the driver, and every input ``core.link_local`` needs is at hand: the text hash
    under a text check, no title rule "or" (a second linking of its own), and few enough documents that
    the Spark path's design counts every fingerprint too (``bands.auto_sample_rows``)."""
    limit = min(params.local_max_documents, params.bands.auto_sample_rows)
    return (
        n_docs is not None
        and n_docs <= limit
        and params.title_rule != "or"
        and (not params.rule.verify.enabled or C.TEXT_HASH in keyed.columns)
    )


def texts_of(texts: DataFrame | None) -> Callable[[set[Any]], dict[Any, str]]:
    """A lookup of the texts of a few ids: one broadcast join, run only when the text check needs it."""

    def fetch(ids: set[Any]) -> dict[Any, str]:
        if not ids or texts is None:
            return {}
        id_type = texts.schema[C.ID].dataType
        want = texts.sparkSession.createDataFrame(
            [(i,) for i in sorted(ids)], T.StructType([T.StructField(C.ID, id_type, False)])
        )
        got: pd.DataFrame = (
            texts.join(F.broadcast(want), on=C.ID, how="inner").select(C.ID, C.TEXT).toPandas()
        )
        return dict(zip(got[C.ID].tolist(), got[C.TEXT].tolist(), strict=True))

    return fetch


def collect_documents(
    keyed: DataFrame, titles: DataFrame | None, rule: PairRule, summaries: DataFrame | None = None
) -> Documents:
    """``core.link_local``'s documents collected from ``keyed``, ``titles`` and (for the sketch bands)
    the check ``summaries`` (``id``, ``check_summary``)."""
    cols = [C.ID, C.FINGERPRINT, C.N_CHARS] + ([C.TEXT_HASH] if rule.verify.enabled else [])
    title_rows = None
    if rule.title_max_distance is not None and titles is not None:
        title_rows = titles.select(C.ID, C.TITLE_FINGERPRINT).toPandas()
    rows: pd.DataFrame = keyed.select(*cols).toPandas()
    if summaries is not None:
        rows = rows.merge(summaries.select(C.ID, C.CHECK_SUMMARY).toPandas(), on=C.ID, how="left")
    return held_documents(rows, title_rows, rule)


def held_documents(pdf: pd.DataFrame, titles: pd.DataFrame | None, rule: PairRule) -> Documents:
    """``core.link_local``'s documents from the rows of ``keyed`` (with ``check_summary`` where the
    sketch bands need it) and ``titles``."""
    title_map: dict[Any, int] = {}
    if rule.title_max_distance is not None and titles is not None:
        title_map = dict(
            zip(titles[C.ID].tolist(), (int(v) for v in titles[C.TITLE_FINGERPRINT]), strict=True)
        )
    sketches = _sketches(pdf)
    return Documents(
        ids=pdf[C.ID].to_numpy(),
        fingerprints=pdf[C.FINGERPRINT].to_numpy(dtype=np.int64),
        n_chars=pdf[C.N_CHARS].to_numpy(dtype=np.int64),
        text_hash=pdf[C.TEXT_HASH].to_numpy(dtype=np.int64) if rule.verify.enabled else None,
        titles=title_map,
        sketches=sketches,
        sketch_keys=None if sketches is None else stored_keys(sketches),
    )


def _sketches(pdf: pd.DataFrame) -> list[bytes | None] | None:
    if C.CHECK_SUMMARY not in pdf.columns:
        return None
    return [bytes(v) if isinstance(v, bytes | bytearray) else None for v in pdf[C.CHECK_SUMMARY].tolist()]


def pairs_frame(spark: SparkSession, id_type: str, rows: list[PairRow], dtype: np.dtype) -> DataFrame:
    """pairs/ rows of a driver-side linking (``LocalLinked.pairs``, ids of numpy ``dtype``) as a
    DataFrame, sent through Arrow (no Python worker has to unpickle rows)."""
    pairs = pd.DataFrame(
        {
            C.ID_A: pd.Series([r[0] for r in rows], dtype=dtype),
            C.ID_B: pd.Series([r[1] for r in rows], dtype=dtype),
            C.DISTANCE: pd.Series([r[2] for r in rows], dtype="int32"),
            C.SIMILARITY: pd.Series([r[3] for r in rows], dtype=object),  # None stays null (not NaN)
            C.REASON: pd.Series([r[4] for r in rows], dtype=object),
        }
    )
    schema = (
        f"{C.ID_A} {id_type}, {C.ID_B} {id_type}, {C.DISTANCE} int, {C.SIMILARITY} double, {C.REASON} string"
    )
    return driver_frame(spark, pairs, schema)


def _frames(keyed: DataFrame, local: LocalLinked) -> tuple[DataFrame, DataFrame]:
    """(pairs, assignments) of a driver-side linking as DataFrames."""
    spark, id_type = keyed.sparkSession, keyed.schema[C.ID].dataType.simpleString()
    assignments = pd.DataFrame({C.NODE: local.nodes, C.COMPONENT: local.labels})
    # at most cluster.local_max_documents assignments: broadcast wherever joined (the pairs, mostly written
    # as they are, are left to Spark's size estimate: a hint on a frame never joined draws a warning)
    return (
        pairs_frame(spark, id_type, local.pairs, local.nodes.dtype),
        F.broadcast(driver_frame(spark, assignments, f"{C.NODE} {id_type}, {C.COMPONENT} {id_type}")),
    )


def link_on_driver(
    keyed: DataFrame,
    params: LinkParams,
    ctx: RunContext,
    *,
    documents: Callable[[], Documents],
    fetch: Callable[[set[Any]], dict[Any, str]],
) -> Linked:
    """``link`` with ``core.link_local`` over ``documents()`` (``keyed`` on the driver): texts fetched only
    for the pairs the rule checks, the results handed back as DataFrames."""
    rule, k = params.rule, params.rule.largest_k
    settings = LinkSettings(
        rule,
        params.bands.scheme,
        design_rules(params.bands, in_task=True),
        params.pairs_max_group,
        params.sketch_bands,
        params.flood_limits,
    )
    with ctx.stage("candidates"):
        found = find_candidates(documents(), settings)
    with ctx.stage("verify"):
        local = link_local(found, settings, fetch)
    with ctx.stage("clusters"):
        pairs, assignments = _frames(keyed, local)
    design = Design(
        local.scheme, found.masks, local.design_report, None, local.n_hot, local.largest_buckets, "driver"
    )
    sketch = SketchBands(local.sketch_pairs, local.sketch_hot_keys) if params.sketch_bands else None
    stats = link_stats(
        local.totals,
        design,
        rule,
        k,
        local.within_k,
        local.by_reason,
        local.n_pairs,
        Flood(local.flood_members, local.forest_edges, local.flood_capped),
        sketch,
    )
    if local.sketch_rejected is not None:  # as the Spark path reports its check filter
        stats["verify"].update({"sketch_filter": True, "sketch_rejected": local.sketch_rejected})
    finish_stats(stats, params, local.n_pairs, iterations=0, method="local")
    return Linked(pairs, assignments, stats, local, (local.nodes, local.labels))
