"""Incremental runs against a persistent fingerprint index (``--index PATH``).

A batch is linked together with the index entries it touches: the entries within k bits of one of its
documents on a shared table key (with an exact design: every entry that can pair with the batch). The
batch's own pairs, its pairs with those entries and the pairs among those entries go through the same
``link`` as a full run; pairs among index entries only are not written.

Consistency with a full run (tests/test_incremental.py): a batch document is flagged as a duplicate
(``is_duplicate``) iff a full run over the index's documents and the batch, all at once, places it in a
cluster with an indexed document or with a batch document earlier in the representative order. Proof
sketch: on any path from a batch document to an indexed one, the first indexed node is reached through
batch-batch and batch-index edges only, which the incremental run has; a cluster without indexed
documents consists of batch-batch edges only. ``matched_index_id`` is the earliest indexed document (run
date, then id) of the document's component among the batch and the touched entries; it can differ from
the earliest of the full cluster when that cluster joins two older clusters only through index-index
pairs the run does not look at (tested and documented in the README).
"""

from __future__ import annotations

import dataclasses
import logging
import re
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.config import Config
from simhash_spark.core.index_model import (
    IndexLayout,
    Manifest,
    RunRecord,
    Snapshot,
    choose_layout,
    model_differences,
    model_signature,
    rate_check,
)
from simhash_spark.errors import ConfigError, FingerprintIndexError, MonitorAlert
from simhash_spark.index_store import IndexStore, now
from simhash_spark.io import FileSystem
from simhash_spark.transforms.fingerprint import add_fingerprints, add_title_fingerprints, is_fingerprinted
from simhash_spark.transforms.index_rows import doc_bucket, index_keys, touched_entries

log = logging.getLogger(__name__)

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
KEY_ROW_GROUP_BYTES = 256 * 1024
ENTRY_COLUMNS = (C.ID, C.FINGERPRINT, C.N_CHARS, C.TITLE_FINGERPRINT, C.TEXT, C.TITLE, C.RUN_DATE)


def check_run_date(run_date: str) -> str:
    if not _DATE.match(run_date):
        raise ConfigError(f"--run-date {run_date!r}: expected YYYY-MM-DD")
    try:
        date.fromisoformat(run_date)
    except ValueError:
        raise ConfigError(f"--run-date {run_date!r}: not a calendar date") from None
    return run_date


@dataclass
class IndexRun:
    """An index opened for one run: the manifest the run builds on (possibly rebuilt in memory, committed
    only with the run) and the snapshots it reads."""

    store: IndexStore
    path: str
    run_date: str
    base: Manifest  # what the run reads and commits on top of
    version_before: int
    created: bool
    rebuilt_from: int | None = None
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def snapshots(self) -> list[str]:
        return [s.id for s in self.base.snapshots if self.run_date not in s.runs]

    @property
    def layout(self) -> IndexLayout:
        return self.base.layout


def _signature(cfg: Config) -> dict[str, Any]:
    return model_signature(cfg.model, cfg.title_model if cfg.input.title_column else None)


def new_layout(cfg: Config) -> IndexLayout:
    layout, _ = choose_layout(
        scheme=cfg.index.scheme if cfg.index.scheme != "auto" else cfg.bands.scheme,
        k=cfg.policy.largest,
        min_recall=cfg.bands.min_recall,
        expected_entries=cfg.index.expected_entries,
        partitions=cfg.index.partitions,
        doc_buckets=cfg.index.doc_buckets,
    )
    return layout


def open_store(spark: SparkSession, path: str) -> IndexStore:
    return IndexStore(FileSystem(spark, path), path)


def open_index(spark: SparkSession, cfg: Config, *, path: str, run_date: str, rebuild: bool) -> IndexRun:
    """Read the manifest and check this run may use the index: same fingerprint model (or ``rebuild``),
    k within what its tables serve, the run date not inside a compacted snapshot."""
    if cfg.input.title_column and cfg.title.rule == "or":
        raise ConfigError(
            'title.rule: "or" is not supported with --index (the index stores body keys only); use "and"'
        )
    store = open_store(spark, path)
    manifest = store.manifest()
    sig = _signature(cfg)
    k = cfg.policy.largest
    if manifest is None:
        base = Manifest(version=0, model=sig, layout=new_layout(cfg), id_type="")
        log.info("index %s: new index, tables %s", path, base.layout.scheme)
        return IndexRun(store, path, run_date, base, 0, created=True)
    diffs = model_differences(manifest.model, sig)
    run = IndexRun(store, path, run_date, manifest, manifest.version, created=False)
    if diffs or k > manifest.layout.max_distance:
        if not rebuild:
            if diffs:
                raise FingerprintIndexError(
                    f"index {path} was built with a different fingerprint model ("
                    + "; ".join(diffs[:6])
                    + (f"; {len(diffs) - 6} more" if len(diffs) > 6 else "")
                    + "). Use the index's settings, a new index, or --rebuild-index to refingerprint "
                    "its stored texts with this run's model"
                )
            raise FingerprintIndexError(
                f"index {path}: its tables find pairs up to {manifest.layout.max_distance} bits, this run "
                f"asks for {k} (match.max_distance / match.length_steps); --rebuild-index rebuilds the tables"
            )
        run.rebuilt_from = manifest.version
    own = manifest.snapshot_of(run_date)
    if own is not None and own.runs != (run_date,) and run.rebuilt_from is None:
        raise FingerprintIndexError(
            f"index {path}: run {run_date} was compacted into snapshot {own.id} with other runs "
            f"({len(own.runs)} run dates); rerunning it would add its documents twice"
        )
    return run


# --- reading -----------------------------------------------------------------------------------------


def _read(spark: SparkSession, dirs: list[str], columns: list[str]) -> DataFrame | None:
    return spark.read.parquet(*dirs).select(*columns) if dirs else None


def read_entries(spark: SparkSession, run: IndexRun, buckets: set[int] | None) -> DataFrame | None:
    """Stored documents (``ENTRY_COLUMNS``) of the given buckets (None: all), this run date's excluded."""
    dirs = run.store.partition_dirs(run.snapshots, "docs", buckets)
    df = _read(spark, dirs, list(ENTRY_COLUMNS))
    return df.where(F.col(C.RUN_DATE) != run.run_date) if df is not None else None


@dataclass
class Lookup:
    fps: DataFrame  # the batch, already indexed ids marked
    touched: DataFrame  # ENTRY_COLUMNS of the index entries the batch touches
    stats: dict[str, Any]


def lookup(
    spark: SparkSession, run: IndexRun, fps: DataFrame, cfg: Config, persisted: list[DataFrame]
) -> Lookup:
    """Find the index entries the batch touches, reading only the key partitions its keys fall in.

    In: ``fps`` as ``add_fingerprints`` (and ``add_title_fingerprints``) make them.
    """
    from simhash_spark.transforms.incremental import mark_already_indexed

    layout = run.layout
    id_type = dict(fps.dtypes)[C.ID]
    if run.base.id_type and run.base.id_type != id_type:
        raise FingerprintIndexError(
            f"index {run.path}: ids are {run.base.id_type}, this input's id column is {id_type}"
        )
    all_docs = run.store.partition_dirs(run.snapshots, "docs", None)
    known = _read(spark, all_docs, [C.ID, C.RUN_DATE])
    n_known = 0
    if known is not None:
        known_ids = (
            known.where(F.col(C.RUN_DATE) != run.run_date)
            .join(fps.select(C.ID), on=C.ID, how="left_semi")
            .select(C.ID)
            .persist(StorageLevel.MEMORY_AND_DISK)
        )
        persisted.append(known_ids)
        n_known = known_ids.count()
        if n_known:
            fps = mark_already_indexed(fps, known_ids)
    batch = fps.where(is_fingerprinted(F.col(C.STATUS))).select(
        C.ID, C.FINGERPRINT, C.N_CHARS, F.lit(run.run_date).alias(C.RUN_DATE)
    )
    bkeys = index_keys(batch, layout=layout).persist(StorageLevel.MEMORY_AND_DISK)
    persisted.append(bkeys)
    parts = {int(r[C.PART]) for r in bkeys.select(C.PART).distinct().collect()}
    key_dirs = run.store.partition_dirs(run.snapshots, "keys", parts)
    ikeys = _read(spark, key_dirs, [C.TABLE, C.KEY, C.ID, C.FINGERPRINT, C.N_CHARS, C.RUN_DATE])
    empty = spark.createDataFrame([], _entry_schema(fps))
    key_rows_read = 0
    n_doc_dirs = 0
    if ikeys is None:
        touched = empty
    else:
        ikeys = ikeys.persist(StorageLevel.MEMORY_AND_DISK)
        persisted.append(ikeys)
        key_rows_read = ikeys.count()
        found = touched_entries(bkeys, ikeys, max_distance=cfg.policy.largest).persist(
            StorageLevel.MEMORY_AND_DISK
        )
        persisted.append(found)
        buckets = {
            int(r["b"])
            for r in found.select(doc_bucket(F.col(C.FINGERPRINT), layout.doc_bits).alias("b"))
            .distinct()
            .collect()
        }
        doc_dirs = run.store.partition_dirs(run.snapshots, "docs", buckets) if buckets else []
        n_doc_dirs = len(doc_dirs)
        docs = _read(spark, doc_dirs, list(ENTRY_COLUMNS))
        if docs is not None:
            docs = docs.where(F.col(C.RUN_DATE) != run.run_date)
        touched = (
            docs.join(found.select(C.ID), on=C.ID, how="left_semi").select(*ENTRY_COLUMNS)
            if docs is not None and buckets
            else empty
        )
    touched = touched.persist(StorageLevel.MEMORY_AND_DISK)
    persisted.append(touched)
    n_touched = touched.count()
    stats = {
        "path": run.path,
        "run_date": run.run_date,
        "created": run.created,
        "rebuilt_from_version": run.rebuilt_from,
        "version_before": run.version_before,
        "entries_before": sum(s.docs_rows for s in run.base.snapshots if s.id in set(run.snapshots)),
        "snapshots_read": len(run.snapshots),
        "key_rows_total": sum(s.keys_rows for s in run.base.snapshots if s.id in set(run.snapshots)),
        "key_rows_read": key_rows_read,
        "key_partitions_per_snapshot": layout.n_parts(),
        "key_partitions_needed": len(parts),
        "key_partition_folders_read": len(key_dirs),
        # ids are checked against every entry (one column): a re-sent id must not be indexed twice
        "id_rows_scanned": sum(s.docs_rows for s in run.base.snapshots if s.id in set(run.snapshots)),
        "doc_bucket_folders_read": n_doc_dirs,
        "touched_entries": n_touched,
        "already_indexed": n_known,
        "tables": layout.scheme,
        "max_distance": layout.max_distance,
    }
    return Lookup(fps, touched, stats)


def _entry_schema(fps: DataFrame) -> str:
    id_type = dict(fps.dtypes)[C.ID]
    return (
        f"{C.ID} {id_type}, {C.FINGERPRINT} bigint, {C.N_CHARS} int, {C.TITLE_FINGERPRINT} bigint, "
        f"{C.TEXT} string, {C.TITLE} string, {C.RUN_DATE} string"
    )


# --- writing -----------------------------------------------------------------------------------------


def entries_of_batch(fps: DataFrame, docs: DataFrame, run_date: str) -> DataFrame:
    """The batch documents the index takes: fingerprinted, not already indexed. Out: ``ENTRY_COLUMNS``."""
    keep = fps.where(is_fingerprinted(F.col(C.STATUS))).select(
        C.ID,
        C.FINGERPRINT,
        C.N_CHARS,
        (
            F.col(C.TITLE_FINGERPRINT) if C.TITLE_FINGERPRINT in fps.columns else F.lit(None).cast("bigint")
        ).alias(C.TITLE_FINGERPRINT),
    )
    title = F.col(C.TITLE) if C.TITLE in docs.columns else F.lit(None).cast("string")
    texts = docs.select(C.ID, C.TEXT, title.alias(C.TITLE))
    return keep.join(texts, on=C.ID, how="inner").select(
        *ENTRY_COLUMNS[:-1], F.lit(run_date).alias(C.RUN_DATE)
    )


def write_snapshot(
    store: IndexStore, layout: IndexLayout, entries: DataFrame, snapshot: str, runs: tuple[str, ...]
) -> Snapshot:
    """Write ``entries`` (``ENTRY_COLUMNS``) as a snapshot folder; invisible until a manifest lists it."""
    entries = entries.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        n = entries.count()
        base = store.snapshot_dir(snapshot)
        if n:
            keys = index_keys(entries.select(C.ID, C.FINGERPRINT, C.N_CHARS, C.RUN_DATE), layout=layout)
            (
                keys.repartition(C.PART)
                .sortWithinPartitions(C.PART, C.TABLE, C.KEY)
                .write.mode("error")
                # small row groups over key-sorted files: a lookup of a few keys (``check``) reads the
                # row groups whose key range holds them, not the whole partition
                .option("parquet.block.size", KEY_ROW_GROUP_BYTES)
                .partitionBy(C.PART)
                .parquet(base + "/keys")
            )
            docs = entries.withColumn(C.BUCKET, doc_bucket(F.col(C.FINGERPRINT), layout.doc_bits))
            (
                docs.repartition(C.BUCKET)
                .sortWithinPartitions(C.BUCKET, C.ID)
                .write.mode("error")
                .partitionBy(C.BUCKET)
                .parquet(base + "/docs")
            )
    finally:
        entries.unpersist()
    return Snapshot(snapshot, runs, n * len(layout.masks()), n, now())


def rebuild(spark: SparkSession, cfg: Config, run: IndexRun) -> None:
    """Refingerprint every stored text with this run's model into one new snapshot (new tables too);
    the result becomes ``run.base`` and is committed with the run."""
    old = run.base
    entries = read_entries(spark, run, None)
    layout = new_layout(cfg)
    snap_id = run.store.new_snapshot_id("rebuild")
    runs = tuple(sorted({r.run_date for r in old.runs if r.run_date != run.run_date}))
    if entries is None:
        snapshot = Snapshot(snap_id, runs, 0, 0, now())
    else:
        extra = (C.RUN_DATE,) + ((C.TITLE,) if cfg.input.title_column else ())
        fps = add_fingerprints(
            entries.select(C.ID, C.TEXT, C.TITLE, C.RUN_DATE), model=cfg.model, extra=extra
        )
        if cfg.input.title_column:
            fps = add_title_fingerprints(fps, model=cfg.title_model)
        docs = entries.select(C.ID, C.TEXT, C.TITLE)
        fresh = fps.where(is_fingerprinted(F.col(C.STATUS))).select(
            C.ID,
            C.FINGERPRINT,
            C.N_CHARS,
            (F.col(C.TITLE_FINGERPRINT) if cfg.input.title_column else F.lit(None).cast("bigint")).alias(
                C.TITLE_FINGERPRINT
            ),
            C.RUN_DATE,
        )
        entries = fresh.join(docs, on=C.ID, how="inner").select(*ENTRY_COLUMNS)
        snapshot = write_snapshot(run.store, layout, entries, snap_id, runs)
    run.base = dataclasses.replace(
        old,
        model=_signature(cfg),
        layout=layout,
        snapshots=(snapshot,),
        runs=tuple(dataclasses.replace(r, snapshot=snap_id) for r in old.runs if r.run_date != run.run_date),
    )
    log.info(
        "index %s: rebuilt %d entries with this run's model (tables %s)",
        run.path,
        snapshot.docs_rows,
        layout.scheme,
    )


def monitor(run: IndexRun, rate: float, cfg: Config) -> dict[str, Any]:
    """The dedup rate against the recent runs recorded in the index (earlier run dates only)."""
    history = [
        r.dedup_rate for r in sorted(run.base.runs, key=lambda r: r.run_date) if r.run_date < run.run_date
    ]
    return rate_check(rate, history, cfg.monitor)


def raise_if_alarming(result: dict[str, Any], run: IndexRun) -> None:
    if result["ok"]:
        return
    raise MonitorAlert(
        f"dedup rate {result['dedup_rate']:.4f} on {run.run_date} is outside the monitoring band "
        f"{result['band'][0]:.4f}..{result['band'][1]:.4f} (median {result['recent_median']:.4f} of the last "
        f"{result['runs_considered']} runs in index {run.path}); nothing was published or added to the index. "
        "If the change is expected, rerun with --set monitor.max_factor=0"
    )


def commit(
    run: IndexRun, entries: DataFrame, *, id_type: str, summary: dict[str, Any]
) -> tuple[Snapshot, Manifest]:
    """Write the batch's snapshot (before publishing the run's output)."""
    snap = write_snapshot(
        run.store, run.layout, entries, run.store.new_snapshot_id(run.run_date), (run.run_date,)
    )
    record = RunRecord(
        run_date=run.run_date,
        snapshot=snap.id,
        input_rows=int(summary["input_rows"]),
        appended=snap.docs_rows,
        duplicates=int(summary["duplicates"]),
        dedup_rate=float(summary["dedup_rate"]),
        matched_index=int(summary["index"]["batch_documents_matched"]),
        finished=now(),
    )
    base = run.base if run.base.id_type else dataclasses.replace(run.base, id_type=id_type)
    return snap, base.with_run(snap, record)


def finish(run: IndexRun, manifest: Manifest) -> None:
    """Commit the manifest (the moment the run becomes part of the index), then tidy replaced folders."""
    run.store.commit(manifest)
    removed = run.store.remove_unlisted(manifest)
    if removed:
        log.info("index %s: removed %d unlisted snapshot folder(s)", run.path, len(removed))
