"""Gathering the report's data from a run's outputs: a few small aggregations and the texts of the
example clusters (a handful of rows reach the driver)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from simhash_spark import columns as C
from simhash_spark.config import Config
from simhash_spark.core.simhash import hamming
from simhash_spark.core.verify import similarity
from simhash_spark.report.render import ExampleCluster, ReportData

EXAMPLES = 20
MEMBERS_SHOWN = 4
SIMILARITY_SAMPLE = 5000


def collect_report(
    summary: dict[str, Any], documents: DataFrame, pairs: DataFrame, texts: DataFrame, cfg: Config
) -> ReportData:
    """In: the run's ``documents`` and ``pairs`` and the input ``texts`` (``id``, ``text``).

    Examples: the 10 largest clusters and 10 more in a hash order of their ids (deterministic, varied),
    each with its first members by id."""
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
    return ReportData(summary, sizes, dists, sims, _examples(documents, texts, chosen, cfg))


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


def _examples(documents: DataFrame, texts: DataFrame, chosen: list[Any], cfg: Config) -> list[ExampleCluster]:
    """Each chosen cluster's first members by id, with distance and similarity to the first."""
    rank = F.row_number().over(Window.partitionBy(C.CLUSTER_ID).orderBy(C.ID))
    members = (
        documents.where(F.col(C.CLUSTER_ID).isin(chosen))
        .select(C.CLUSTER_ID, C.CLUSTER_SIZE, C.ID, C.FINGERPRINT, rank.alias("_rank"))
        .where(F.col("_rank") <= MEMBERS_SHOWN)
        .join(texts.select(C.ID, C.TEXT), on=C.ID, how="left")
        .collect()
    )
    by_cluster: dict[Any, list[Any]] = {}
    for r in members:
        by_cluster.setdefault(r[C.CLUSTER_ID], []).append(r)
    examples = []
    for cid in chosen:
        rows = sorted(by_cluster.get(cid, []), key=lambda r: r["_rank"])
        if not rows:
            continue
        first = rows[0]
        shown: list[tuple[str, str, int | None, float | None]] = [
            (str(first[C.ID]), first[C.TEXT] or "", None, None)
        ]
        for r in rows[1:]:
            dist = (
                hamming(first[C.FINGERPRINT], r[C.FINGERPRINT])
                if first[C.FINGERPRINT] is not None and r[C.FINGERPRINT] is not None
                else None
            )
            sim = (
                similarity(first[C.TEXT] or "", r[C.TEXT] or "", cfg.verify, cfg.normalize)
                if cfg.verify.enabled
                else None
            )
            shown.append((str(r[C.ID]), r[C.TEXT] or "", dist, sim))
        examples.append(ExampleCluster(str(cid), int(first[C.CLUSTER_SIZE]), shown))
    return examples
