"""Snapshot files of the index read and written on the driver with pyarrow, for a batch the driver holds
and for ``check``: no Spark job.

The twins of the Spark reads and writes (``index.snapshots``, ``transforms.index_rows``; tested to agree
in tests/test_index_local_files.py). A lookup reads, of each key table, only the row groups whose key
range holds one of the batch's probes (``core.index_keys``), and of the entries only the row groups whose
fingerprint range holds a fingerprint the probes touched: what the batch's documents can reach, not the
history.
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
import pyarrow.parquet as pq

from simhash_spark import columns as C
from simhash_spark.core import index_keys as K
from simhash_spark.core.index_model import ENTRIES, ENTRY_COLUMNS, KEY_COLUMNS, KEYS, IndexLayout, Snapshot
from simhash_spark.core.sketch_bands import stored_keys
from simhash_spark.core.spark_hash import KINDS, xxhash64
from simhash_spark.index.store import IndexStore
from simhash_spark.storage import ArrowFiles

_READERS = 4  # threads reading key tables
# key rows per row group: a probe reads the row group its key range falls in
KEY_GROUP_ROWS = 8192
# bytes of text per entries row group: a touched entry reads its row group's texts
ENTRY_GROUP_BYTES = 128 * 1024
CODEC = "zstd"
# the Arrow types of the Spark types ids may have (``core.spark_hash.KINDS``)
ID_TYPES = {
    "string": pa.string(),
    "bigint": pa.int64(),
    "int": pa.int32(),
    "smallint": pa.int16(),
    "tinyint": pa.int8(),
}
# what Spark writes: the columns of a keys/ and an entries/ file, and their types but the id's
_TYPES = {
    C.INDEX_KEY: pa.int64(),
    C.FINGERPRINT: pa.int64(),
    C.N_CHARS: pa.int32(),
    C.TITLE_FINGERPRINT: pa.int64(),
    C.TEXT: pa.string(),
    C.TITLE: pa.string(),
    C.RUN_DATE: pa.string(),
    C.CHECK_SUMMARY: pa.binary(),
}


def id_hashes(ids: Sequence[Any], id_type: str) -> np.ndarray:
    """Spark's ``xxhash64`` of each id (the id table's keys)."""
    kind = KINDS[id_type]
    return np.array([xxhash64((i,), kind) for i in ids], dtype=np.int64)


def band_keys(sketches: Sequence[bytes | None]) -> np.ndarray:
    return stored_keys(list(sketches))


def key_folder(table: int) -> str:
    return f"{KEYS}/{C.KEY_TABLE}={table}"


def table_of(folder: str) -> int:
    return int(folder.rsplit("=", 1)[1])


# --- writing ---------------------------------------------------------------------------------------------


def write_snapshot_files(
    files: ArrowFiles, folder: str, layout: IndexLayout, entries: pd.DataFrame, id_type: str
) -> dict[str, int]:
    """Write ``entries`` (``ENTRY_COLUMNS``) into the snapshot ``folder`` as ``snapshots.write_snapshot``
    does: one file per key table sorted by key, one entries file sorted by fingerprint. Returns the rows of
    each folder written (``keys/key_table=3`` → rows)."""
    written: dict[str, int] = {}
    if not len(entries):
        return written
    schema = {**_TYPES, C.ID: ID_TYPES[id_type]}
    fps = entries[C.FINGERPRINT].to_numpy(np.int64)
    sketched = band_keys(entries[C.CHECK_SUMMARY].tolist()) if layout.sketch_bands else None
    for rows in K.key_rows(id_hashes(entries[C.ID].tolist(), id_type), fps, sketched):
        if len(rows):
            frame = pd.DataFrame({C.INDEX_KEY: rows.key, C.FINGERPRINT: rows.fingerprint})
            _write(files, f"{folder}/{key_folder(rows.table)}", frame, KEY_COLUMNS, schema, KEY_GROUP_ROWS)
            written[key_folder(rows.table)] = len(rows)
    ordered = entries.assign(_fp=fps).sort_values([C.FINGERPRINT, C.ID], kind="stable")
    text_bytes = max(1.0, float(ordered[C.TEXT].str.len().mean() or 1.0) * 3)
    group = max(16, int(ENTRY_GROUP_BYTES / text_bytes))
    _write(files, f"{folder}/{ENTRIES}", ordered, ENTRY_COLUMNS, schema, group)
    written[ENTRIES] = len(ordered)
    return written


def _write(
    files: ArrowFiles,
    folder: str,
    rows: pd.DataFrame,
    columns: Sequence[str],
    schema: dict[str, pa.DataType],
    group_rows: int,
) -> None:
    table = pa.table({c: pa.array(rows[c].tolist(), schema[c]) for c in columns})
    files.mkdirs(folder)
    with files.fs.open_output_stream(f"{folder}/part-00000-{uuid.uuid4()}.{CODEC}.parquet") as out:
        pq.write_table(table, out, compression=CODEC, row_group_size=group_rows)


# --- reading ---------------------------------------------------------------------------------------------


def _parquet_files(files: ArrowFiles, folder: str) -> list[str]:
    return [f"{folder}/{n}" for n in files.list_names(folder) if n.endswith(".parquet")]


def _read_ranges(
    files: ArrowFiles, path: str, column: str, lo: np.ndarray, hi: np.ndarray, columns: Sequence[str]
) -> tuple[pa.Table | None, int]:
    """(the rows of the row groups of one file whose ``column`` range holds a value of some [lo, hi]; the
    rows read). A file that cannot be read is named (``IndexStore.reading`` reports it as damage)."""
    try:
        return _read_groups(files, path, column, lo, hi, columns)
    except (pa.ArrowException, OSError) as e:
        raise OSError(f"{path}: {e}") from e


def _read_groups(
    files: ArrowFiles, path: str, column: str, lo: np.ndarray, hi: np.ndarray, columns: Sequence[str]
) -> tuple[pa.Table | None, int]:
    with files.fs.open_input_file(path) as fh:
        # small files of small row groups: pyarrow's threads and read-ahead cost more than they save
        pf = pq.ParquetFile(fh, pre_buffer=False)
        md = pf.metadata
        col = md.schema.names.index(column)
        lows, highs = np.empty(md.num_row_groups, np.int64), np.empty(md.num_row_groups, np.int64)
        for i in range(md.num_row_groups):
            stats = md.row_group(i).column(col).statistics
            has = stats is not None and stats.has_min_max
            lows[i] = stats.min if has else np.iinfo(np.int64).min
            highs[i] = stats.max if has else np.iinfo(np.int64).max
        groups = np.flatnonzero(K.groups_holding(lows, highs, lo, hi)).tolist()
        if not groups:
            return None, 0
        table = pf.read_row_groups(groups, columns=list(columns), use_threads=False)
    return table, table.num_rows


def read_key_rows(files: ArrowFiles, folders: list[str], probes: K.Probes) -> tuple[K.KeyRows, int]:
    """The rows of one key table (its folders in several snapshots) in the row groups that can hold a probe,
    sorted by key; and the rows read."""
    lo, hi = probes.ranges()
    keys, fps, read = [], [], 0
    for folder in folders:
        for path in _parquet_files(files, folder):
            table, n = _read_ranges(files, path, C.INDEX_KEY, lo, hi, KEY_COLUMNS)
            read += n
            if table is not None:
                keys.append(table[C.INDEX_KEY].to_numpy())
                fps.append(table[C.FINGERPRINT].to_numpy())
    if not keys:
        empty = np.zeros(0, dtype=np.int64)
        return K.KeyRows(probes.table, empty, empty), read
    key, fp = np.concatenate(keys), np.concatenate(fps)
    order = np.lexsort((fp, key))
    return K.KeyRows(probes.table, key[order], fp[order]), read


def read_entries(
    files: ArrowFiles,
    folders: list[str],
    fingerprints: np.ndarray,
    columns: Sequence[str],
    run_date: str | None,
    *,
    later: bool = False,
) -> tuple[pa.Table, int]:
    """The entries (``columns``) with one of ``fingerprints``, of run dates before ``run_date`` (``later``:
    after it; None: any), read from the row groups whose fingerprint range holds one; and the rows read."""
    wanted = np.unique(np.asarray(fingerprints, dtype=np.int64))
    parts, read = [], 0
    for folder in folders:
        for path in _parquet_files(files, folder) if len(wanted) else []:
            table, n = _read_ranges(files, path, C.FINGERPRINT, wanted, wanted, columns)
            read += n
            if table is None:
                continue
            keep = pc.is_in(table[C.FINGERPRINT], pa.array(wanted, pa.int64()))
            if run_date is not None:
                date = pc.greater if later else pc.less
                keep = pc.and_(keep, date(table[C.RUN_DATE], run_date))
            parts.append(table.filter(keep))
    if not parts:
        return pa.table({c: pa.array([], _TYPES.get(c, pa.string())) for c in columns}), read
    return pa.concat_tables(parts, promote_options="permissive"), read


@dataclass
class Reads:
    """What a lookup read: the key rows and the entry rows of the row groups it read."""

    key_rows_read: int = 0
    entry_rows_read: int = 0


def _folders(store: IndexStore, snapshots: list[Snapshot], table: int) -> list[str]:
    return store.partition_dirs(snapshots, KEYS, {table})


def key_lookup(
    files: ArrowFiles, store: IndexStore, snapshots: list[Snapshot], probes: list[K.Probes], reads: Reads
) -> list[K.KeyRows]:
    """Each table's rows that can meet its probes, read by up to ``_READERS`` threads (pyarrow reads
    without the GIL)."""
    wanted = [p for p in probes if len(p.value)]

    def one(p: K.Probes) -> tuple[K.KeyRows, int]:
        return read_key_rows(files, _folders(store, snapshots, p.table), p)

    with ThreadPoolExecutor(_READERS) as pool:
        found = list(pool.map(one, wanted))
    reads.key_rows_read += sum(n for _, n in found)
    return [rows for rows, _ in found]


def known_ids(
    files: ArrowFiles,
    store: IndexStore,
    snapshots: list[Snapshot],
    run_date: str,
    ids: Sequence[Any],
    id_type: str,
    *,
    later: bool = False,
    reads: Reads | None = None,
) -> list[Any]:
    """The ``ids`` the index holds from run dates before ``run_date`` (``later``: after it), sorted: the id
    table gives the fingerprints of the entries whose id hash is one of theirs, their entries the ids."""
    reads = reads if reads is not None else Reads()
    if not len(ids) or not snapshots:
        return []
    probes = K.id_probes(id_hashes(ids, id_type))
    (rows,) = key_lookup(files, store, snapshots, [probes], reads)
    _, fps = K.touched(rows, probes, np.zeros(0, np.int64), 0)
    columns = [C.ID, C.FINGERPRINT, C.RUN_DATE]
    entries, n = read_entries(
        files, store.partition_dirs(snapshots, ENTRIES, None), fps, columns, run_date, later=later
    )
    reads.entry_rows_read += n
    held = set(entries[C.ID].to_pylist())
    return sorted(i for i in set(ids) if i in held)


@dataclass(frozen=True)
class Touched:
    entries: pd.DataFrame  # ENTRY_COLUMNS of the touched entries, by id (nullable integers as objects)
    reads: Reads


def touched_fingerprints(
    rows: list[K.KeyRows],
    probes: list[K.Probes],
    fingerprints: np.ndarray,
    k: int,
    keys: np.ndarray | None,
) -> np.ndarray:
    """The stored fingerprints the probes touch (``core.index_keys.touched``), each once."""
    found = [np.zeros(0, dtype=np.int64)]
    for r, p in zip(rows, probes, strict=True):
        found.append(K.touched(r, p, fingerprints, k, keys)[1])
    return np.unique(np.concatenate(found))


def batch_probes(
    fingerprints: np.ndarray,
    plan: K.SegmentPlan,
    layout: IndexLayout,
    sketches: Sequence[bytes | None] | None,
) -> tuple[list[K.Probes], np.ndarray | None]:
    """The probes of the documents with ``fingerprints`` (and, with sketch bands, ``sketches``: one or None
    per document) in the segment tables ``plan`` reads and the sketch tables; and their band keys."""
    probes = K.segment_probes(fingerprints, plan)
    keys = None
    if layout.sketch_bands:
        if sketches is None or len(sketches) != len(fingerprints):
            raise ValueError("an index with sketch tables needs one sketch (or None) per fingerprint")
        keys = band_keys(sketches)
        probes += K.sketch_probes(keys)
    return probes, keys


def touched_entries(
    files: ArrowFiles,
    store: IndexStore,
    snapshots: list[Snapshot],
    layout: IndexLayout,
    run_date: str,
    fingerprints: np.ndarray,
    k: int,
    plan: K.SegmentPlan,
    sketches: Sequence[bytes | None] | None = None,
    reads: Reads | None = None,
) -> Touched:
    """The entries of run dates before ``run_date`` the documents with ``fingerprints`` touch: within
    ``k`` bits on a segment probe or a shared sketch band prefix, or sharing a sketch band key
    (``transforms.index_rows.touched_entries``)."""
    reads = reads if reads is not None else Reads()
    fps = np.asarray(fingerprints, dtype=np.int64)
    probes, keys = batch_probes(fps, plan, layout, sketches)
    rows = key_lookup(files, store, snapshots, probes, reads)
    wanted = touched_fingerprints(rows, [p for p in probes if len(p.value)], fps, k, keys)
    table, n = read_entries(
        files, store.partition_dirs(snapshots, ENTRIES, None), wanted, ENTRY_COLUMNS, run_date
    )
    reads.entry_rows_read += n
    # an id stored under two run dates (an index written before ids were kept once) is its earliest
    ordered = table.sort_by([(C.ID, "ascending"), (C.RUN_DATE, "ascending")])
    entries = ordered.to_pandas(integer_object_nulls=True).drop_duplicates(C.ID, ignore_index=True)
    return Touched(entries[list(ENTRY_COLUMNS)], reads)
