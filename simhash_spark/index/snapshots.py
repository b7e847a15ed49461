"""Snapshot folders of the index, read and written with Spark.

A snapshot holds, for some run dates, one row per entry (``entries/``: ``ENTRY_COLUMNS``, sorted by
fingerprint) and the entries' key rows (``keys/key_table=T/``: ``key``, ``fingerprint``, sorted by key);
see ``simhash_spark.core.index_model`` for the layout and ``core.index_keys`` for the tables.
"""

from __future__ import annotations

import math

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.config import Config
from simhash_spark.core.fingerprint import check_filter
from simhash_spark.core.index_model import (
    ENTRIES,
    ENTRY_COLUMNS,
    KEYS,
    IndexLayout,
    Snapshot,
)
from simhash_spark.index.local_files import CODEC, key_folder
from simhash_spark.index.store import IndexStore
from simhash_spark.storage import literal
from simhash_spark.transforms.classic import spark_context
from simhash_spark.transforms.fingerprint import add_fingerprints, add_title_fingerprints, is_fingerprinted
from simhash_spark.transforms.index_rows import key_rows, range_filter

# Parquet row groups: a probe reads the key row group its range falls in, a touched entry its entries row
# group (the texts of its neighbours in fingerprint order)
KEY_ROW_GROUP_BYTES = 256 * 1024
ENTRY_ROW_GROUP_BYTES = 512 * 1024
# rows per file: a run writes tens of files, however many tasks it ran
KEY_ROWS_PER_FILE = 8_000_000
ENTRIES_PER_FILE = 200_000


# the SQL option that sets how many tasks list the folders of one read, when they are many
_LISTING_TASKS = "spark.sql.sources.parallelPartitionDiscovery.parallelism"


def read_folders(spark: SparkSession, folders: list[str]) -> DataFrame:
    """The Parquet rows of ``folders`` (folders of snapshots; at least one).

    Spark lists more than a few dozen folders with a job of one task per folder, up to 10,000. The listing
    here runs as at most as many tasks as the session has cores, each listing its share."""
    folders = [literal(f) for f in folders]
    sc = spark_context(spark)
    if sc is None:  # Spark Connect: the listing runs where the session's server decides
        return spark.read.parquet(*folders)
    cores = int(sc.defaultParallelism)
    before = spark.conf.get(_LISTING_TASKS, None)
    spark.conf.set(_LISTING_TASKS, str(max(1, min(cores, len(folders)))))
    try:
        return spark.read.parquet(*folders)  # listed here, when the reader resolves its paths
    finally:
        if before is None:
            spark.conf.unset(_LISTING_TASKS)
        else:
            spark.conf.set(_LISTING_TASKS, before)


def entry_schema(id_type: str) -> str:
    return (
        f"{C.ID} {id_type}, {C.FINGERPRINT} bigint, {C.N_CHARS} int, {C.TITLE_FINGERPRINT} bigint, "
        f"{C.TEXT} string, {C.TITLE} string, {C.RUN_DATE} string, {C.CHECK_SUMMARY} binary"
    )


def empty_entries(spark: SparkSession, id_type: str) -> DataFrame:
    return spark.createDataFrame([], entry_schema(id_type or "string"))


def entries_of_batch(
    fps: DataFrame, docs: DataFrame, run_date: str, summaries: DataFrame | None = None
) -> DataFrame:
    """The batch documents the index takes: fingerprinted, not already indexed, with their sketches from
    ``summaries`` (``id``, ``check_summary``) where given. Out: ``ENTRY_COLUMNS``."""
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
    entries = keep.join(texts, on=C.ID, how="inner").withColumn(C.RUN_DATE, F.lit(run_date))
    if summaries is None:
        return entries.select(*ENTRY_COLUMNS[:-1], F.lit(None).cast("binary").alias(C.CHECK_SUMMARY))
    return entries.join(summaries.select(C.ID, C.CHECK_SUMMARY), on=C.ID, how="left").select(*ENTRY_COLUMNS)


def refingerprint(entries: DataFrame, cfg: Config) -> DataFrame:
    """Stored entries (``ENTRY_COLUMNS``) with fingerprints (and with ``match.sketch_bands``, sketches)
    recomputed by ``cfg``'s model."""
    extra = (C.RUN_DATE,) + ((C.TITLE,) if cfg.input.title_column else ())
    check = check_filter(cfg.model, cfg.verify) if cfg.sketch_bands else None
    fps = add_fingerprints(
        entries.select(C.ID, C.TEXT, C.TITLE, C.RUN_DATE), model=cfg.model, extra=extra, check=check
    )
    if cfg.input.title_column:
        fps = add_title_fingerprints(fps, model=cfg.title_model)
    title_fp = F.col(C.TITLE_FINGERPRINT) if cfg.input.title_column else F.lit(None).cast("bigint")
    sketch = F.col(C.CHECK_SUMMARY) if check is not None else F.lit(None).cast("binary")
    fresh = fps.where(is_fingerprinted(F.col(C.STATUS))).select(
        C.ID,
        C.FINGERPRINT,
        C.N_CHARS,
        title_fp.alias(C.TITLE_FINGERPRINT),
        C.RUN_DATE,
        sketch.alias(C.CHECK_SUMMARY),
    )
    return fresh.join(entries.select(C.ID, C.TEXT, C.TITLE), on=C.ID, how="inner").select(*ENTRY_COLUMNS)


# a write runs as at least as many tasks as the session has cores, up to this many: sorted files, tens
# of them, written in parallel
MAX_WRITE_TASKS = 16


def _files(rows: int, per_file: int, tasks: int) -> int:
    """Files (and write tasks) for ``rows``: one per ``per_file`` rows, at least ``tasks``, at most one per
    row."""
    return max(1, min(max(rows, 1), max(math.ceil(rows / per_file), tasks)))


def _write_tasks(spark: SparkSession) -> int:
    sc = spark_context(spark)
    cores = int(sc.defaultParallelism) if sc is not None else 2
    return max(1, min(cores, MAX_WRITE_TASKS))


def write_snapshot(
    store: IndexStore, layout: IndexLayout, entries: DataFrame, snapshot: str, runs: tuple[str, ...]
) -> Snapshot:
    """Write ``entries`` (``ENTRY_COLUMNS``) into the (marked) snapshot folder and seal it with its contents
    record; invisible until a manifest lists it.

    The key rows and the counts come from the entries' ids, fingerprints and sketches (Spark computes them
    without the texts); the texts pass once, into files of the entries' fingerprint ranges (a hash of the
    fingerprint's top bits spreads those ranges over the files, without the sampling pass a range
    partitioning costs), each sorted by fingerprint."""
    entries = entries.select(*ENTRY_COLUMNS)
    tasks = _write_tasks(entries.sparkSession)
    keyed = entries.select(C.ID, C.FINGERPRINT, C.CHECK_SUMMARY).persist(StorageLevel.MEMORY_AND_DISK)
    keys = key_rows(keyed, sketch_bands=layout.sketch_bands).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        base = store.snapshot_dir(snapshot)
        n_entries = keyed.count()
        rows: dict[str, int] = {}
        if n_entries:
            per_table = {int(r[0]): int(r[1]) for r in keys.groupBy(C.KEY_TABLE).count().collect()}
            rows = {ENTRIES: n_entries, **{key_folder(t): n for t, n in per_table.items()}}
            (
                keys.repartitionByRange(
                    _files(sum(per_table.values()), KEY_ROWS_PER_FILE, tasks), C.KEY_TABLE, C.INDEX_KEY
                )
                .sortWithinPartitions(C.KEY_TABLE, C.INDEX_KEY, C.FINGERPRINT)
                .write.mode("error")
                # small row groups over key-sorted files: a probe reads the row group its key range falls in
                .option("parquet.block.size", KEY_ROW_GROUP_BYTES)
                .option("compression", CODEC)
                .partitionBy(C.KEY_TABLE)
                .parquet(f"{base}/{KEYS}")
            )
            n_files = _files(n_entries, ENTRIES_PER_FILE, tasks)
            top_bits = min(16, max(1, (n_files - 1).bit_length() + 3))
            (
                entries.repartition(n_files, F.shiftrightunsigned(C.FINGERPRINT, 64 - top_bits))
                .sortWithinPartitions(C.FINGERPRINT, C.ID)
                .write.mode("error")
                .option("parquet.block.size", ENTRY_ROW_GROUP_BYTES)
                .option("compression", CODEC)
                .parquet(f"{base}/{ENTRIES}")
            )
    finally:
        keyed.unpersist()
        keys.unpersist()
    return store.seal(snapshot, runs, store.written_contents(snapshot, rows))


def read_key_rows(
    spark: SparkSession,
    folders_by_table: dict[int, list[str]],
    ranges: dict[int, list[tuple[int, int]]] | None,
) -> DataFrame | None:
    """The key rows (``key_table``, ``key``, ``fingerprint``) of the given tables' folders; with ``ranges``,
    only those within one of their table's ranges (pushed down: the reader skips the row groups outside)."""
    frames = []
    for table, folders in sorted(folders_by_table.items()):
        if not folders:
            continue
        rows = read_folders(spark, folders)
        where = range_filter(C.INDEX_KEY, ranges.get(table, [])) if ranges is not None else None
        if ranges is not None and where is None:
            continue
        if where is not None:
            rows = rows.where(where)
        frames.append(rows.select(F.lit(table).alias(C.KEY_TABLE), C.INDEX_KEY, C.FINGERPRINT))
    if not frames:
        return None
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out


def read_entries(
    spark: SparkSession, folders: list[str], ranges: list[tuple[int, int]] | None
) -> DataFrame | None:
    """The entries (``ENTRY_COLUMNS``) of ``folders``; with ``ranges``, only those whose fingerprint lies in
    one (pushed down)."""
    if not folders:
        return None
    rows = read_folders(spark, folders)
    if ranges is not None:
        where = range_filter(C.FINGERPRINT, ranges)
        if where is None:
            return None
        rows = rows.where(where)
    return rows.select(*ENTRY_COLUMNS)
