"""Is the index what its manifest promises? ``index verify`` (pyarrow, no Spark) checks every snapshot down
to the Parquet footers; ``index upgrade`` (Spark) rewrites an index of formats 1–3 (one key row per
document and band table) as format 4, after checking each snapshot against its manifest.

The readers of a run check only what they read (``IndexStore.partition_dirs``); ``verify`` checks
everything, and says what it found, so a damaged index can be found before a run needs it.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.core.index_model import (
    ENTRIES,
    ENTRY_COLUMNS,
    FORMAT,
    KEY_COLUMNS,
    LEGACY_DOCS,
    FolderContents,
    Manifest,
    Snapshot,
)
from simhash_spark.errors import FingerprintIndexError
from simhash_spark.index.snapshots import entry_schema, read_folders, write_snapshot
from simhash_spark.index.store import (
    SNAPSHOTS,
    IndexStore,
    folder_problems,
    open_store,
    take_lease,
)
from simhash_spark.storage import ArrowFiles, join

log = logging.getLogger(__name__)

_SHOW = 20  # problems listed; the count is exact


def _columns(folder: str) -> set[str]:
    return set(ENTRY_COLUMNS) if folder == ENTRIES else set(KEY_COLUMNS)


def verify(path: str) -> dict[str, Any]:
    """Every snapshot the current manifest lists: its contents record (present, checksum, rows), every
    folder's files and sizes, every file's Parquet footer (readable, the snapshot's columns, its rows, run
    dates within the snapshot's); ids stored under two run dates; folders no manifest lists. ``ok`` is
    False when any problem was found."""
    files = ArrowFiles(path)
    store = IndexStore(files, files.root)
    manifest = store.manifest()
    if manifest is None:
        raise FingerprintIndexError(f"no index at {path} (no _manifest/ folder)")
    problems: list[str] = []
    checked = {"snapshots": 0, "folders": 0, "files": 0, "entries": 0, "key_rows": 0}
    for snap in manifest.snapshots:
        found = store.read_contents(snap)
        if isinstance(found, str):
            problems.append(found)
            continue
        checked["snapshots"] += 1
        for name, folder in found.folders.items():
            where = f"{SNAPSHOTS}/{snap.id}/{name}"
            folder_path = join(store.snapshot_dir(snap.id), name)
            wrong = folder_problems(where, folder, files.file_sizes(folder_path))
            columns = _columns(name)
            wrong = wrong or _footer_problems(files, folder_path, where, folder, snap, columns)
            problems += wrong
            checked["folders"] += 1
            checked["files"] += len(folder.files)
            checked["entries" if name == ENTRIES else "key_rows"] += folder.rows
    listed = {s.id for s in manifest.snapshots}
    problems += [
        f"run {r.run_date} points at snapshot {r.snapshot}, which the manifest does not list"
        for r in manifest.runs
        if r.snapshot and r.snapshot not in listed
    ]
    twice = [] if problems else _ids_stored_twice(files, store, manifest)
    return {
        "path": path,
        "version": manifest.version,
        "ok": not problems,
        "problems": len(problems),
        "first_problems": problems[:_SHOW],
        "checked": checked,
        # readers link such an id once, as its earliest entry; indexes written since 0.2 hold none
        "ids_stored_twice": len(twice),
        "ids_stored_twice_e_g": twice[:5],
        # snapshot folders no manifest lists: a failed run's or a replaced snapshot's, removed by the
        # next writer's cleanup
        "unlisted_snapshot_folders": sorted(set(files.list_names(join(store.root, SNAPSHOTS))) - listed),
    }


def _footer_problems(
    files: ArrowFiles, folder_path: str, where: str, folder: FolderContents, snap: Snapshot, wanted: set[str]
) -> list[str]:
    """What the Parquet footers of one folder's files say that its record does not."""
    rows, problems = 0, []
    for name in sorted(folder.files):
        try:
            with files.fs.open_input_file(f"{folder_path}/{name}") as fh:
                md = pq.ParquetFile(fh).metadata
        except Exception as e:  # a truncated or foreign file: pyarrow names what it could not read
            problems.append(f"{where}/{name} is not a readable Parquet file ({type(e).__name__}: {e})")
            continue
        rows += md.num_rows
        columns = set(md.schema.names)
        if columns != wanted:
            problems.append(
                f"{where}/{name} has the columns {sorted(columns)}, not the index's {sorted(wanted)}"
            )
            continue
        if C.RUN_DATE in columns:
            problems += _date_problems(md, where, name, snap)
    if not problems and rows != folder.rows:
        problems.append(f"{where} holds {rows} rows where {folder.rows} were written")
    return problems


def _date_problems(md: pq.FileMetaData, where: str, name: str, snap: Snapshot) -> list[str]:
    col = md.schema.names.index(C.RUN_DATE)
    for i in range(md.num_row_groups):
        stats = md.row_group(i).column(col).statistics
        if (
            stats is not None
            and stats.has_min_max
            and (stats.min < min(snap.runs) or stats.max > max(snap.runs))
        ):
            return [
                f"{where}/{name} holds run dates {stats.min}..{stats.max}, not the snapshot's {', '.join(snap.runs)}"
            ]
    return []


def _ids_stored_twice(files: ArrowFiles, store: IndexStore, manifest: Manifest) -> list[Any]:
    paths = [
        f"{d}/{n}"
        for d in store.partition_dirs(manifest.snapshots, ENTRIES, None)
        for n in files.file_sizes(d)
        if not n.startswith((".", "_"))
    ]
    if not paths:
        return []
    ids = ds.dataset(paths, filesystem=files.fs, format="parquet").to_table(columns=[C.ID])[C.ID]
    counts = pc.value_counts(ids)
    twice = pc.filter(counts.field("values"), pc.greater(counts.field("counts"), 1))
    return sorted(twice.to_pylist())


# --- upgrade -----------------------------------------------------------------------------------------


def upgrade(spark: SparkSession, path: str, *, lease_timeout_s: float) -> dict[str, Any]:
    """Rewrite every snapshot of an index of formats 1–3 as format 4 (entries stored once, a few sorted key
    tables) and commit the manifest as format 4; the old snapshot folders are removed once it is. A
    snapshot that is not what its manifest promises (its contents record, files and sizes; for format 1,
    its entries' count) is refused (exit 2), naming it, and nothing is changed: an upgrade never blesses a
    damaged index. Takes the index's writer lease."""
    store = open_store(spark, path)
    if not store.versions():
        raise FingerprintIndexError(f"no index at {path} (no _manifest/ folder)")
    lease = take_lease(store, purpose="index upgrade", timeout_s=lease_timeout_s)
    try:
        manifest = store.read_version(store.versions()[-1], old_format=True)
        if manifest.format == FORMAT:
            return {"path": path, "upgraded": False, "reason": f"the index is format {FORMAT} already"}
        snapshots = tuple(
            _rewritten(spark, store, manifest, snap, lease.writer) for snap in manifest.snapshots
        )
        where = {old.id: new.id for old, new in zip(manifest.snapshots, snapshots, strict=True)}
        new = dataclasses.replace(
            manifest,
            version=manifest.version + 1,
            snapshots=snapshots,
            runs=tuple(
                dataclasses.replace(r, snapshot=where.get(r.snapshot, r.snapshot)) for r in manifest.runs
            ),
            format=FORMAT,
        )
        store.commit(new)
        removed = store.remove_unlisted(new, manifest, lease)
    finally:
        lease.release()
    log.info(
        "index %s: upgraded from format %d to %d (version %d)", path, manifest.format, FORMAT, new.version
    )
    return {
        "path": path,
        "upgraded": True,
        "from_format": manifest.format,
        "format": FORMAT,
        "version": new.version,
        "snapshots": len(snapshots),
        "entries": new.entries,
        "key_rows_before": manifest.key_rows,
        "key_rows": new.key_rows,
        "removed_snapshot_folders": len(removed),
    }


def _legacy_entries(spark: SparkSession, store: IndexStore, manifest: Manifest, snap: Snapshot) -> Any:
    """The entries (``ENTRY_COLUMNS``) of a snapshot of formats 1–3, checked against its manifest first."""
    if manifest.format != 1:
        found = store.read_contents(snap)
        if isinstance(found, str):
            raise store.damaged(found)
        for name, folder in found.select(LEGACY_DOCS, None):
            where = f"{SNAPSHOTS}/{snap.id}/{name}"
            wrong = folder_problems(
                where, folder, store.files.file_sizes(join(store.snapshot_dir(snap.id), name))
            )
            if wrong:
                raise store.damaged("; ".join(wrong[:3]))
    base = join(store.snapshot_dir(snap.id), LEGACY_DOCS)
    if not store.files.is_dir(base):
        return None
    rows = read_folders(spark, [base])
    sketch = F.col(C.CHECK_SUMMARY) if C.CHECK_SUMMARY in rows.columns else F.lit(None).cast("binary")
    return rows.select(*ENTRY_COLUMNS[:-1], sketch.alias(C.CHECK_SUMMARY))


def _rewritten(
    spark: SparkSession, store: IndexStore, manifest: Manifest, snap: Snapshot, writer: str
) -> Snapshot:
    """``snap`` (formats 1–3) written again as a format-4 snapshot of the same run dates."""
    entries = _legacy_entries(spark, store, manifest, snap)
    snap_id = store.new_snapshot("upgrade", writer)
    if entries is None:
        entries = spark.createDataFrame([], entry_schema(manifest.id_type or "string"))
    written = write_snapshot(store, manifest.layout, entries, snap_id, snap.runs)
    if written.docs_rows != snap.docs_rows:
        raise store.damaged(
            f"snapshot {snap.id} (run dates {', '.join(snap.runs)}) holds {written.docs_rows} entries where its "
            f"manifest records {snap.docs_rows}: a folder is missing or was changed; restore it from a copy, "
            "then upgrade"
        )
    return dataclasses.replace(written, created=snap.created)
