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
    # one row per cluster (its representative), collected once: the size histogram and the choice of
    # examples both come from it
    heads = (
        multi.where(~F.col(C.IS_DUPLICATE))
        .select(C.CLUSTER_ID, C.CLUSTER_SIZE, F.xxhash64(C.CLUSTER_ID).alias("_h"))
        .collect()
    )
    sizes: dict[int, int] = {}
    for r in heads:
        sizes[int(r[C.CLUSTER_SIZE])] = sizes.get(int(r[C.CLUSTER_SIZE]), 0) + 1
    dists = {int(r[C.DISTANCE]): int(r["count"]) for r in pairs.groupBy(C.DISTANCE).count().collect()}
    sims = [
        float(r[C.SIMILARITY])
        for r in pairs.where(F.col(C.SIMILARITY).isNotNull())
        .select(C.SIMILARITY, F.xxhash64(C.ID_A, C.ID_B).alias("_h"))
        .orderBy("_h")
        .limit(SIMILARITY_SAMPLE)
        .collect()
    ]
    chosen = _chosen_clusters(heads)
    if not chosen:
        return ReportData(summary, sizes, dists, sims, [])
    return ReportData(summary, sizes, dists, sims, _examples(documents, texts, chosen, cfg))


def _chosen_clusters(heads: list[Any]) -> list[Any]:
    """The largest clusters and more in a hash order of their ids."""
    by_size = sorted(heads, key=lambda r: (-r[C.CLUSTER_SIZE], r[C.CLUSTER_ID]))
    largest = [r[C.CLUSTER_ID] for r in by_size[: EXAMPLES // 2]]
    taken = set(largest)
    rest = sorted(
        (r for r in heads if r[C.CLUSTER_ID] not in taken), key=lambda r: (r["_h"], r[C.CLUSTER_ID])
    )
    return largest + [r[C.CLUSTER_ID] for r in rest[: EXAMPLES - len(largest)]]


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
