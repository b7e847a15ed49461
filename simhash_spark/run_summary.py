"""summary.json's statistics: the run's counts in their documented order, the library versions, the
driver's heap, and how many rows the report takes."""

from __future__ import annotations

import os
import platform
from importlib import metadata
from typing import Any

from pyspark.sql import SparkSession

from simhash_spark.assembly import RunTotals
from simhash_spark.index.session import Lookup


def run_statistics(
    status_counts: dict[str, int],
    link_stats: dict[str, Any],
    totals: RunTotals,
    looked: Lookup | None,
    *,
    fingerprinted_on: str,
) -> dict[str, Any]:
    """summary.json's statistics (its documented keys, in their order)."""
    stats = {
        "input_rows": totals.input_rows,
        "fingerprinted": totals.fingerprinted,
        "fingerprinted_on": fingerprinted_on,
        "status": status_counts,
        **{
            k: v
            for k, v in link_stats.items()
            if k not in ("components_iterations", "components_method", "bands")
        },
        "clusters": totals.clusters,
        "largest_cluster": totals.largest_cluster,
        "duplicates": totals.duplicates,
        "dedup_rate": totals.dedup_rate,
        "components_iterations": link_stats["components_iterations"],
        "components_method": link_stats["components_method"],
        "bands": link_stats["bands"],
    }
    if looked is not None:
        stats["index"] = {**looked.stats, "batch_documents_matched": totals.matched_index}
    return stats


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("simhash_spark", "pyspark", "jieba", "pyarrow", "pandas", "numpy", "xxhash", "mmh3"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


SKIPPED_LISTED = 100  # skipped files named in summary.json; the count is always exact


def driver_memory(spark: SparkSession) -> dict[str, str | None]:
    """The driver heap and who chose it: the job for a local run (simhash_spark.session), else the
    launcher (spark-submit, --spark-conf, Spark's default of 1g when unset)."""
    from simhash_spark.session import DRIVER_MEMORY, DRIVER_MEMORY_CHOSEN, SPARK_DEFAULT_DRIVER_MEMORY

    try:
        memory = spark.conf.get(DRIVER_MEMORY, None)
        chosen = spark.conf.get(DRIVER_MEMORY_CHOSEN, None)
    except Exception:  # Spark Connect servers may refuse to show static settings
        return {"driver_memory": None, "driver_memory_from": None}
    if memory is None:
        return {"driver_memory": SPARK_DEFAULT_DRIVER_MEMORY, "driver_memory_from": "Spark's default"}
    return {"driver_memory": memory, "driver_memory_from": chosen or "the launcher"}


def worker_numpy(spark: SparkSession) -> dict[str, str | None]:
    """The numpy code paths the Python workers were told to leave (``NPY_DISABLE_CPU_FEATURES``): set for
    them through ``spark.executorEnv`` (as a local run on AMD Zen 4 does, ``spark.local_numpy_avx512``), or
    in a local run inherited from this process; None: numpy's own choice."""
    from simhash_spark.session import NUMPY_FEATURES, WORKER_NUMPY_FEATURES

    try:
        features = spark.conf.get(WORKER_NUMPY_FEATURES, None)
        local = str(spark.conf.get("spark.master", "")).startswith("local")
    except Exception:  # Spark Connect servers may refuse to show static settings
        return {"worker_numpy_disabled_features": None}
    if features is None and local:
        features = os.environ.get(NUMPY_FEATURES)
    return {"worker_numpy_disabled_features": features or None}


def report_rows(stats: dict[str, Any]) -> int:
    """How many rows the report's data takes on the driver: the pairs, and the clustered documents (every
    duplicate, and at most one more per cluster). The driver takes them up to ``cluster.local_max_edges``,
    as many as the graph it clusters itself."""
    return int(stats["pairs_accepted"]) + int(stats["duplicates"]) + int(stats["clusters"])
