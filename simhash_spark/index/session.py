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

import numpy as np
import pandas as pd
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.config import Config, index_sketch_bands_problem
from simhash_spark.context import RunContext
from simhash_spark.core import index_keys as K
from simhash_spark.core.index_model import (
    ENTRIES,
    ENTRY_COLUMNS,
    KEYS,
    IndexLayout,
    Manifest,
    MonitorOptions,
    RunRecord,
    Snapshot,
    SnapshotContents,
    model_differences,
    model_signature,
    rate_check,
)
from simhash_spark.errors import ConfigError, FingerprintIndexError, MonitorAlert, essence
from simhash_spark.faults import maybe_pause
from simhash_spark.index import local_files
from simhash_spark.index.snapshots import (
    empty_entries,
    entry_schema,
    read_entries,
    read_key_rows,
    refingerprint,
    write_snapshot,
)
from simhash_spark.index.store import IndexStore, now, open_store, take_lease
from simhash_spark.lease import Lease
from simhash_spark.storage import ArrowFiles, FileSystem
from simhash_spark.transforms.driver_frames import driver_frame
from simhash_spark.transforms.fingerprint import is_fingerprinted
from simhash_spark.transforms.incremental import mark_already_indexed
from simhash_spark.transforms.index_rows import (
    PROBE_PREFIX,
    earliest_entries,
    id_matches,
    probe_rows,
    touched_fingerprints,
)

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
    return IndexLayout(sketch_bands=cfg.sketch_bands)


# a Spark lookup collects the batch's distinct probes (and the fingerprints they touched) to push their key
# ranges down to the Parquet reader when there are at most this many; a larger batch reads the tables whole
_PUSHED_VALUES = 200_000
# ranges per table a pushed filter holds: Spark tests every row read against each of them too
_PUSHED_RANGES = 64


ENTRY_GROUP_ROWS = 128  # entries per row group, about (their texts fill it)


def _push_limit(rows: int, group_rows: int) -> int:
    """How many probes spread over ``rows`` sorted rows still leave most row groups unread: above that a
    table is read whole, without a filter to test every row against."""
    return int(min(_PUSHED_VALUES, rows / group_rows / 2))


def _worth_pushing(probes: int, rows: int) -> bool:
    return probes <= _push_limit(rows, K.GROUP_ROWS)


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
    rows_per_document: int = 2048  # index.lookup_rows_per_document: what the segment probes may meet
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
        created = False
        if manifest is None:
            manifest = Manifest(version=0, model=_signature(cfg), layout=new_layout(cfg), id_type="")
            created = store.create(manifest)
            if created:
                log.info("index %s: new index (sketch bands: %s)", path, manifest.layout.sketch_bands)
            else:
                manifest = store.manifest()  # another writer created it first
                assert manifest is not None
        session = cls(
            spark,
            store,
            path,
            run_date,
            manifest,
            lease,
            manifest.version,
            created=created,
            rows_per_document=cfg.index.lookup_rows_per_document,
        )
        if created:
            return session
        problem = _model_problem(manifest, cfg, path)
        if problem and not rebuild:
            raise FingerprintIndexError(problem)
        # a rebuild also gives the index the sketch band tables the run uses ("auto": where they apply),
        # or takes them away (false), when its model is the run's already
        if problem or (rebuild and cfg.sketch_bands != manifest.layout.sketch_bands):
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

    def _entry_counts(self) -> tuple[int, int]:
        """(entries, key rows) of the snapshots this run reads."""
        snaps = self.snapshots
        return sum(s.docs_rows for s in snaps), sum(s.keys_rows for s in snaps)

    def segment_plan(self, k: int, documents: int) -> K.SegmentPlan:
        """How this run's lookup of ``documents`` reads the segment tables, from the size of what it reads
        (``core.index_keys.plan_segments``)."""
        return K.plan_segments(k, self._entry_counts()[0], documents, self.rows_per_document)

    # --- reading with Spark -------------------------------------------------------------------------

    def _key_dirs(self, tables: list[int], snapshots: list[Snapshot] | None = None) -> dict[int, list[str]]:
        snaps = self.snapshots if snapshots is None else snapshots
        return {t: self.store.partition_dirs(snaps, KEYS, {t}) for t in tables}

    def _entries_of(
        self, fingerprints: DataFrame, ctx: RunContext, snapshots: list[Snapshot] | None = None
    ) -> DataFrame | None:
        """The stored entries (``ENTRY_COLUMNS``, every run date) whose fingerprint is one of
        ``fingerprints`` (``fingerprint``), their fingerprint ranges pushed down when few."""
        snaps = self.snapshots if snapshots is None else snapshots
        limit = _push_limit(sum(s.docs_rows for s in snaps), ENTRY_GROUP_ROWS)
        ranges = _pushed(fingerprints, F.col(C.FINGERPRINT), F.col(C.FINGERPRINT), limit)
        read = read_entries(self.spark, self.store.partition_dirs(snaps, ENTRIES, None), ranges)
        if read is None:
            return None
        return read.join(fingerprints.select(C.FINGERPRINT), on=C.FINGERPRINT, how="left_semi")

    def _stored_ids(
        self, ids: DataFrame, ctx: RunContext, snapshots: list[Snapshot] | None = None
    ) -> DataFrame | None:
        """The entries (``id``, ``run_date``) of the given snapshots whose id is one of ``ids`` (``id``):
        the id table gives the fingerprints of the entries with one of their hashes, these the entries."""
        hashes = ids.select(F.xxhash64(C.ID).alias(C.INDEX_KEY))
        snaps = self.snapshots if snapshots is None else snapshots
        limit = _push_limit(sum(s.docs_rows for s in snaps), K.GROUP_ROWS)
        ranges = _pushed(hashes, F.col(C.INDEX_KEY), F.col(C.INDEX_KEY), limit)
        stored = read_key_rows(
            self.spark,
            self._key_dirs([K.ID_TABLE], snapshots),
            {K.ID_TABLE: ranges or []} if ranges is not None else None,
        )
        if stored is None:
            return None
        entries = self._entries_of(ctx.persist(id_matches(ids, stored)), ctx, snapshots)
        if entries is None:
            return None
        return entries.select(C.ID, C.RUN_DATE).join(ids.select(C.ID), on=C.ID, how="left_semi")

    def _known_ids(self, fps: DataFrame, ctx: RunContext) -> tuple[DataFrame, int]:
        """``fps`` with the ids the index holds already (from earlier dates) marked, and their number."""
        stored = self._stored_ids(fps.select(C.ID), ctx)
        if stored is None:
            return fps, 0
        known_ids = ctx.persist(self.visible(stored).select(C.ID).distinct())
        n_known = known_ids.count()
        return (mark_already_indexed(fps, known_ids) if n_known else fps), n_known

    def _touched(
        self, batch: DataFrame, k: int, plan: K.SegmentPlan, documents: int, ctx: RunContext
    ) -> tuple[DataFrame | None, int]:
        """The entries the batch touches (``ENTRY_COLUMNS``, each id once) and the key rows read."""
        probes = ctx.persist(probe_rows(batch, plan=plan, sketch_bands=self.layout.sketch_bands))
        sketch = [t for t in self.layout.tables() if t >= K.FIRST_SKETCH_TABLE]
        per_document = plan.probes_per_document() + len(sketch)
        # the probes' key ranges, pushed down to the reader, when few enough to collect
        masks = plan.probes_per_document() // plan.windows
        pushed = _worth_pushing(documents * masks, self._entry_counts()[0])
        ranges = (
            _probe_ranges(probes, plan) if pushed and documents * per_document <= _PUSHED_VALUES else None
        )
        stored = read_key_rows(self.spark, self._key_dirs([*plan.tables(), *sketch]), ranges)
        if stored is None:
            return None, 0
        stored = ctx.persist(stored)
        key_rows_read = stored.count()
        found = ctx.persist(touched_fingerprints(probes, stored, max_distance=k, plan=plan))
        read = self._entries_of(found, ctx)
        if read is None:
            return None, key_rows_read
        return earliest_entries(self.visible(read)), key_rows_read

    def lookup(
        self,
        fps: DataFrame,
        k: int,
        ctx: RunContext,
        held: HeldBatch | None = None,
        summaries: DataFrame | None = None,
        *,
        documents: int,
    ) -> Lookup:
        """Find the index entries the batch touches, reading of each key table only the row groups its
        probes can meet (``core.index_keys``). ``documents``: the batch's fingerprinted documents.

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
        plan = self.segment_plan(k, documents)
        if not self._entry_counts()[0]:  # nothing to find: a new index, or none of an earlier date
            stats = self._stats("none", {"key_rows_read": 0}, 0, 0, k, plan)
            local = LocalMatches([], pd.DataFrame(columns=list(ENTRY_COLUMNS))) if held is not None else None
            return Lookup(fps, empty_entries(self.spark, id_type), stats, local=local)
        if held is not None and self._driver_opens() and id_type in local_files.ID_TYPES:
            return self._lookup_on_driver(fps, held, k, plan, id_type)
        fps, n_known = self._known_ids(fps, ctx)
        batch = fps.where(is_fingerprinted(F.col(C.STATUS))).select(C.ID, C.FINGERPRINT)
        if self.layout.sketch_bands:
            if summaries is None:
                raise ValueError("an index with sketch tables is looked up with the batch's sketches")
            batch = batch.join(summaries.select(C.ID, C.CHECK_SUMMARY), on=C.ID, how="left")
        touched, key_rows_read = self._touched(batch, k, plan, documents, ctx)
        if touched is None:
            touched = empty_entries(self.spark, id_type)
        # a leaf of the linking's plans: it holds the plans of the keys and entries it was found with
        touched = ctx.materialize(touched)
        read = {"key_rows_read": key_rows_read}
        return Lookup(fps, touched, self._stats("spark", read, touched.count(), n_known, k, plan))

    def _driver_opens(self) -> bool:
        return isinstance(self.store.files, FileSystem) and self.store.files.local

    def _driver_store(self) -> tuple[ArrowFiles, IndexStore]:
        """The index's folders as pyarrow opens them on the driver (the same folders: ``_driver_opens``)."""
        files = ArrowFiles(self.path)
        return files, IndexStore(files, files.root)

    def _lookup_on_driver(
        self, fps: DataFrame, held: HeldBatch, k: int, plan: K.SegmentPlan, id_type: str
    ) -> Lookup:
        """``lookup`` of a batch the driver holds, read with pyarrow: the same marked ``fps``, touched
        entries and statistics, and the entries as rows on the driver."""
        files, store = self._driver_store()
        reads = local_files.Reads()
        with store.reading():
            known = local_files.known_ids(
                files, store, self.snapshots, self.run_date, held.ids, id_type, reads=reads
            )
            linked = held.keyed[~held.keyed[C.ID].isin(known)] if known else held.keyed
            fingerprints = linked[C.FINGERPRINT].to_numpy()
            sketches = _held_sketches(linked) if self.layout.sketch_bands else None
            found = local_files.touched_entries(
                files,
                store,
                self.snapshots,
                self.layout,
                self.run_date,
                fingerprints,
                k,
                plan,
                sketches,
                reads,
            )
        if known:
            fps = mark_already_indexed(
                fps, driver_frame(self.spark, pd.DataFrame({C.ID: known}), f"{C.ID} {id_type}")
            )
        touched = driver_frame(self.spark, found.entries, entry_schema(id_type))
        read = {"key_rows_read": reads.key_rows_read, "entry_rows_read": reads.entry_rows_read}
        stats = self._stats("driver", read, len(found.entries), len(known), k, plan)
        return Lookup(fps, touched, stats, local=LocalMatches(known, found.entries))

    def _stats(
        self, on: str, read: dict[str, int], n_touched: int, n_known: int, k: int, plan: K.SegmentPlan
    ) -> dict[str, Any]:
        entries, key_rows = self._entry_counts()
        return {
            "path": self.path,
            "run_date": self.run_date,
            "created": self.created,
            "rebuilt_from_version": self.rebuilt_from,
            "version_before": self.version_before,
            "format": self.base.format,
            "entries_before": entries,
            "snapshots_read": len(self.snapshots),
            "looked_up_on": on,
            "key_rows_total": key_rows,
            **read,
            "touched_entries": n_touched,
            "already_indexed": n_known,
            "key_tables": len(self.layout.tables()),
            "sketch_bands": self.layout.sketch_bands,
            **plan.describe(k),
        }

    # --- rebuilding ---------------------------------------------------------------------------------

    def rebuild(self, cfg: Config) -> None:
        """Refingerprint every stored text (of every date but this run's, which the run adds again) with
        this run's model, into new snapshots with new tables (``Manifest.rebuild_groups``: the last
        ``index.keep_recent`` dates keep a snapshot each and stay rerunnable); the result becomes ``base``
        and is committed with the run."""
        old = self.base
        layout = new_layout(cfg)
        dirs = self.store.partition_dirs(old.snapshots, ENTRIES, None)
        groups = old.rebuild_groups(self.run_date, cfg.index.keep_recent)
        fresh = None
        if dirs:
            stored = read_entries(self.spark, dirs, None)
            assert stored is not None
            stored = stored.where(F.col(C.RUN_DATE) != F.lit(self.run_date))
            fresh = refingerprint(stored, cfg).persist(StorageLevel.MEMORY_AND_DISK)
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
            "index %s: rebuilt %d entries into %d snapshot(s) with this run's model (sketch bands: %s)",
            self.path,
            sum(snap.docs_rows for snap in snapshots),
            len(snapshots),
            layout.sketch_bands,
        )

    def _rebuilt(self, layout: IndexLayout, fresh: DataFrame | None, runs: tuple[str, ...]) -> Snapshot:
        snap_id = self.store.new_snapshot("rebuild", self.lease.writer)
        if fresh is None:
            return self.store.seal(snap_id, runs, SnapshotContents(snap_id, {}))
        entries = fresh.where(F.col(C.RUN_DATE).isin(list(runs)))
        return write_snapshot(self.store, layout, entries, snap_id, runs)

    # --- monitoring and committing ------------------------------------------------------------------

    def monitor(self, rate: float, opts: MonitorOptions, *, input_rows: int) -> dict[str, Any]:
        """The dedup rate against the recent runs recorded in the index (earlier run dates with documents
        only: an empty day has no rate). An empty day is not checked."""
        history = [r.dedup_rate for r in self.base.runs if r.run_date < self.run_date and r.input_rows]
        if not input_rows:
            return {"dedup_rate": rate, "ok": True, "checked": False, "reason": "empty input"}
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
        self,
        entries: DataFrame,
        *,
        id_type: str,
        record: RunRecord,
        ctx: RunContext,
        rows: pd.DataFrame | None = None,
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
                        files,
                        store,
                        self.later_snapshots,
                        self.run_date,
                        rows[C.ID].tolist(),
                        id_type,
                        later=True,
                    )
                rows = rows[~rows[C.ID].isin(later)]
            folder_rows = local_files.write_snapshot_files(
                files, store.snapshot_dir(snap_id), self.layout, rows, id_type
            )
            snap = store.seal(snap_id, runs, store.written_contents(snap_id, folder_rows))
        else:
            snap = write_snapshot(
                self.store, self.layout, self._not_stored_later(entries, ctx), snap_id, runs
            )
        maybe_pause("index-snapshot-written")
        base = self.base if self.base.id_type else dataclasses.replace(self.base, id_type=id_type)
        manifest = base.with_run(snap, dataclasses.replace(record, snapshot=snap.id, appended=snap.docs_rows))
        self.store.commit(manifest, before_link=lambda: maybe_pause("index-committing"))
        self.committed = manifest
        maybe_pause("index-committed")
        return snap

    def _not_stored_later(self, entries: DataFrame, ctx: RunContext) -> DataFrame:
        """``entries`` less the ids that snapshots of later run dates hold."""
        if not self.later_snapshots:
            return entries
        stored = self._stored_ids(entries.select(C.ID), ctx, self.later_snapshots)
        if stored is None:
            return entries
        later = stored.where(F.col(C.RUN_DATE) > F.lit(self.run_date)).select(C.ID)
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


def _pushed(values: DataFrame, lo: Column, hi: Column, limit: int) -> list[tuple[int, int]] | None:
    """The distinct [lo, hi] ranges of ``values`` merged into at most ``_PUSHED_RANGES``, for a reader to
    skip the row groups outside them; None when there are more than ``limit`` (read everything)."""
    if limit < 1:
        return None
    rows = values.select(lo.alias("lo"), hi.alias("hi")).distinct().limit(limit + 1).collect()
    if len(rows) > limit:
        return None
    los = np.array([r["lo"] for r in rows], dtype=np.int64)
    his = np.array([r["hi"] for r in rows], dtype=np.int64)
    return K.merged_ranges(los, his, _PUSHED_RANGES)


def _probe_ranges(probes: DataFrame, plan: K.SegmentPlan) -> dict[int, list[tuple[int, int]]] | None:
    """Per key table, the key ranges the batch's probes can meet (``_pushed``), or None when too many."""
    rows = probes.select(C.KEY_TABLE, PROBE_PREFIX).distinct().limit(_PUSHED_VALUES + 1).collect()
    if len(rows) > _PUSHED_VALUES:
        return None
    by_table: dict[int, list[int]] = {}
    for r in rows:
        by_table.setdefault(int(r[C.KEY_TABLE]), []).append(int(r[PROBE_PREFIX]))
    out = {}
    for table, values in by_table.items():
        shift = K.SKETCH_PREFIX_SHIFT if table >= K.FIRST_SKETCH_TABLE else plan.shift
        queries = np.zeros(len(values), np.int64)
        lo, hi = K.Probes(table, np.array(values, dtype=np.int64), queries, shift).ranges()
        out[table] = K.merged_ranges(lo, hi, _PUSHED_RANGES)
    return out


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
