"""Index maintenance: ``index stats`` (no Spark) and ``index compact`` (Spark: rewrites snapshots)."""

from __future__ import annotations

import dataclasses
import logging
from datetime import date, timedelta
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.core.index_model import Manifest
from simhash_spark.errors import FingerprintIndexError
from simhash_spark.incremental import ENTRY_COLUMNS, open_store, write_snapshot
from simhash_spark.index_store import ArrowFiles, IndexStore, describe

log = logging.getLogger(__name__)


def stats(path: str) -> dict[str, Any]:
    """Size, snapshots, runs and model of the index at ``path``, read without Spark."""
    files = ArrowFiles(path)
    store = IndexStore(files, files.root)
    manifest = store.manifest()
    if manifest is None:
        raise FingerprintIndexError(f"no index at {path} (no _manifest/ folder)")
    live = {s.id for s in manifest.snapshots}
    snap_bytes = sum(files.total_bytes(store.snapshot_dir(s)) for s in live)
    return {"path": path, **describe(manifest), "bytes": snap_bytes}


def compact(
    spark: SparkSession, path: str, *, keep_recent: int = 7, retention_days: int = 0, min_snapshots: int = 2
) -> dict[str, Any]:
    """Merge the snapshots of all but the last ``keep_recent`` run dates into one (reruns of those recent
    dates keep working: a run date inside a merged snapshot cannot be rerun), dropping entries whose run
    date is more than ``retention_days`` (0: none) before the latest run. Does nothing when fewer than
    ``min_snapshots`` snapshots would be merged and nothing is to be dropped."""
    store = open_store(spark, path)
    manifest = store.manifest()
    if manifest is None:
        raise FingerprintIndexError(f"no index at {path} (no _manifest/ folder)")
    dates = sorted({d for s in manifest.snapshots for d in s.runs})
    recent = set(dates[-keep_recent:]) if keep_recent else set()
    merge = [s for s in manifest.snapshots if not set(s.runs) & recent]
    keep = [s for s in manifest.snapshots if set(s.runs) & recent]
    cutoff = (
        (date.fromisoformat(dates[-1]) - timedelta(days=retention_days)).isoformat()
        if retention_days and dates
        else None
    )
    dropping = cutoff is not None and any(d < cutoff for s in merge for d in s.runs)
    report: dict[str, Any] = {
        "path": path,
        "snapshots_before": len(manifest.snapshots),
        "entries_before": manifest.entries,
        "retention_cutoff": cutoff,
    }
    if len(merge) < min_snapshots and not dropping:
        return {
            **report,
            "compacted": False,
            "reason": f"{len(merge)} snapshot(s) to merge, below {min_snapshots}",
        }
    dirs = store.partition_dirs([s.id for s in merge], "docs", None)
    runs = tuple(sorted(d for s in merge for d in s.runs if cutoff is None or d >= cutoff))
    snap_id = store.new_snapshot_id("compact")
    if dirs:
        entries = spark.read.parquet(*dirs).select(*ENTRY_COLUMNS)
        if cutoff is not None:
            entries = entries.where(F.col(C.RUN_DATE) >= cutoff)
        merged = write_snapshot(store, manifest.layout, entries, snap_id, runs)
    else:
        merged = write_snapshot(
            store, manifest.layout, spark.createDataFrame([], _schema(manifest)), snap_id, runs
        )
    merged_ids = {s.id for s in merge}
    new = dataclasses.replace(
        manifest,
        version=manifest.version + 1,
        snapshots=(merged, *keep) if merged.runs else tuple(keep),
        runs=tuple(
            dataclasses.replace(r, snapshot=merged.id if r.run_date in merged.runs else "")
            if r.snapshot in merged_ids
            else r
            for r in manifest.runs
        ),
    )
    store.commit(new)
    removed = store.remove_unlisted(new)
    log.info(
        "index %s: merged %d snapshots into %s, removed %d folders", path, len(merge), merged.id, len(removed)
    )
    return {
        **report,
        "compacted": True,
        "merged_snapshots": len(merge),
        "snapshot": merged.id,
        "snapshots_after": len(new.snapshots),
        "entries_after": new.entries,
        "dropped_entries": manifest.entries - new.entries,
        "version": new.version,
    }


def _schema(manifest: Manifest) -> str:
    return (
        f"{C.ID} {manifest.id_type or 'string'}, {C.FINGERPRINT} bigint, {C.N_CHARS} int, "
        f"{C.TITLE_FINGERPRINT} bigint, {C.TEXT} string, {C.TITLE} string, {C.RUN_DATE} string"
    )
