"""Index maintenance: ``index stats`` (no Spark) and ``index compact`` (Spark: rewrites snapshots)."""

from __future__ import annotations

import dataclasses
import logging
from datetime import UTC, date, datetime, timedelta
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.core.index_model import ENTRIES, CompactionPlan, Manifest, Snapshot, compaction_plan
from simhash_spark.errors import FingerprintIndexError
from simhash_spark.index.snapshots import empty_entries, read_entries, write_snapshot
from simhash_spark.index.store import IndexStore, describe, open_store, take_lease
from simhash_spark.lease import Lease
from simhash_spark.storage import ArrowFiles
from simhash_spark.transforms.index_rows import earliest_entries

log = logging.getLogger(__name__)


def stats(path: str) -> dict[str, Any]:
    """Size, snapshots, runs and model of the index at ``path``, read without Spark."""
    files = ArrowFiles(path)
    store = IndexStore(files, files.root)
    manifest = store.manifest()
    if manifest is None:
        raise FingerprintIndexError(f"no index at {path} (no _manifest/ folder)")
    # the bytes and files the snapshots' contents records list (a snapshot without its record is refused)
    contents = [store.contents(snap) for snap in manifest.snapshots]
    return {
        "path": path,
        **describe(manifest),
        "bytes": sum(c.bytes() for c in contents),
        "files": sum(c.files() for c in contents),
    }


def retention_cutoff(dates: list[str], retention_days: int, today: date) -> str | None:
    """Entries of run dates before the cutoff are dropped: ``retention_days`` before the latest run date,
    that date capped at tomorrow, so a run date typed years ahead cannot move the cutoff past the
    history."""
    if not retention_days or not dates:
        return None
    reference = min(date.fromisoformat(dates[-1]), today + timedelta(days=1))
    return (reference - timedelta(days=retention_days)).isoformat()


def _dropped_entries(manifest: Manifest, plan: CompactionPlan, cutoff: str | None) -> int:
    """Entries a compaction with ``cutoff`` drops, from the run records (exact unless ids were re-sent)."""
    if cutoff is None:
        return 0
    touched = {d for s in (*plan.merge, *plan.drop) for d in s.runs}
    return sum(r.appended for r in manifest.runs if r.run_date < cutoff and r.run_date in touched)


def compact(
    spark: SparkSession,
    path: str,
    *,
    keep_recent: int = 7,
    retention_days: int = 0,
    min_snapshots: int = 2,
    tier_ratio: float = 0.0,
    max_drop_fraction: float = 0.5,
    lease_timeout_s: float = 120.0,
    today: date | None = None,
) -> dict[str, Any]:
    """Merge snapshots of all but the last ``keep_recent`` run dates (reruns of those recent dates keep
    working: a run date inside a merged snapshot cannot be rerun) as ``compaction_plan`` chooses them
    (``tier_ratio`` 0: all into one; above 1: the smallest group of like-sized ones), dropping entries whose
    run date is before the retention cutoff (``retention_cutoff``; a snapshot with nothing newer is removed
    without a rewrite). Refuses (exit 2) to drop more than ``max_drop_fraction`` of the entries. Does
    nothing when fewer than ``min_snapshots`` snapshots would be merged and nothing is to be dropped. Takes
    the index's writer lease for its duration."""
    store = open_store(spark, path)
    if store.manifest() is None:
        raise FingerprintIndexError(f"no index at {path} (no _manifest/ folder)")
    lease = take_lease(store, purpose="index compact", timeout_s=lease_timeout_s)
    try:
        manifest = store.manifest()
        assert manifest is not None
        report = _compact(
            spark,
            store,
            manifest,
            lease,
            keep_recent,
            retention_days,
            min_snapshots,
            tier_ratio,
            max_drop_fraction,
            today or datetime.now(UTC).date(),
        )
    finally:
        lease.release()
    return report


def _compact(
    spark: SparkSession,
    store: IndexStore,
    manifest: Manifest,
    lease: Lease,
    keep_recent: int,
    retention_days: int,
    min_snapshots: int,
    tier_ratio: float,
    max_drop_fraction: float,
    today: date,
) -> dict[str, Any]:
    dates = sorted({d for s in manifest.snapshots for d in s.runs})
    cutoff = retention_cutoff(dates, retention_days, today)
    plan = compaction_plan(
        manifest.snapshots,
        keep_recent=keep_recent,
        min_snapshots=min_snapshots,
        tier_ratio=tier_ratio,
        cutoff=cutoff,
    )
    merge = list(plan.merge)
    dropping = bool(plan.drop) or (cutoff is not None and any(d < cutoff for s in merge for d in s.runs))
    report: dict[str, Any] = {
        "path": store.root,
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
    drop = _dropped_entries(manifest, plan, cutoff)
    if manifest.entries and drop > max_drop_fraction * manifest.entries:
        raise FingerprintIndexError(
            f"index {store.root}: retention cutoff {cutoff} would drop {drop} of {manifest.entries} entries "
            f"({drop / manifest.entries:.0%}), more than --max-drop-fraction {max_drop_fraction}; check the "
            "run dates the index holds (index stats), or pass a larger --max-drop-fraction"
        )
    merged = _merge(spark, store, manifest, merge, cutoff, lease.writer) if merge else None
    new = _compacted(manifest, merged, plan)
    store.commit(new)
    removed = store.remove_unlisted(new, manifest, lease)
    lease.remove_stale()
    log.info(
        "index %s: merged %d snapshots into %s, dropped %d, removed %d folders",
        store.root,
        len(merge),
        merged.id if merged else "none",
        len(plan.drop),
        len(removed),
    )
    return {
        **report,
        "compacted": True,
        "merged_snapshots": len(merge),
        "dropped_snapshots": len(plan.drop),
        "snapshot": merged.id if merged else None,
        "snapshots_after": len(new.snapshots),
        "entries_after": new.entries,
        "dropped_entries": manifest.entries - new.entries,
        "version": new.version,
    }


def _compacted(manifest: Manifest, merged: Snapshot | None, plan: CompactionPlan) -> Manifest:
    """The next version: ``plan.merge`` replaced by ``merged``, ``plan.drop`` gone; run records kept
    (monitoring history), pointing at the merged snapshot, or at none when retention dropped their
    entries."""
    gone = {s.id for s in (*plan.merge, *plan.drop)}
    held = {d: merged.id for d in merged.runs} if merged is not None else {}
    snapshots = ((merged,) if merged is not None and merged.runs else ()) + plan.keep
    return dataclasses.replace(
        manifest,
        version=manifest.version + 1,
        snapshots=snapshots,
        runs=tuple(
            dataclasses.replace(r, snapshot=held.get(r.run_date, "")) if r.snapshot in gone else r
            for r in manifest.runs
        ),
    )


def _merge(
    spark: SparkSession,
    store: IndexStore,
    manifest: Manifest,
    merge: list[Snapshot],
    cutoff: str | None,
    writer: str,
) -> Snapshot:
    """One new snapshot with the entries of ``merge`` from ``cutoff`` on."""
    dirs = store.partition_dirs(merge, ENTRIES, None)
    runs = tuple(sorted(d for s in merge for d in s.runs if cutoff is None or d >= cutoff))
    snap_id = store.new_snapshot("compact", writer)
    stored = read_entries(spark, dirs, None)
    if stored is None:
        return write_snapshot(store, manifest.layout, empty_entries(spark, manifest.id_type), snap_id, runs)
    # an id stored under two dates by an index written before 0.2 is kept once, as its earliest entry
    entries = earliest_entries(stored)
    if cutoff is not None:
        entries = entries.where(F.col(C.RUN_DATE) >= cutoff)
    return write_snapshot(store, manifest.layout, entries, snap_id, runs)
