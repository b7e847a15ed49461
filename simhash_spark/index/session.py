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

A run of date D sees the entries of earlier dates only (``run_date < D``), so a rerun of D, in whatever
order dates are rerun, sees what D's first run saw and gives the same outputs.

:class:`IndexSession` owns the protocol of one run against the index: open (lease, checks), lookup,
commit (snapshot, then the manifest version: see ``simhash_spark.index.store``), finish or abort.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pandas as pd
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.config import Config, index_sketch_bands_problem
from simhash_spark.context import RunContext
from simhash_spark.core.index_model import (
    IndexLayout,
    Manifest,
    MonitorOptions,
    RunRecord,
    Snapshot,
    SnapshotContents,
    choose_layout,
    model_differences,
    model_signature,
    rate_check,
)
from simhash_spark.errors import ConfigError, FingerprintIndexError, MonitorAlert, essence
from simhash_spark.faults import maybe_pause
from simhash_spark.index import local_files
from simhash_spark.index.snapshots import (
    as_entries,
    empty_entries,
    entry_schema,
    read_folders,
    refingerprint,
    write_snapshot,
)
from simhash_spark.index.store import IndexStore, now, open_store, take_lease
from simhash_spark.lease import Lease
from simhash_spark.storage import ArrowFiles, FileSystem
from simhash_spark.transforms.driver_frames import driver_frame
from simhash_spark.transforms.fingerprint import is_fingerprinted
from simhash_spark.transforms.incremental import mark_already_indexed
from simhash_spark.transforms.index_rows import doc_bucket, earliest_entries, index_keys, touched_entries

log = logging.getLogger(__name__)

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def check_run_date(run_date: str, *, allow_future: bool = False, today: date | None = None) -> str:
    """A calendar date YYYY-MM-DD, at most one day after today (UTC) unless ``allow_future``: a typo'd
    year would otherwise enter the index and move every retention cutoff."""
    if not _DATE.match(run_date):
        raise ConfigError(f"--run-date {run_date!r}: expected YYYY-MM-DD")
    try:
        day = date.fromisoformat(run_date)
    except ValueError:
        raise ConfigError(f"--run-date {run_date!r}: not a calendar date") from None
    today = today or datetime.now(UTC).date()
    if day > today + timedelta(days=1) and not allow_future:
        raise ConfigError(
            f"--run-date {run_date}: more than one day after today ({today.isoformat()}); "
            "pass --allow-future-run-date if that is meant"
        )
    return run_date


def _signature(cfg: Config) -> dict[str, Any]:
    return model_signature(cfg.model, cfg.title_model if cfg.input.title_column else None)


def new_layout(cfg: Config) -> IndexLayout:
    chosen, _ = choose_layout(
        scheme=cfg.index.scheme if cfg.index.scheme != "auto" else cfg.bands.scheme,
        k=cfg.policy.largest,
        min_recall=cfg.bands.min_recall,
        expected_entries=cfg.index.expected_entries,
        partitions=cfg.index.partitions,
        doc_buckets=cfg.index.doc_buckets,
    )
    return dataclasses.replace(chosen, sketch_bands=cfg.sketch_bands)


def _model_problem(manifest: Manifest, cfg: Config, path: str) -> str | None:
    diffs = model_differences(manifest.model, _signature(cfg))
    if diffs:
        return (
            f"index {path} was built with a different fingerprint model ("
            + "; ".join(diffs[:6])
            + (f"; {len(diffs) - 6} more" if len(diffs) > 6 else "")
            + "). Use the index's settings, a new index, or --rebuild-index to refingerprint "
            "its stored texts with this run's model"
        )
    if cfg.policy.largest > manifest.layout.max_distance:
        return (
            f"index {path}: its tables find pairs up to {manifest.layout.max_distance} bits, this run "
            f"asks for {cfg.policy.largest} (match.max_distance / match.length_steps); --rebuild-index "
            "rebuilds the tables"
        )
    return index_sketch_bands_problem(cfg, manifest.layout.sketch_bands, f"index {path}")


@dataclass
class IndexSession:
    """One run's use of the index: the manifest it reads and commits on top of (possibly rebuilt in
    memory, committed only with the run), its run date, its lease."""

    spark: SparkSession
    store: IndexStore
    path: str
    run_date: str
    base: Manifest
    lease: Lease
    version_before: int
    created: bool
    rebuilt_from: int | None = None
    committed: Manifest | None = None
    stats: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def open(
        cls, spark: SparkSession, cfg: Config, *, path: str, run_date: str, rebuild: bool
    ) -> IndexSession:
        """Take the lease, read (or create) the manifest, and check this run may use the index: same
        fingerprint model (or ``rebuild``), k within what its tables serve, the run date not inside a
        compacted snapshot (unless rebuilding, which separates it out)."""
        if cfg.input.title_column and cfg.title.rule == "or":
            raise ConfigError(
                'title.rule: "or" is not supported with --index (the index stores body keys only); use "and"'
            )
        store = open_store(spark, path)
        store.manifest()  # refuses a folder that is not an index before writing anything into it
        lease = take_lease(
            store, purpose=f"dedup run {run_date}", timeout_s=cfg.writers.lease_timeout_seconds
        )
        try:
            # read again under the lease: a writer that finished meanwhile has committed a newer version
            return cls._open(spark, cfg, store, store.manifest(), lease, run_date, rebuild)
        except BaseException:
            lease.release()
            raise

    @classmethod
    def _open(
        cls,
        spark: SparkSession,
        cfg: Config,
        store: IndexStore,
        manifest: Manifest | None,
        lease: Lease,
        run_date: str,
        rebuild: bool,
    ) -> IndexSession:
        path = store.root
        if manifest is None:
            manifest = Manifest(version=0, model=_signature(cfg), layout=new_layout(cfg), id_type="")
            if store.create(manifest):
                log.info("index %s: new index, tables %s", path, manifest.layout.scheme)
                return cls(spark, store, path, run_date, manifest, lease, 0, created=True)
            manifest = store.manifest()  # another writer created it first
            assert manifest is not None
        session = cls(spark, store, path, run_date, manifest, lease, manifest.version, created=False)
        problem = _model_problem(manifest, cfg, path)
        if problem and not rebuild:
            raise FingerprintIndexError(problem)
        if problem:
            session.rebuilt_from = manifest.version
        own = manifest.snapshot_of(run_date)
        if own is not None and own.runs != (run_date,) and session.rebuilt_from is None:
            raise FingerprintIndexError(
                f"index {path}: run {run_date} was compacted into snapshot {own.id} with other runs "
                f"({len(own.runs)} run dates); rerunning it would add its documents twice"
            )
        return session

    @property
    def layout(self) -> IndexLayout:
        return self.base.layout

    def resolved(self, cfg: Config) -> Config:
        """``cfg`` with ``match.sketch_bands`` as this run uses it: the index's setting (checked at open:
        "auto" takes it), or the run's when it rebuilds the tables."""
        if self.rebuilt_from is not None:
            return cfg.with_sketch_bands(cfg.sketch_bands)
        if cfg.match.sketch_bands == "auto" and cfg.sketch_bands and not self.layout.sketch_bands:
            # the run would have used them on a new index: say why it does not, once, and how to change it
            log.info(
                'index %s has no sketch band tables: match.sketch_bands = "auto" runs without them, '
                "pairing within k only as the index's earlier runs did; --rebuild-index adds them",
                self.path,
            )
        return cfg.with_sketch_bands(self.layout.sketch_bands)

    @property
    def snapshots(self) -> list[Snapshot]:
        """The snapshots this run reads (entries of earlier run dates)."""
        return self.base.visible_snapshots(self.run_date)

    @property
    def later_snapshots(self) -> list[Snapshot]:
        """The snapshots holding entries of later run dates: a backfill, or a rerun of an earlier date."""
        return [s for s in self.base.snapshots if s.runs and max(s.runs) > self.run_date]

    def visible(self, df: DataFrame) -> DataFrame:
        """The rows of stored entries this run sees: earlier run dates only."""
        return df.where(F.col(C.RUN_DATE) < F.lit(self.run_date))

    def _read(self, dirs: list[str], columns: list[str]) -> DataFrame | None:
        return self.visible(read_folders(self.spark, dirs)).select(*columns) if dirs else None

    def _read_entries(self, dirs: list[str]) -> DataFrame | None:
        """The ``ENTRY_COLUMNS`` of the docs/ rows in ``dirs`` this run sees."""
        return as_entries(self.visible(read_folders(self.spark, dirs)), self.layout) if dirs else None

    def read_entries(self, buckets: set[int] | None) -> DataFrame | None:
        """Stored documents (``ENTRY_COLUMNS``) this run sees, of the given buckets (None: all)."""
        return self._read_entries(self.store.partition_dirs(self.snapshots, "docs", buckets))

    def _entry_counts(self) -> tuple[int, int]:
        """(entries, key rows) of the snapshots this run reads."""
        snaps = self.snapshots
        return sum(s.docs_rows for s in snaps), sum(s.keys_rows for s in snaps)

    # --- reading ------------------------------------------------------------------------------------

    def _known_ids(self, fps: DataFrame, ctx: RunContext) -> tuple[DataFrame, int]:
        """``fps`` with the ids the index holds already (from earlier dates) marked, and their number."""
        known = self._read(self.store.partition_dirs(self.snapshots, "docs", None), [C.ID])
        if known is None:
            return fps, 0
        known_ids = ctx.persist(known.join(fps.select(C.ID), on=C.ID, how="left_semi"))
        n_known = known_ids.count()
        return (mark_already_indexed(fps, known_ids) if n_known else fps), n_known

    def _touched(
        self, bkeys: DataFrame, key_dirs: list[str], k: int, ctx: RunContext
    ) -> tuple[DataFrame | None, int, int]:
        """The entries within ``k`` of a batch key: (entries or None, key rows read, doc folders read)."""
        ikeys = self._read(key_dirs, [C.BAND, C.KEY, C.ID, C.FINGERPRINT, C.N_CHARS, C.RUN_DATE])
        if ikeys is None:
            return None, 0, 0
        ikeys = ctx.persist(ikeys)
        key_rows_read = ikeys.count()
        sketch_from = self.layout.first_sketch_table if self.layout.sketch_bands else None
        found = ctx.persist(touched_entries(bkeys, ikeys, max_distance=k, first_sketch_table=sketch_from))
        bucket = doc_bucket(F.col(C.FINGERPRINT), self.layout.doc_bits).alias("b")
        buckets = {int(r["b"]) for r in found.select(bucket).distinct().collect()}
        doc_dirs = self.store.partition_dirs(self.snapshots, "docs", buckets) if buckets else []
        docs = self._read_entries(doc_dirs)
        if docs is None:
            return None, key_rows_read, 0
        touched = earliest_entries(docs.join(found.select(C.ID), on=C.ID, how="left_semi"))
        return touched, key_rows_read, len(doc_dirs)

    def lookup(
        self,
        fps: DataFrame,
        k: int,
        ctx: RunContext,
        held: HeldBatch | None = None,
        summaries: DataFrame | None = None,
    ) -> Lookup:
        """Find the index entries the batch touches, reading only the key partitions its keys fall in.

        In: ``fps`` as ``add_fingerprints`` (and ``add_title_fingerprints``) make them; ``held``: the same
        batch on the driver, when it was fingerprinted there. Such a batch is looked up on the driver
        (``index.local_files``, no Spark job) when the index is on a path the driver opens. With sketch
        tables, ``summaries`` (``id``, ``check_summary``) or ``held``'s ``check_summary`` are the batch's
        sketches."""
        id_type = dict(fps.dtypes)[C.ID]
        if self.base.id_type and self.base.id_type != id_type:
            raise FingerprintIndexError(
                f"index {self.path}: ids are {self.base.id_type}, this input's id column is {id_type}"
            )
        if held is not None and self._driver_opens() and id_type in local_files.ID_TYPES:
            return self._lookup_on_driver(fps, held, k, id_type)
        fps, n_known = self._known_ids(fps, ctx)
        batch = fps.where(is_fingerprinted(F.col(C.STATUS))).select(
            C.ID, C.FINGERPRINT, C.N_CHARS, F.lit(self.run_date).alias(C.RUN_DATE)
        )
        if self.layout.sketch_bands:
            if summaries is None:
                raise ValueError("an index with sketch tables is looked up with the batch's sketches")
            batch = batch.join(summaries.select(C.ID, C.CHECK_SUMMARY), on=C.ID, how="left")
        bkeys = ctx.persist(index_keys(batch, layout=self.layout))
        parts = {int(r[C.PART]) for r in bkeys.select(C.PART).distinct().collect()}
        key_dirs = self.store.partition_dirs(self.snapshots, "keys", parts)
        touched, key_rows_read, n_doc_dirs = self._touched(bkeys, key_dirs, k, ctx)
        if touched is None:
            touched = empty_entries(self.spark, id_type)
        # a leaf of the linking's plans: it holds the plans of the keys and entries it was found with
        touched = ctx.materialize(touched)
        read = {
            "key_rows_read": key_rows_read,
            "key_partitions_needed": len(parts),
            "key_partition_folders_read": len(key_dirs),
            "doc_bucket_folders_read": n_doc_dirs,
        }
        return Lookup(fps, touched, self._stats("spark", read, touched.count(), n_known))

    def _driver_opens(self) -> bool:
        return isinstance(self.store.files, FileSystem) and self.store.files.local

    def _driver_store(self) -> tuple[ArrowFiles, IndexStore]:
        """The index's folders as pyarrow opens them on the driver (the same folders: ``_driver_opens``)."""
        files = ArrowFiles(self.path)
        return files, IndexStore(files, files.root)

    def _lookup_on_driver(self, fps: DataFrame, held: HeldBatch, k: int, id_type: str) -> Lookup:
        """``lookup`` of a batch the driver holds, read with pyarrow: the same marked ``fps``, touched
        entries and statistics, and the entries as rows on the driver."""
        files, store = self._driver_store()
        with store.reading():
            known = local_files.known_ids(files, store, self.snapshots, self.run_date, held.ids)
            linked = held.keyed[~held.keyed[C.ID].isin(known)] if known else held.keyed
            fingerprints = linked[C.FINGERPRINT].to_numpy()
            sketches = _held_sketches(linked) if self.layout.sketch_bands else None
            found = local_files.touched_entries(
                files, store, self.snapshots, self.layout, self.run_date, fingerprints, k, sketches
            )
        if known:
            fps = mark_already_indexed(
                fps, driver_frame(self.spark, pd.DataFrame({C.ID: known}), f"{C.ID} {id_type}")
            )
        touched = driver_frame(self.spark, found.entries, entry_schema(id_type))
        read = {
            "key_rows_read": found.key_rows_read,
            "key_partitions_needed": found.parts_needed,
            "key_partition_folders_read": found.key_folders_read,
            "doc_bucket_folders_read": found.doc_folders_read,
        }
        stats = self._stats("driver", read, len(found.entries), len(known))
        return Lookup(fps, touched, stats, local=LocalMatches(known, found.entries))

    def _stats(self, on: str, read: dict[str, int], n_touched: int, n_known: int) -> dict[str, Any]:
        entries, key_rows = self._entry_counts()
        return {
            "path": self.path,
            "run_date": self.run_date,
            "created": self.created,
            "rebuilt_from_version": self.rebuilt_from,
            "version_before": self.version_before,
            "entries_before": entries,
            "snapshots_read": len(self.snapshots),
            "looked_up_on": on,
            "key_rows_total": key_rows,
            "key_partitions_per_snapshot": self.layout.n_parts(),
            **read,
            # ids are checked against every entry (one column): a re-sent id must not be indexed twice
            "id_rows_scanned": entries,
            "touched_entries": n_touched,
            "already_indexed": n_known,
            "tables": self.layout.scheme,
            "max_distance": self.layout.max_distance,
        }

    # --- rebuilding ---------------------------------------------------------------------------------

    def rebuild(self, cfg: Config) -> None:
        """Refingerprint every stored text (of every date but this run's, which the run adds again) with
        this run's model, into new snapshots with new tables (``Manifest.rebuild_groups``: the last
        ``index.keep_recent`` dates keep a snapshot each and stay rerunnable); the result becomes ``base``
        and is committed with the run."""
        old = self.base
        layout = new_layout(cfg)
        dirs = self.store.partition_dirs(old.snapshots, "docs", None)
        groups = old.rebuild_groups(self.run_date, cfg.index.keep_recent)
        fresh = None
        if dirs:
            stored = read_folders(self.spark, dirs).where(F.col(C.RUN_DATE) != F.lit(self.run_date))
            fresh = refingerprint(as_entries(stored, old.layout), cfg).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            snapshots = [self._rebuilt(layout, fresh, runs) for runs in groups]
        finally:
            if fresh is not None:
                fresh.unpersist()
        where = {d: snap.id for snap in snapshots for d in snap.runs}
        self.base = dataclasses.replace(
            old,
            model=_signature(cfg),
            layout=layout,
            snapshots=tuple(snapshots),
            runs=tuple(
                dataclasses.replace(r, snapshot=where.get(r.run_date, ""))
                for r in old.runs
                if r.run_date != self.run_date
            ),
        )
        log.info(
            "index %s: rebuilt %d entries into %d snapshot(s) with this run's model (tables %s)",
            self.path,
            sum(snap.docs_rows for snap in snapshots),
            len(snapshots),
            layout.scheme,
        )

    def _rebuilt(self, layout: IndexLayout, fresh: DataFrame | None, runs: tuple[str, ...]) -> Snapshot:
        snap_id = self.store.new_snapshot("rebuild", self.lease.writer)
        if fresh is None:
            return self.store.seal(snap_id, runs, SnapshotContents(snap_id, {}))
        entries = fresh.where(F.col(C.RUN_DATE).isin(list(runs)))
        return write_snapshot(self.store, layout, entries, snap_id, runs)

    # --- monitoring and committing ------------------------------------------------------------------

    def monitor(self, rate: float, opts: MonitorOptions) -> dict[str, Any]:
        """The dedup rate against the recent runs recorded in the index (earlier run dates only)."""
        history = [r.dedup_rate for r in self.base.runs if r.run_date < self.run_date]
        return rate_check(rate, history, opts)

    def raise_if_alarming(self, result: dict[str, Any]) -> None:
        if result["ok"]:
            return
        raise MonitorAlert(
            f"dedup rate {result['dedup_rate']:.4f} on {self.run_date} is outside the monitoring band "
            f"{result['band'][0]:.4f}..{result['band'][1]:.4f} (median {result['recent_median']:.4f} of the "
            f"last {result['runs_considered']} runs in index {self.path}); nothing was published or added to "
            "the index. If the change is expected, rerun with --set monitor.max_factor=0"
        )

    def commit(
        self, entries: DataFrame, *, id_type: str, record: RunRecord, rows: pd.DataFrame | None = None
    ) -> Snapshot:
        """Write the batch's snapshot, then commit the next manifest version (the moment the run becomes
        part of the index). Fails, adding nothing, if another writer committed first. ``rows``: the same
        entries on the driver, which writes them itself when it opens the index (no Spark job). An id a
        later run date stored already (a backfill) stays there, once: it is not stored again."""
        snap_id = self.store.new_snapshot(self.run_date, self.lease.writer)
        runs = (self.run_date,)
        if rows is not None and self._driver_opens() and id_type in local_files.ID_TYPES:
            files, store = self._driver_store()
            if self.later_snapshots:
                with store.reading():
                    later = local_files.known_ids(
                        files, store, self.later_snapshots, self.run_date, rows[C.ID].tolist(), later=True
                    )
                rows = rows[~rows[C.ID].isin(later)]
            folder_rows = local_files.write_snapshot_files(
                files, store.snapshot_dir(snap_id), self.layout, rows, id_type
            )
            snap = store.seal(snap_id, runs, store.written_contents(snap_id, folder_rows))
        else:
            snap = write_snapshot(self.store, self.layout, self._not_stored_later(entries), snap_id, runs)
        maybe_pause("index-snapshot-written")
        base = self.base if self.base.id_type else dataclasses.replace(self.base, id_type=id_type)
        manifest = base.with_run(snap, dataclasses.replace(record, snapshot=snap.id, appended=snap.docs_rows))
        self.store.commit(manifest, before_link=lambda: maybe_pause("index-committing"))
        self.committed = manifest
        maybe_pause("index-committed")
        return snap

    def _not_stored_later(self, entries: DataFrame) -> DataFrame:
        """``entries`` less the ids that snapshots of later run dates hold."""
        dirs = self.store.partition_dirs(self.later_snapshots, "docs", None)
        if not dirs:
            return entries
        later = read_folders(self.spark, dirs).where(F.col(C.RUN_DATE) > F.lit(self.run_date)).select(C.ID)
        return entries.join(later, on=C.ID, how="left_anti")

    def finish(self) -> None:
        """After the output is published: tidy folders the commit replaced (a failure here is only
        logged: the run's result stands), then release the lease."""
        try:
            if self.committed is not None:
                replaced = self.store.read_version(self.version_before) if self.version_before >= 0 else None
                removed = self.store.remove_unlisted(self.committed, replaced, self.lease)
                if removed:
                    log.info("index %s: removed %d unlisted snapshot folder(s)", self.path, len(removed))
                self.lease.remove_stale()  # leases of writers killed before they could release them
        except Exception as e:
            log.warning("index %s: could not remove replaced snapshot folders: %s", self.path, essence(e))
        finally:
            self.lease.release()

    def abort(self) -> None:
        """After a failure: release the lease; the snapshot folder a failed run wrote is listed by no
        manifest and is removed by a later run's cleanup."""
        self.lease.release()


def _held_sketches(keyed: pd.DataFrame) -> list[bytes | None]:
    if C.CHECK_SUMMARY not in keyed.columns:
        raise ValueError("an index with sketch tables is looked up with the batch's sketches")
    return [bytes(v) if isinstance(v, bytes | bytearray) else None for v in keyed[C.CHECK_SUMMARY].tolist()]


@dataclass(frozen=True)
class HeldBatch:
    """A batch fingerprinted on the driver, as the driver holds it."""

    ids: list[Any]  # every row's id
    keyed: pd.DataFrame  # its fingerprinted rows: id, fingerprint, status, ...


@dataclass(frozen=True)
class LocalMatches:
    """What a lookup on the driver found, as rows there."""

    known_ids: list[Any]  # batch ids the index holds already
    touched: pd.DataFrame  # ENTRY_COLUMNS of the touched entries


@dataclass
class Lookup:
    fps: DataFrame  # the batch, already indexed ids marked
    touched: DataFrame  # ENTRY_COLUMNS of the index entries the batch touches
    stats: dict[str, Any]
    local: LocalMatches | None = None  # the same, when looked up on the driver


def run_record(
    run_date: str, *, input_rows: int, duplicates: int, dedup_rate: float, matched_index: int
) -> RunRecord:
    """What the manifest records of a run (snapshot and appended are filled in at commit)."""
    return RunRecord(
        run_date=run_date,
        snapshot="",
        input_rows=input_rows,
        appended=0,
        duplicates=duplicates,
        dedup_rate=dedup_rate,
        matched_index=matched_index,
        finished=now(),
    )
