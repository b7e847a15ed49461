"""Is the index what its manifest promises? ``index verify`` (pyarrow, no Spark) checks every snapshot down
to the Parquet footers; ``index upgrade`` (Spark) gives an index of format 1 (simhash_spark 0.1) the
contents records that readers of format 2 verify, after checking each snapshot's rows against its manifest.

The readers of a run check only what they read (``IndexStore.partition_dirs``); ``verify`` checks
everything, and says what it found, so a damaged index can be found before a run needs it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from simhash_spark import columns as C
from simhash_spark.core.index_model import (
    FolderContents,
    IndexLayout,
    Manifest,
    Snapshot,
    SnapshotContents,
    stored_entry_columns,
)
from simhash_spark.errors import FingerprintIndexError
from simhash_spark.index.local_files import KEY_COLUMNS
from simhash_spark.index.snapshots import read_folders
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


def _columns(kind: str, layout: IndexLayout) -> set[str]:
    return set(KEY_COLUMNS) if kind == "keys" else set(stored_entry_columns(layout))


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
            columns = _columns(name.split("/")[0], manifest.layout)
            wrong = wrong or _footer_problems(files, folder_path, where, folder, snap, columns)
            problems += wrong
            checked["folders"] += 1
            checked["files"] += len(folder.files)
            checked["entries" if name.startswith("docs/") else "key_rows"] += folder.rows
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
        for d in store.partition_dirs(manifest.snapshots, "docs", None)
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
    """Give each snapshot of a format-1 index its contents record and commit the manifest as format 2. A
    snapshot whose rows differ from what the manifest recorded is refused (exit 2), naming it: an upgrade
    never blesses a damaged index. Takes the index's writer lease."""
    store = open_store(spark, path)
    versions = store.versions()
    if not versions:
        raise FingerprintIndexError(f"no index at {path} (no _manifest/ folder)")
    lease = take_lease(store, purpose="index upgrade", timeout_s=lease_timeout_s)
    try:
        manifest = store.read_version(store.versions()[-1], old_format=True)
        if manifest.format != 1:
            return {
                "path": path,
                "upgraded": False,
                "reason": f"the index is format {manifest.format} already",
            }
        counted = _folder_rows(spark, store)
        snapshots = tuple(_sealed(store, snap, counted) for snap in manifest.snapshots)
        new = dataclasses.replace(
            manifest, version=manifest.version + 1, snapshots=snapshots, format=manifest.layout.format
        )
        store.commit(new)
    finally:
        lease.release()
    log.info("index %s: upgraded to format %d (version %d)", path, new.format, new.version)
    return {"path": path, "upgraded": True, "version": new.version, "snapshots": len(snapshots)}


def _folder_rows(spark: SparkSession, store: IndexStore) -> Callable[[str], dict[str, int]]:
    """snapshot id → rows per folder (``keys/part=3``) of its data, counted by Spark."""

    def rows(snapshot: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for kind, column in (("keys", C.PART), ("docs", C.BUCKET)):
            base = join(store.snapshot_dir(snapshot), kind)
            if store.files.is_dir(base):
                counts = read_folders(spark, [base]).groupBy(column).count().collect()
                out.update({f"{kind}/{column}={r[0]}": int(r[1]) for r in counts})
        return out

    return rows


def _sealed(store: IndexStore, snap: Snapshot, counted: Callable[[str], dict[str, int]]) -> Snapshot:
    contents: SnapshotContents = store.written_contents(snap.id, counted(snap.id))
    held = (contents.rows("docs"), contents.rows("keys"))
    if held != (snap.docs_rows, snap.keys_rows):
        raise store.damaged(
            f"snapshot {snap.id} (run dates {', '.join(snap.runs)}) holds {held[0]} entries and {held[1]} "
            f"key rows where its manifest records {snap.docs_rows} and {snap.keys_rows}: a folder is "
            "missing or was changed; restore it from a copy, then upgrade"
        )
    sealed = store.seal(snap.id, snap.runs, contents)
    return dataclasses.replace(snap, contents_sha256=sealed.contents_sha256)
