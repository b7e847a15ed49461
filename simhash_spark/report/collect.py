"""Gathering the report's data from a run's outputs: the clustered documents and the pairs collected once
and summarized on the driver by ``report.collect_local`` when they are few enough, else a few small
aggregations; then the texts of the example clusters."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from simhash_spark import columns as C
from simhash_spark.core.spark_hash import KINDS
from simhash_spark.report.collect_local import EXAMPLES, MEMBERS_SHOWN, SIMILARITY_SAMPLE, local_report
from simhash_spark.report.render import ExampleCluster, Member, ReportData


def collect_report(
    summary: dict[str, Any],
    documents: DataFrame,
    pairs: DataFrame,
    texts: DataFrame,
    *,
    on_driver: bool = False,
    members: pd.DataFrame | None = None,
) -> ReportData:
    """In: the run's ``documents`` and ``pairs`` and the input ``texts`` (``id``, ``text``). With
    ``on_driver`` (the caller knows the clustered documents and the pairs are few), both are collected
    once and summarized by ``collect_local.local_report``: the same data from two collects and a fetch of
    the examples' texts, instead of a plan of joins, windows and aggregations per part. ``members``: the
    clustered documents (``core.assemble_local.cluster_members``) when the caller holds them already, on
    the driver: not collected again.

    Examples: the 10 largest clusters and 10 more in a hash order of their ids (deterministic, varied),
    each with its first members by id and the accepted pair each is in."""
    id_kind = KINDS.get(documents.schema[C.ID].dataType.simpleString())
    if on_driver and id_kind is not None:
        return _on_driver(summary, documents, pairs, texts, id_kind, members)
    multi = documents.where(F.col(C.CLUSTER_SIZE) > 1)
    sizes, chosen = _sizes_and_chosen(multi)
    dists = {int(r[C.DISTANCE]): int(r["count"]) for r in pairs.groupBy(C.DISTANCE).count().collect()}
    sims = [
        float(r[C.SIMILARITY])
        for r in pairs.where(F.col(C.SIMILARITY).isNotNull())
        .select(C.SIMILARITY, F.xxhash64(C.ID_A, C.ID_B).alias("_h"))
        .orderBy("_h")
        .limit(SIMILARITY_SAMPLE)
        .collect()
    ]
    if not chosen:
        return ReportData(summary, sizes, dists, sims, [])
    return ReportData(summary, sizes, dists, sims, _examples(documents, pairs, texts, chosen))


def _on_driver(
    summary: dict[str, Any],
    documents: DataFrame,
    pairs: DataFrame,
    texts: DataFrame,
    id_kind: str,
    members: pd.DataFrame | None,
) -> ReportData:
    if members is None:
        members = (
            documents.where(F.col(C.CLUSTER_SIZE) > 1)
            .select(C.ID, C.CLUSTER_ID, F.col(C.CLUSTER_SIZE).cast("long").alias(C.CLUSTER_SIZE))
            .toPandas()
        )
    rows: pd.DataFrame = pairs.select(C.ID_A, C.ID_B, C.DISTANCE, C.SIMILARITY, C.REASON).toPandas()
    as_python = rows.astype(object)  # Python ints and floats; then None, not NaN, for a missing similarity
    pair_rows = list(as_python.where(as_python.notna(), None).itertuples(index=False, name=None))
    return local_report(summary, members, pair_rows, _texts_by_id(texts), id_kind=id_kind)


def _texts_by_id(texts: DataFrame) -> Callable[[set[Any]], dict[Any, str]]:
    """The texts of a few ids: the input scanned once, filtered by id, not joined whole."""

    def fetch(ids: set[Any]) -> dict[Any, str]:
        if not ids:
            return {}
        return {r[C.ID]: r[C.TEXT] for r in texts.where(F.col(C.ID).isin(sorted(ids))).collect()}

    return fetch


def _sizes_and_chosen(multi: DataFrame) -> tuple[dict[int, int], list[Any]]:
    """(clusters per size, the example clusters: the largest and more in a hash order of their ids), from
    one collect of three bounded parts: the size histogram, the largest heads, the first heads by hash."""
    heads = multi.where(~F.col(C.IS_DUPLICATE)).select(
        C.CLUSTER_ID,
        F.col(C.CLUSTER_SIZE).cast("long").alias(C.CLUSTER_SIZE),
        F.xxhash64(C.CLUSTER_ID).alias("_h"),
    )
    id_type = heads.schema[C.CLUSTER_ID].dataType
    hist = (
        heads.groupBy(C.CLUSTER_SIZE)
        .agg(F.count(F.lit(1)).alias("_n"))
        .select(
            F.lit("size").alias("_part"),
            F.lit(None).cast(id_type).alias(C.CLUSTER_ID),
            C.CLUSTER_SIZE,
            "_n",
            F.lit(None).cast("long").alias("_h"),
        )
    )
    largest = heads.orderBy(F.desc(C.CLUSTER_SIZE), C.CLUSTER_ID).limit(EXAMPLES // 2)
    # EXAMPLES by hash: after leaving out any of the largest, enough remain
    by_hash = heads.orderBy("_h", C.CLUSTER_ID).limit(EXAMPLES)
    parts = [
        frame.select(
            F.lit(name).alias("_part"),
            C.CLUSTER_ID,
            C.CLUSTER_SIZE,
            F.lit(None).cast("long").alias("_n"),
            "_h",
        )
        for name, frame in (("largest", largest), ("hash", by_hash))
    ]
    rows = hist.unionByName(parts[0]).unionByName(parts[1]).collect()
    sizes = {int(r[C.CLUSTER_SIZE]): int(r["_n"]) for r in rows if r["_part"] == "size"}
    top = sorted(
        (r for r in rows if r["_part"] == "largest"), key=lambda r: (-r[C.CLUSTER_SIZE], r[C.CLUSTER_ID])
    )
    chosen = [r[C.CLUSTER_ID] for r in top]
    taken = set(chosen)
    rest = sorted((r for r in rows if r["_part"] == "hash"), key=lambda r: (r["_h"], r[C.CLUSTER_ID]))
    chosen += [r[C.CLUSTER_ID] for r in rest if r[C.CLUSTER_ID] not in taken][: EXAMPLES - len(chosen)]
    return sizes, chosen


def _examples(
    documents: DataFrame, pairs: DataFrame, texts: DataFrame, chosen: list[Any]
) -> list[ExampleCluster]:
    """Each chosen cluster's first members by id, each with an accepted pair it is in; then the texts of
    those documents only (the input is scanned once, filtered by id, not joined whole)."""
    rank = F.row_number().over(Window.partitionBy(C.CLUSTER_ID).orderBy(C.ID))
    members = (
        documents.where(F.col(C.CLUSTER_ID).isin(chosen))
        .select(C.CLUSTER_ID, C.CLUSTER_SIZE, C.ID, rank.alias("_rank"))
        .where(F.col("_rank") <= MEMBERS_SHOWN)
    )
    rows = _with_partners(members, pairs).collect()
    wanted = {r[C.ID] for r in rows} | {r["_partner"] for r in rows if r["_partner"] is not None}
    text_of = _texts_by_id(texts)(wanted)
    by_cluster: dict[Any, list[Any]] = {}
    for r in rows:
        by_cluster.setdefault(r[C.CLUSTER_ID], []).append(r)
    examples = []
    for cid in chosen:
        shown = sorted(by_cluster.get(cid, []), key=lambda r: r["_rank"])
        if shown:
            members_shown = [_member(r, text_of) for r in shown]
            examples.append(ExampleCluster(str(cid), int(shown[0][C.CLUSTER_SIZE]), members_shown))
    return examples


def _with_partners(members: DataFrame, pairs: DataFrame) -> DataFrame:
    """``members`` with the accepted pair each is in, preferring a partner among the shown members of its
    cluster, then the highest similarity, the smallest distance, the smallest partner id: the pair that
    joined it, not a comparison with another member that may never have been a pair."""
    both_ways = pairs.select(
        F.col(C.ID_A).alias(C.ID), F.col(C.ID_B).alias("_partner"), C.DISTANCE, C.SIMILARITY
    ).unionByName(
        pairs.select(F.col(C.ID_B).alias(C.ID), F.col(C.ID_A).alias("_partner"), C.DISTANCE, C.SIMILARITY)
    )
    shown = members.select(F.col(C.ID).alias("_partner"), F.col(C.CLUSTER_ID).alias("_partner_cluster"))
    candidates = (
        members.select(C.ID, C.CLUSTER_ID)
        .join(both_ways, on=C.ID)
        .join(shown, on="_partner", how="left")
        .withColumn("_near", (F.col("_partner_cluster") == F.col(C.CLUSTER_ID)).cast("int"))
    )
    order = Window.partitionBy(C.ID).orderBy(
        F.desc_nulls_last("_near"), F.desc_nulls_last(C.SIMILARITY), C.DISTANCE, "_partner"
    )
    best = (
        candidates.withColumn("_pick", F.row_number().over(order))
        .where(F.col("_pick") == 1)
        .select(C.ID, "_partner", C.DISTANCE, C.SIMILARITY)
    )
    return members.join(best, on=C.ID, how="left")


def _member(r: Any, text_of: Mapping[Any, str | None]) -> Member:
    partner = r["_partner"]
    return Member(
        id=str(r[C.ID]),
        text=text_of.get(r[C.ID]) or "",
        partner_id=None if partner is None else str(partner),
        partner_text=None if partner is None else text_of.get(partner),
        distance=None if r[C.DISTANCE] is None else int(r[C.DISTANCE]),
        similarity=None if r[C.SIMILARITY] is None else float(r[C.SIMILARITY]),
    )
