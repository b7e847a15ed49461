"""Snapshot files of the index read and written on the driver with pyarrow, for a batch the driver holds:
no Spark job.

The twins of ``IndexSession.lookup``'s Spark reads and of ``snapshots.write_snapshot`` (tested to agree in
tests/test_index_local_files.py), for a batch fingerprinted on the driver and an index on a path the
driver opens. The lookup reads the ``id`` column of the docs folders (which batch ids the index holds
already), in the key partitions the batch's keys select only the row groups whose key range can hold one
of them (files are sorted by key, row groups small), and the docs of the touched entries' buckets.
``check`` uses the same reads.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from simhash_spark import columns as C
from simhash_spark.core.index_model import (
    ENTRY_COLUMNS,
    IndexLayout,
    Snapshot,
    doc_bucket,
    sketch_key_part,
    stored_entry_columns,
)
from simhash_spark.core.simhash import popcount
from simhash_spark.core.sketch_bands import NO_KEY, stored_keys
from simhash_spark.index.store import IndexStore
from simhash_spark.storage import ArrowFiles

_READERS = 4  # threads reading key partitions
KEY_COLUMNS = [C.BAND, C.KEY, C.ID, C.FINGERPRINT, C.N_CHARS, C.RUN_DATE]
# key rows per row group: about the bytes of the row groups Spark writes (snapshots.KEY_ROW_GROUP_BYTES)
KEY_GROUP_ROWS = 8192
# the Arrow types of the Spark types ids may have (``core.spark_hash.KINDS``)
ID_TYPES = {
    "string": pa.string(),
    "bigint": pa.int64(),
    "int": pa.int32(),
    "smallint": pa.int16(),
    "tinyint": pa.int8(),
}
# what Spark writes: the columns of a keys/ and a docs/ file, and their types but the id's
_TYPES = {
    C.BAND: pa.int32(),
    C.KEY: pa.int64(),
    C.FINGERPRINT: pa.int64(),
    C.N_CHARS: pa.int32(),
    C.TITLE_FINGERPRINT: pa.int64(),
    C.TEXT: pa.string(),
    C.TITLE: pa.string(),
    C.RUN_DATE: pa.string(),
    C.CHECK_SUMMARY: pa.binary(),
}
QUERY = "_query"  # the position of the fingerprint a batch key belongs to


def batch_keys(
    fingerprints: np.ndarray, layout: IndexLayout, sketches: Sequence[bytes | None] | None = None
) -> pd.DataFrame:
    """One row per (fingerprint, table): ``part``, ``band``, ``band_key``, ``fingerprint`` and ``_query``
    (the fingerprint's position); with ``layout.sketch_bands``, also one per sketch band in which the
    ``sketches`` (one per fingerprint, None for none) have a key. The keys
    ``transforms.index_rows.index_keys`` gives the same rows."""
    fps = np.asarray(fingerprints, dtype=np.int64)
    unsigned = fps.view(np.uint64)
    frames = []
    for band, (mask, positions) in enumerate(zip(layout.masks(), layout.prefix_positions(), strict=True)):
        prefix = np.zeros(len(fps), dtype=np.int64)
        for pos in positions:
            prefix = (prefix << 1) | ((unsigned >> np.uint64(pos)) & np.uint64(1)).astype(np.int64)
        frames.append(_key_frame((band << layout.prefix_bits) | prefix, band, fps & np.int64(mask), fps))
    if layout.sketch_bands:
        if sketches is None or len(sketches) != len(fps):
            raise ValueError("an index with sketch tables needs one sketch (or None) per fingerprint")
        frames += _sketch_frames(fps, stored_keys(sketches).astype(np.int64), layout)
    if not frames:
        return pd.DataFrame(
            {c: pd.Series(dtype=np.int64) for c in (C.PART, C.BAND, C.KEY, C.FINGERPRINT, QUERY)}
        )
    return pd.concat(frames, ignore_index=True)


def _key_frame(
    parts: np.ndarray, band: int, keys: np.ndarray, fps: np.ndarray, queries: np.ndarray | None = None
) -> pd.DataFrame:
    return pd.DataFrame(
        {
            C.PART: parts,
            C.BAND: band,
            C.KEY: keys,
            C.FINGERPRINT: fps,
            QUERY: np.arange(len(fps)) if queries is None else queries,
        }
    )


def _sketch_frames(fps: np.ndarray, keys: np.ndarray, layout: IndexLayout) -> list[pd.DataFrame]:
    """``batch_keys``' rows of the sketch tables: ``keys`` (n, BANDS), ``NO_KEY`` where none."""
    frames = []
    for band in range(keys.shape[1]):
        table = layout.first_sketch_table + band
        has = np.flatnonzero(keys[:, band] != NO_KEY)
        key = keys[has, band]
        part = sketch_key_part(table, key, layout.prefix_bits)
        frames.append(_key_frame(np.asarray(part, dtype=np.int64), table, key, fps[has], has))
    return frames


def key_rows(
    files: ArrowFiles, folder: str, columns: Sequence[str], keys: set[int], before: str | None = None
) -> tuple[pa.Table | None, int]:
    """(the rows of one key partition whose ``band_key`` is in ``keys`` and, given ``before``, whose run
    date is earlier; the rows of the row groups read): only the row groups whose key range can hold one of
    ``keys`` are read, and only their keys unless one of them is there."""
    wanted = np.array(sorted(keys), dtype=np.int64)
    parts, rows_read = [], 0
    for name in files.list_names(folder):
        if not name.endswith(".parquet"):
            continue
        with files.fs.open_input_file(f"{folder}/{name}") as fh:
            # files of a few thousand rows: pyarrow's threads and read-ahead cost more than they save
            pf = pq.ParquetFile(fh, pre_buffer=False)
            groups = _groups_holding(pf.metadata, wanted)
            if not groups:
                continue
            # the keys first: most row groups hold none of a small batch's, and need no other column
            probe = pf.read_row_groups(groups, columns=[C.KEY], use_threads=False)[C.KEY]
            rows_read += len(probe)
            if not pc.any(pc.is_in(probe, pa.array(wanted, pa.int64()))).as_py():
                continue
            table = pf.read_row_groups(groups, columns=list(columns), use_threads=False)
        if before is not None:
            table = table.filter(pc.less(table[C.RUN_DATE], before))
        parts.append(table.filter(pc.is_in(table[C.KEY], pa.array(wanted, pa.int64()))))
    return (pa.concat_tables(parts, promote_options="permissive") if parts else None), rows_read


def _groups_holding(md: pq.FileMetaData, wanted: np.ndarray) -> list[int]:
    """Row groups whose ``band_key`` statistics (min..max) hold one of the sorted ``wanted`` keys."""
    col = md.schema.names.index(C.KEY)
    groups = []
    for i in range(md.num_row_groups):
        stats = md.row_group(i).column(col).statistics
        if stats is None or not stats.has_min_max:
            groups.append(i)
            continue
        first = int(np.searchsorted(wanted, stats.min, side="left"))
        if first < len(wanted) and wanted[first] <= stats.max:
            groups.append(i)
    return groups


def _empty(columns: Sequence[str]) -> pa.Table:
    return pa.table(
        {c: pa.array([], pa.string() if c in (C.ID, C.RUN_DATE) else pa.int64()) for c in columns}
    )


def _dataset(files: ArrowFiles, folders: list[str]) -> ds.Dataset | None:
    paths = [f"{d}/{n}" for d in folders for n in files.list_names(d) if n.endswith(".parquet")]
    return ds.dataset(paths, filesystem=files.fs, format="parquet") if paths else None


def _id_filter(
    dataset: ds.Dataset, ids: Sequence[Any], run_date: str | None, *, later: bool = False
) -> ds.Expression:
    """Entries of ``ids`` from run dates before ``run_date`` (``later``: after it)."""
    id_type = dataset.schema.field(C.ID).type
    expr = pc.field(C.ID).isin(pa.array(list(ids)).cast(id_type))
    if run_date is None:
        return expr
    return expr & (pc.field(C.RUN_DATE) > run_date if later else pc.field(C.RUN_DATE) < run_date)


def known_ids(
    files: ArrowFiles,
    store: IndexStore,
    snapshots: list[Snapshot],
    run_date: str,
    ids: Sequence[Any],
    *,
    later: bool = False,
) -> list[Any]:
    """The ``ids`` the index holds from run dates before ``run_date`` (``later``: after it), sorted."""
    dataset = _dataset(files, store.partition_dirs(snapshots, "docs", None))
    if dataset is None or not len(ids):
        return []
    found = dataset.to_table(columns=[C.ID], filter=_id_filter(dataset, ids, run_date, later=later))
    return sorted(set(found[C.ID].to_pylist()))


@dataclass(frozen=True)
class Touched:
    entries: pd.DataFrame  # ENTRY_COLUMNS of the touched entries, by id (nullable integers as objects)
    parts_needed: int  # key partitions the batch's keys fall in (per snapshot)
    key_folders_read: int
    key_rows_read: int  # rows of the row groups read (those whose key range holds a batch key)
    doc_folders_read: int


def touched_entries(
    files: ArrowFiles,
    store: IndexStore,
    snapshots: list[Snapshot],
    layout: IndexLayout,
    run_date: str,
    fingerprints: np.ndarray,
    k: int,
    sketches: Sequence[bytes | None] | None = None,
) -> Touched:
    """The entries of run dates before ``run_date`` within ``k`` bits of one of ``fingerprints`` on a
    shared table key, or sharing a sketch band key with one of ``sketches`` when the index has sketch
    tables (``transforms.index_rows.touched_entries``)."""
    keys = batch_keys(fingerprints, layout, sketches)
    needed = {int(p): set(map(int, g)) for p, g in keys.groupby(C.PART)[C.KEY]}
    key_dirs = store.partition_dirs(snapshots, "keys", set(needed))
    with ThreadPoolExecutor(_READERS) as pool:  # pyarrow reads without the GIL
        read = list(
            pool.map(
                lambda d: key_rows(files, d, KEY_COLUMNS, needed[int(d.rsplit("=", 1)[1])], run_date),
                key_dirs,
            )
        )
    tables = [t for t, _ in read if t is not None]
    rows = (
        pa.concat_tables(tables, promote_options="permissive") if tables else _empty(KEY_COLUMNS)
    ).to_pandas()
    probes = keys[[C.BAND, C.KEY, C.FINGERPRINT]].drop_duplicates().rename(columns={C.FINGERPRINT: "_b"})
    joined = rows.merge(probes, on=[C.BAND, C.KEY], how="inner")
    within = popcount(joined[C.FINGERPRINT].to_numpy(np.int64) ^ joined["_b"].to_numpy(np.int64)) <= k
    sketch_table = joined[C.BAND].to_numpy() >= layout.first_sketch_table
    near = joined[within | sketch_table] if layout.sketch_bands else joined[within]
    found = near.drop_duplicates(C.ID)
    buckets = {doc_bucket(int(fp), layout.doc_bits) for fp in found[C.FINGERPRINT]}
    doc_dirs = store.partition_dirs(snapshots, "docs", buckets) if buckets else []
    dataset = _dataset(files, doc_dirs)
    if dataset is None:
        entries = pd.DataFrame({c: pd.Series(dtype=object) for c in ENTRY_COLUMNS})
    else:
        table = dataset.to_table(
            columns=list(stored_entry_columns(layout)),
            filter=_id_filter(dataset, found[C.ID].tolist(), run_date),
        )
        # an id stored under two run dates (an index written before ids were kept once) is its earliest
        ordered = table.sort_by([(C.ID, "ascending"), (C.RUN_DATE, "ascending")])
        entries = ordered.to_pandas(integer_object_nulls=True).drop_duplicates(C.ID, ignore_index=True)
        if C.CHECK_SUMMARY not in entries.columns:
            entries[C.CHECK_SUMMARY] = None
    return Touched(entries, len(needed), len(key_dirs), sum(n for _, n in read), len(doc_dirs))


# --- writing ---------------------------------------------------------------------------------------------


def write_snapshot_files(
    files: ArrowFiles, folder: str, layout: IndexLayout, entries: pd.DataFrame, id_type: str
) -> dict[str, int]:
    """Write ``entries`` (``ENTRY_COLUMNS``) into the snapshot ``folder`` as ``write_snapshot`` does: one
    file per key partition sorted by (band, key) in small row groups, one file per docs bucket sorted by
    id. Returns the rows of each folder written (``keys/part=3`` → rows)."""
    written: dict[str, int] = {}
    if not len(entries):
        return written
    schema = {**_TYPES, C.ID: ID_TYPES[id_type]}
    fps = entries[C.FINGERPRINT].to_numpy(np.int64)
    sketches = _sketches(entries[C.CHECK_SUMMARY]) if layout.sketch_bands else None
    keys = batch_keys(fps, layout, sketches)
    rows = keys[QUERY].to_numpy()
    for column in (C.ID, C.N_CHARS, C.RUN_DATE):
        keys[column] = entries[column].to_numpy()[rows]
    for part, group in keys.groupby(C.PART, sort=True):
        ordered = group.sort_values([C.BAND, C.KEY], kind="stable")
        name = f"keys/{C.PART}={part}"
        _write(files, f"{folder}/{name}", ordered, KEY_COLUMNS, schema, KEY_GROUP_ROWS)
        written[name] = len(ordered)
    buckets = np.array([doc_bucket(int(fp), layout.doc_bits) for fp in fps], dtype=np.int64)
    for bucket in np.unique(buckets):
        ordered = entries[buckets == bucket].sort_values(C.ID, kind="stable")
        name = f"docs/{C.BUCKET}={int(bucket)}"
        _write(files, f"{folder}/{name}", ordered, stored_entry_columns(layout), schema, None)
        written[name] = len(ordered)
    return written


def _sketches(values: pd.Series) -> list[bytes | None]:
    return [bytes(v) if isinstance(v, bytes | bytearray) else None for v in values.tolist()]


def _write(
    files: ArrowFiles,
    folder: str,
    rows: pd.DataFrame,
    columns: Sequence[str],
    schema: dict[str, pa.DataType],
    group_rows: int | None,
) -> None:
    table = pa.table({c: pa.array(rows[c].tolist(), schema[c]) for c in columns})
    files.mkdirs(folder)
    with files.fs.open_output_stream(f"{folder}/part-00000-{uuid.uuid4()}.snappy.parquet") as out:
        pq.write_table(table, out, compression="snappy", row_group_size=group_rows)
