"""Snapshot folders of the index, read and written with Spark.

A snapshot holds, for some run dates, one row per document (``docs/bucket=B/``: ``ENTRY_COLUMNS``) and one
row per (document, table) (``keys/part=P/``); see ``simhash_spark.core.index_model`` for the layout.
"""

from __future__ import annotations

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.config import Config
from simhash_spark.core.fingerprint import check_filter
from simhash_spark.core.index_model import ENTRY_COLUMNS, IndexLayout, Snapshot, stored_entry_columns
from simhash_spark.index.store import IndexStore
from simhash_spark.storage import literal
from simhash_spark.transforms.classic import spark_context
from simhash_spark.transforms.fingerprint import add_fingerprints, add_title_fingerprints, is_fingerprinted
from simhash_spark.transforms.index_rows import doc_bucket, index_keys

KEY_ROW_GROUP_BYTES = 256 * 1024


# the SQL option that sets how many tasks list the folders of one read, when they are many
_LISTING_TASKS = "spark.sql.sources.parallelPartitionDiscovery.parallelism"


def read_folders(spark: SparkSession, folders: list[str]) -> DataFrame:
    """The Parquet rows of ``folders`` (partition folders of snapshots; at least one).

    Spark lists more than a few dozen folders with a job of one task per folder, up to 10,000: a small
    batch against an index of many tables pays hundreds of tasks that each list one folder of a few files.
    The listing here runs as at most as many tasks as the session has cores, each listing its share."""
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


def as_entries(stored: DataFrame, layout: IndexLayout) -> DataFrame:
    """docs/ rows of an index of ``layout`` as ``ENTRY_COLUMNS``: an index without sketch tables stores
    no sketches (a null ``check_summary``)."""
    if layout.sketch_bands:
        return stored.select(*ENTRY_COLUMNS)
    return stored.select(*ENTRY_COLUMNS[:-1], F.lit(None).cast("binary").alias(C.CHECK_SUMMARY))


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


def write_snapshot(
    store: IndexStore, layout: IndexLayout, entries: DataFrame, snapshot: str, runs: tuple[str, ...]
) -> Snapshot:
    """Write ``entries`` (``ENTRY_COLUMNS``) into the (marked) snapshot folder and seal it with its contents
    record; invisible until a manifest lists it."""
    entries = entries.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        base = store.snapshot_dir(snapshot)
        keyed = [C.ID, C.FINGERPRINT, C.N_CHARS, C.RUN_DATE] + (
            [C.CHECK_SUMMARY] if layout.sketch_bands else []
        )
        keys = index_keys(entries.select(*keyed), layout=layout)
        stored = entries.select(*stored_entry_columns(layout))
        docs = stored.withColumn(C.BUCKET, doc_bucket(F.col(C.FINGERPRINT), layout.doc_bits))
        # rows per folder, for the contents record (small aggregations of the persisted entries)
        rows = {f"docs/{C.BUCKET}={r[0]}": int(r[1]) for r in docs.groupBy(C.BUCKET).count().collect()}
        if rows:
            rows.update({f"keys/{C.PART}={r[0]}": int(r[1]) for r in keys.groupBy(C.PART).count().collect()})
            (
                keys.repartition(C.PART)
                .sortWithinPartitions(C.PART, C.BAND, C.KEY)
                .write.mode("error")
                # small row groups over key-sorted files: a lookup of a few keys (``check``) reads the
                # row groups whose key range holds them, not the whole partition
                .option("parquet.block.size", KEY_ROW_GROUP_BYTES)
                .partitionBy(C.PART)
                .parquet(base + "/keys")
            )
            (
                docs.repartition(C.BUCKET)
                .sortWithinPartitions(C.BUCKET, C.ID)
                .write.mode("error")
                .partitionBy(C.BUCKET)
                .parquet(base + "/docs")
            )
    finally:
        entries.unpersist()
    return store.seal(snapshot, runs, store.written_contents(snapshot, rows))
