"""The dedup job: stages wired together, timed, summarized and published."""

from __future__ import annotations

import logging
import platform
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.config import Config
from simhash_spark.core.bands import parse_scheme
from simhash_spark.core.fingerprint import FINGERPRINTED, STATUSES
from simhash_spark.errors import InputError, SimhashSparkError, essence, is_unreadable_input
from simhash_spark.faults import maybe_pause
from simhash_spark.io import FileSystem, Publisher, prepare_docs, read_input, validate_input, write_parquet
from simhash_spark.transforms.candidates import accepted_pairs, candidate_pairs
from simhash_spark.transforms.clusters import assign_clusters, cluster_table, drop_duplicates
from simhash_spark.transforms.components import connected_components
from simhash_spark.transforms.designs import choose_design
from simhash_spark.transforms.fingerprint import add_fingerprints, is_fingerprinted
from simhash_spark.transforms.hot_buckets import SIZE, bucket_sizes, hot_bucket_forest
from simhash_spark.transforms.identical import (
    GROUP_SIZE,
    cross_group_pair_count,
    expand_pairs,
    fingerprint_groups,
    group_members,
    star_edges,
    within_group_pairs,
)

log = logging.getLogger(__name__)


@dataclass
class DedupResult:
    """Outputs of one run (persisted where later stages reuse them) and its statistics."""

    documents: DataFrame
    pairs: DataFrame
    clusters: DataFrame
    deduplicated: DataFrame
    stats: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    _persisted: list[DataFrame] = field(default_factory=list, repr=False)

    def unpersist(self) -> None:
        for df in self._persisted:
            df.unpersist()


class StageFailed(RuntimeError):
    """A runtime failure, labelled with the stage it happened in (exit code 1)."""


@contextmanager
def _timed(timings: dict[str, float], stage: str) -> Iterator[None]:
    start = time.perf_counter()
    log.info("stage %s: start", stage)
    maybe_pause(stage)
    try:
        yield
    except SimhashSparkError:
        raise
    except Exception as e:
        if is_unreadable_input(e):
            raise InputError(f"cannot read input: {essence(e)}") from e
        raise StageFailed(f"stage '{stage}' failed: {type(e).__name__}: {essence(e)}") from e
    timings[stage] = round(time.perf_counter() - start, 3)
    log.info("stage %s: %.1f s", stage, timings[stage])


def _default_parallelism(spark: SparkSession) -> int:
    try:
        return int(spark.sparkContext.defaultParallelism)
    except Exception:
        return int(spark.conf.get("spark.sql.shuffle.partitions") or 200)


def _spread(spark: SparkSession, docs: DataFrame, cfg: Config) -> DataFrame:
    """Fingerprinting is CPU-bound Python: make sure every core gets a share even when the input is a
    single small file. Hash-partitioning on id keeps the placement deterministic."""
    want = cfg.spark.min_fingerprint_partitions or 2 * _default_parallelism(spark)
    try:
        have = docs.rdd.getNumPartitions()
    except Exception:
        return docs
    return docs.repartition(want, C.ID) if have < want else docs


def dedup(spark: SparkSession, raw: DataFrame, cfg: Config, *, source: str = "input") -> DedupResult:
    """Find near-duplicates in ``raw`` (the input rows, any columns) as configured.

    Runs the Spark actions the job needs (validation, fingerprinting, candidate counting, connected
    components); the returned DataFrames are ready to be written or inspected.
    """
    timings: dict[str, float] = {}
    persisted: list[DataFrame] = []
    k = cfg.match.max_distance
    scheme = parse_scheme(cfg.bands.scheme)

    with _timed(timings, "validate"):
        validate_input(raw, cfg, source=source)
        docs = _spread(spark, prepare_docs(raw, cfg), cfg)

    with _timed(timings, "fingerprint"):
        extra = tuple(c for c in docs.columns if c not in (C.ID, C.TEXT))
        fps = add_fingerprints(docs, model=cfg.model, extra=extra).persist(StorageLevel.MEMORY_AND_DISK)
        persisted.append(fps)
        status_rows = fps.groupBy(C.STATUS).count().collect()
    status_counts = {s: 0 for s in STATUSES}
    status_counts.update({r[C.STATUS]: int(r["count"]) for r in status_rows})
    input_rows = sum(status_counts.values())

    with _timed(timings, "candidates"):
        keyed = fps.where(is_fingerprinted(F.col(C.STATUS))).select(C.ID, C.FINGERPRINT)
        groups = fingerprint_groups(keyed).persist(StorageLevel.MEMORY_AND_DISK)
        members = group_members(keyed, groups).persist(StorageLevel.MEMORY_AND_DISK)
        persisted += [groups, members]
        limit = cfg.output.pairs_max_group
        grp = groups.agg(
            F.count(F.lit(1)).alias("distinct"),
            F.coalesce(F.sum((F.col(GROUP_SIZE) > 1).cast("long")), F.lit(0)).alias("groups"),
            F.coalesce(F.max(GROUP_SIZE), F.lit(0)).alias("largest"),
            F.coalesce(F.sum((F.col(GROUP_SIZE) > limit).cast("long")), F.lit(0)).alias("cut"),
            F.coalesce(F.sum(within_group_pairs(F.col(GROUP_SIZE), limit)), F.lit(0)).alias("within"),
        ).first()
        assert grp is not None
        design_report: dict[str, Any] = {}
        if scheme.auto:
            scheme, design_report = choose_design(
                groups.select(C.ID, C.FINGERPRINT), n=int(grp["distinct"]), k=k, cfg=cfg.bands
            )
            log.info("bands.scheme=auto chose %s (%s)", scheme.spec, design_report["reason"])
        reps = groups.select(C.ID, C.FINGERPRINT)
        masks = scheme.table_masks(k)
        sizes = bucket_sizes(reps, masks=masks).persist(StorageLevel.MEMORY_AND_DISK)
        persisted.append(sizes)
        hot = sizes.where(F.col(SIZE) > cfg.bands.hot_bucket_limit)
        n_hot = hot.count()
        largest_buckets = [
            {"band": r[C.TABLE], "key": f"{r[C.KEY] & 0xFFFFFFFFFFFFFFFF:016x}", "fingerprints": r[SIZE]}
            for r in sizes.orderBy(F.desc(SIZE), C.TABLE, C.KEY).limit(10).collect()
        ]
        candidates = candidate_pairs(
            reps, scheme=scheme, max_distance=k, skip=hot if n_hot else None
        ).persist(StorageLevel.MEMORY_AND_DISK)
        persisted.append(candidates)
        cand = candidates.agg(
            F.count(F.lit(1)).alias("examined"),
            F.coalesce(F.sum((F.col(C.DISTANCE) <= k).cast("long")), F.lit(0)).alias("accepted"),
        ).first()
        assert cand is not None
        rep_pairs = accepted_pairs(candidates, max_distance=k)
        forest_edges = 0
        if n_hot:
            forest = hot_bucket_forest(reps, hot, masks=masks, max_distance=k).persist(
                StorageLevel.MEMORY_AND_DISK
            )
            persisted.append(forest)
            forest_edges = forest.count()
            rep_pairs = rep_pairs.unionByName(forest).distinct()
        pairs = expand_pairs(rep_pairs, members, max_group=limit)
        n_pairs = int(grp["within"]) + cross_group_pair_count(rep_pairs, groups, max_group=limit)

    with _timed(timings, "clusters"):
        edges = rep_pairs.select(F.col(C.ID_A).alias(C.SRC), F.col(C.ID_B).alias(C.DST)).unionByName(
            star_edges(members)
        )
        comps = connected_components(edges, max_iterations=cfg.cluster.max_iterations)
        documents = assign_clusters(
            fps,
            comps.assignments,
            representative=cfg.cluster.representative,
            extra=cfg.input.passthrough_columns,
        ).persist(StorageLevel.MEMORY_AND_DISK)
        persisted.append(documents)
        agg = documents.agg(
            F.coalesce(F.sum(F.col(C.IS_DUPLICATE).cast("long")), F.lit(0)).alias("duplicates"),
            F.count_distinct(F.when(F.col(C.CLUSTER_SIZE) > 1, F.col(C.CLUSTER_ID))).alias("clusters"),
            F.coalesce(F.max(C.CLUSTER_SIZE), F.lit(0)).alias("largest"),
        ).first()
        assert agg is not None

    clusters = cluster_table(documents)
    deduplicated = drop_duplicates(raw, documents, id_column=cfg.input.id_column)
    duplicates = int(agg["duplicates"])
    stats = {
        "input_rows": input_rows,
        "fingerprinted": sum(status_counts[s] for s in FINGERPRINTED),
        "status": status_counts,
        "distinct_fingerprints": int(grp["distinct"]),
        "identical_fingerprint_groups": int(grp["groups"]),
        "largest_identical_group": int(grp["largest"]),
        "candidate_pairs_examined": int(cand["examined"]),
        "representative_pairs_accepted": int(cand["accepted"]),
        "pairs_accepted": n_pairs,
        "pairs_complete": int(grp["cut"]) == 0 and n_hot == 0,
        "hot_buckets": n_hot,
        "hot_bucket_forest_edges": forest_edges,
        "largest_buckets": largest_buckets,
        "groups_written_as_stars": int(grp["cut"]),
        "clusters": int(agg["clusters"]),
        "largest_cluster": int(agg["largest"]),
        "duplicates": duplicates,
        "dedup_rate": round(duplicates / input_rows, 6) if input_rows else 0.0,
        "components_iterations": comps.iterations,
        "bands": {
            "scheme": scheme.spec,
            "tables": scheme.n_tables(k),
            "max_distance": k,
            "exact": scheme.exact,
            "recall_at_k": round(scheme.recall(k), 6),
            **({"auto": design_report} if design_report else {}),
        },
    }
    return DedupResult(documents, pairs, clusters, deduplicated, stats, timings, persisted)


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("simhash_spark", "pyspark", "jieba", "pyarrow", "pandas", "numpy", "xxhash", "mmh3"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def summary(result: DedupResult, cfg: Config, *, source: str, spark: SparkSession) -> dict[str, Any]:
    return {
        "input": source,
        **result.stats,
        "timings_s": result.timings,
        "config": cfg.to_dict(),
        "spark": {"version": spark.version},
        "versions": _versions(),
    }


def run(
    spark: SparkSession,
    cfg: Config,
    *,
    output: str,
    input_path: str | None = None,
    input_table: str | None = None,
) -> dict[str, Any]:
    """Read, dedup, write every output into staging, publish atomically. Returns the summary."""
    source = f"table {input_table}" if input_table else str(input_path)
    publisher = Publisher(FileSystem(spark, output), output, overwrite=cfg.output.overwrite)
    publisher.prepare()
    result: DedupResult | None = None
    try:
        started = time.perf_counter()
        raw = read_input(spark, path=input_path, table=input_table)
        result = dedup(spark, raw, cfg, source=source)
        with _timed(result.timings, "write"):
            write_parquet(result.documents, publisher.path("documents"))
            write_parquet(result.pairs, publisher.path("pairs"))
            write_parquet(result.clusters, publisher.path("clusters"))
            if cfg.output.write_deduplicated:
                write_parquet(result.deduplicated, publisher.path("deduplicated"))
        result.timings["total"] = round(time.perf_counter() - started, 3)
        summ = summary(result, cfg, source=source, spark=spark)
        publisher.write_json("summary.json", summ)
        publisher.publish()
    except BaseException:
        publisher.abort()
        raise
    finally:
        if result is not None:
            result.unpersist()
    return summ
