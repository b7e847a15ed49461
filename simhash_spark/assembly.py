"""A run's outputs from its linking: documents/, pairs/, clusters/, the duplicates and the run's totals,
built on the driver when the linking labelled the components there, else by Spark."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.config import Config
from simhash_spark.context import RunContext
from simhash_spark.core.assemble_local import (
    LOCAL_POLICIES,
    cluster_members,
    cluster_rows,
    cluster_totals,
    matched_totals,
)
from simhash_spark.core.assemble_local import batch_components as local_batch_components
from simhash_spark.core.fingerprint import ALREADY_INDEXED, FINGERPRINTED
from simhash_spark.core.spark_hash import KINDS
from simhash_spark.index.session import Lookup
from simhash_spark.link_model import AtHand, Linked
from simhash_spark.linking_local import pairs_frame
from simhash_spark.report.collect_local import local_report
from simhash_spark.report.render import ReportData
from simhash_spark.transforms.clusters import (
    assign_clusters,
    attach_clusters,
    cluster_table,
    duplicate_ids_of,
)
from simhash_spark.transforms.driver_frames import driver_frame
from simhash_spark.transforms.fingerprint import is_fingerprinted
from simhash_spark.transforms.incremental import batch_components, drop_index_pairs, with_index_matches


def _assemble_full(fps: DataFrame, linked: Linked, cfg: Config) -> DataFrame:
    return assign_clusters(
        fps,
        linked.assignments,
        representative=cfg.cluster.representative,
        extra=cfg.input.passthrough_columns,
    )


@dataclass(frozen=True)
class Assembled:
    """A run's outputs but deduplicated/, and its totals."""

    documents: DataFrame  # persisted
    pairs: DataFrame
    clusters: DataFrame
    duplicate_ids: DataFrame  # id: the documents that are duplicates
    totals: RunTotals
    report: Callable[[dict[str, Any]], ReportData] | None = None  # the report's data, drawn on the driver
    members: pd.DataFrame | None = None  # the clustered documents, when clustered on the driver


def assemble(
    fps: DataFrame,
    linked: Linked,
    looked: Lookup | None,
    at_hand: AtHand | None,
    cfg: Config,
    ctx: RunContext,
    status_counts: dict[str, int],
) -> Assembled:
    """The outputs from the linking: on the driver for a full run whose components were labelled there
    and whose representatives need nothing but ids and lengths, else by Spark."""
    on_driver = linked.labelled is not None and cfg.cluster.representative in LOCAL_POLICIES
    if on_driver and looked is None:
        return _assemble_on_driver(fps, linked, at_hand, cfg, status_counts, ctx)
    if on_driver and looked is not None:
        return _assemble_incremental_on_driver(fps, linked, looked, at_hand, cfg, status_counts, ctx)
    if looked is None:
        documents, pairs = _assemble_full(fps, linked, cfg), linked.pairs
    else:
        documents, pairs = _assemble_incremental(fps, linked, looked, cfg, ctx)
        linked.stats["pairs_accepted"] = pairs.count()
    documents = ctx.persist(documents)
    totals = _document_totals(documents, status_counts, incremental=looked is not None)
    return Assembled(documents, pairs, cluster_table(documents), duplicate_ids_of(documents), totals)


def _assemble_on_driver(
    fps: DataFrame,
    linked: Linked,
    at_hand: AtHand | None,
    cfg: Config,
    status_counts: dict[str, int],
    ctx: RunContext,
) -> Assembled:
    """``_assemble_full`` from the components labelled on the driver (``core.assemble_local``): documents/
    is the fingerprints joined with a broadcast of the clustered documents, the rest is built here. A run
    linked on the driver gets its report's data from there too."""
    assert linked.labelled is not None
    nodes, labels = linked.labelled
    spark, id_type = fps.sparkSession, fps.schema[C.ID].dataType.simpleString()
    longest = cfg.cluster.representative == "longest_text"
    n_chars = _lengths(fps, nodes, at_hand, id_type) if longest else {}
    members = cluster_members(nodes, labels, n_chars, representative=cfg.cluster.representative)
    members_frame, clusters = _member_frames(spark, members, members, id_type)
    documents = attach_clusters(fps, members_frame, extra=cfg.input.passthrough_columns)
    duplicates = members.loc[members[C.CLUSTER_ID] != members[C.ID], [C.ID]]
    duplicate_ids = F.broadcast(driver_frame(spark, duplicates, f"{C.ID} {id_type}"))
    counted = cluster_totals(members, sum(status_counts.values()))
    totals = RunTotals(
        input_rows=sum(status_counts.values()),
        fingerprinted=sum(status_counts[s] for s in FINGERPRINTED),
        duplicates=counted.duplicates,
        clusters=counted.clusters,
        largest_cluster=counted.largest,
        matched_index=0,
    )
    id_kind = KINDS.get(id_type)
    report = None
    if id_kind is not None and linked.local is not None and at_hand is not None:
        report = partial(
            local_report, members=members, pairs=linked.local.pairs, texts=at_hand.texts, id_kind=id_kind
        )
    return Assembled(ctx.persist(documents), linked.pairs, clusters, duplicate_ids, totals, report, members)


def _assemble_incremental_on_driver(
    fps: DataFrame,
    linked: Linked,
    looked: Lookup,
    at_hand: AtHand | None,
    cfg: Config,
    status_counts: dict[str, int],
    ctx: RunContext,
) -> Assembled:
    """``_assemble_incremental`` from the components labelled on the driver: the batch's components and
    index matches (``core.assemble_local.batch_components``), clusters, pairs and totals are built here;
    documents/ is the fingerprints joined with broadcasts of them."""
    assert linked.labelled is not None
    nodes, labels = linked.labelled
    spark, id_type = fps.sparkSession, fps.schema[C.ID].dataType.simpleString()
    dates = _touched_dates(looked)
    comps = local_batch_components(nodes, labels, dates)
    batch_nodes, batch_labels = comps[C.NODE].to_numpy(), comps[C.COMPONENT].to_numpy()
    longest = cfg.cluster.representative == "longest_text"
    n_chars = _lengths(fps, batch_nodes, at_hand, id_type) if longest else {}
    members = cluster_members(batch_nodes, batch_labels, n_chars, representative=cfg.cluster.representative)
    # a batch document whose component holds no other batch document is a cluster of one (it matched the
    # index only): it has no clusters/ row
    clustered = members[members[C.CLUSTER_SIZE] > 1]
    members_frame, clusters = _member_frames(spark, members, clustered, id_type)
    comps_schema = f"{C.NODE} {id_type}, {C.COMPONENT} {id_type}, {C.MATCHED_INDEX_ID} {id_type}"
    extra = cfg.input.passthrough_columns
    documents = attach_clusters(fps, members_frame, extra=extra)
    documents = ctx.persist(
        with_index_matches(documents, F.broadcast(driver_frame(spark, comps, comps_schema)), extra=extra)
    )
    pairs, n_pairs = _batch_pairs(linked, looked, dates, id_type, ctx)
    linked.stats["pairs_accepted"] = n_pairs
    n_rows = sum(status_counts.values())
    counted, matched = matched_totals(members, comps, n_rows, status_counts[ALREADY_INDEXED])
    totals = RunTotals(
        input_rows=n_rows,
        fingerprinted=sum(status_counts[s] for s in FINGERPRINTED),
        duplicates=counted.duplicates,
        clusters=counted.clusters,
        largest_cluster=counted.largest,
        matched_index=matched,
    )
    return Assembled(documents, pairs, clusters, duplicate_ids_of(documents), totals)


def _member_frames(
    spark: SparkSession, members: pd.DataFrame, clustered: pd.DataFrame, id_type: str
) -> tuple[DataFrame, DataFrame]:
    """(``cluster_members``' rows as a broadcast frame, clusters/ from the ``clustered`` ones among them)."""
    schema = f"{C.ID} {id_type}, {C.CLUSTER_ID} {id_type}, {C.CLUSTER_SIZE} long"
    clusters_schema = f"{C.CLUSTER_ID} {id_type}, {C.SIZE} long, {C.MEMBER_IDS} array<{id_type}>"
    return (
        F.broadcast(driver_frame(spark, members, schema)),
        driver_frame(spark, cluster_rows(clustered), clusters_schema),
    )


def _touched_dates(looked: Lookup) -> dict[object, str]:
    """The run date of each index entry the batch touched (no job when it touched none)."""
    if not looked.stats["touched_entries"]:
        return {}
    if looked.local is not None:
        held = looked.local.touched
    else:
        held = looked.touched.select(C.ID, C.RUN_DATE).toPandas()
    return dict(zip(held[C.ID].tolist(), held[C.RUN_DATE].tolist(), strict=True))


def _batch_pairs(
    linked: Linked, looked: Lookup, dates: Mapping[object, str], id_type: str, ctx: RunContext
) -> tuple[DataFrame, int]:
    """(pairs/ of an incremental run, their number): the pairs with a batch document (``drop_index_pairs``),
    chosen on the driver when the linking ran there."""
    if linked.local is None:
        pairs = ctx.persist(drop_index_pairs(linked.pairs, looked.touched.select(C.ID)))
        return pairs, pairs.count()
    kept = [p for p in linked.local.pairs if p[0] not in dates or p[1] not in dates]
    return pairs_frame(linked.pairs.sparkSession, id_type, kept, linked.local.nodes.dtype), len(kept)


def _lengths(fps: DataFrame, nodes: np.ndarray, at_hand: AtHand | None, id_type: str) -> dict[object, int]:
    """The normalized lengths of the graph's documents by id: those a driver fingerprinting holds, else
    collected for these documents only."""
    if at_hand is not None:
        held = at_hand.keyed
    else:
        wanted = F.broadcast(driver_frame(fps.sparkSession, pd.DataFrame({C.ID: nodes}), f"{C.ID} {id_type}"))
        held = fps.join(wanted, on=C.ID, how="left_semi").select(C.ID, C.N_CHARS).toPandas()
    return dict(zip(held[C.ID].tolist(), held[C.N_CHARS].tolist(), strict=True))


def _assemble_incremental(
    fps: DataFrame, linked: Linked, looked: Lookup, cfg: Config, ctx: RunContext
) -> tuple[DataFrame, DataFrame]:
    """(documents with ``matched_index_id``, the pairs that involve a batch document)."""
    batch_ids = fps.where(is_fingerprinted(F.col(C.STATUS))).select(C.ID)
    comps = ctx.persist(
        batch_components(linked.assignments, batch_ids, looked.touched.select(C.ID, C.RUN_DATE))
    )
    documents = assign_clusters(
        fps,
        comps.select(C.NODE, C.COMPONENT),
        representative=cfg.cluster.representative,
        extra=cfg.input.passthrough_columns,
    )
    documents = with_index_matches(documents, comps, extra=cfg.input.passthrough_columns)
    pairs = ctx.persist(drop_index_pairs(linked.pairs, looked.touched.select(C.ID)))
    return documents, pairs


@dataclass(frozen=True)
class RunTotals:
    """The run's headline numbers, typed: what the index's run record and the monitor use."""

    input_rows: int
    fingerprinted: int
    duplicates: int
    clusters: int
    largest_cluster: int
    matched_index: int  # batch documents whose cluster holds an indexed document (incremental runs)

    @property
    def dedup_rate(self) -> float:
        return round(self.duplicates / self.input_rows, 6) if self.input_rows else 0.0


def _document_totals(documents: DataFrame, status_counts: dict[str, int], *, incremental: bool) -> RunTotals:
    matched = F.count(F.col(C.MATCHED_INDEX_ID)) if incremental else F.lit(0)
    multi = F.col(C.CLUSTER_SIZE) > 1
    # a full run's cluster has exactly one member that is no duplicate, its representative: counting those
    # needs no distinct (a shuffle); an incremental run's cluster may be represented by an indexed document
    clusters = (
        F.count_distinct(F.when(multi, F.col(C.CLUSTER_ID)))
        if incremental
        else F.coalesce(F.sum((multi & ~F.col(C.IS_DUPLICATE)).cast("long")), F.lit(0))
    )
    row = documents.agg(
        F.coalesce(F.sum(F.col(C.IS_DUPLICATE).cast("long")), F.lit(0)).alias("duplicates"),
        clusters.alias("clusters"),
        F.coalesce(F.max(C.CLUSTER_SIZE), F.lit(0)).alias("largest"),
        matched.alias("matched"),
    ).first()
    assert row is not None
    return RunTotals(
        input_rows=sum(status_counts.values()),
        fingerprinted=sum(status_counts[s] for s in FINGERPRINTED),
        duplicates=int(row["duplicates"]),
        clusters=int(row["clusters"]),
        largest_cluster=int(row["largest"]),
        matched_index=int(row["matched"]),
    )
