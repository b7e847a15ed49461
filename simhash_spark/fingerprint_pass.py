"""A run's fingerprint pass: the validated input's fingerprints and rows per status, computed on the
driver for a small input and by the executors otherwise."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from simhash_spark import columns as C
from simhash_spark.config import Config
from simhash_spark.context import RunContext, shuffle_partitions
from simhash_spark.core.fingerprint import FINGERPRINTED, INVALID_UTF8, STATUSES, check_filter
from simhash_spark.io import id_totals, prepare_docs, validate_ids, validate_schema
from simhash_spark.link_model import AtHand
from simhash_spark.transforms.classic import spark_context
from simhash_spark.transforms.driver_frames import driver_frame
from simhash_spark.transforms.fingerprint import (
    add_fingerprints,
    add_title_fingerprints,
    collect_documents,
    is_small_input,
    local_fingerprint_frame,
    local_fingerprints,
    local_text_frame,
    model_files,
)

log = logging.getLogger(__name__)


def _default_parallelism(spark: SparkSession) -> int:
    sc = spark_context(spark)
    if sc is None:
        return shuffle_partitions(spark) or 200  # Spark's default
    return int(sc.defaultParallelism)


def _driver_cores(spark: SparkSession) -> int:
    """The cores the driver may use for its own work: in local mode the ones Spark's tasks would use
    (``local[N]``), elsewhere ``spark.driver.cores`` (default 1: a client-mode driver shares its machine)."""
    sc = spark_context(spark)
    if sc is None:  # Spark Connect: the driver is not here
        return 1
    if (sc.master or "").startswith("local"):
        return max(1, int(sc.defaultParallelism))
    return max(1, int(spark.conf.get("spark.driver.cores", "1") or 1))


def _spread(spark: SparkSession, docs: DataFrame, cfg: Config) -> DataFrame:
    """Fingerprinting is CPU-bound Python: make sure every core gets a share even when the input is a
    single small file. Hash-partitioning on id keeps the placement deterministic."""
    want = cfg.spark.min_fingerprint_partitions or 2 * _default_parallelism(spark)
    try:
        have = docs.rdd.getNumPartitions()
    except Exception:
        return docs
    return docs.repartition(want, C.ID) if have < want else docs


def _ship_model_files(spark: SparkSession, cfg: Config) -> None:
    """Executors on a cluster do not see the driver's files: ship the dictionary, IDF and stop-word
    files with the job (workers look them up by name when the driver's path does not exist for them)."""
    paths = model_files(cfg.model)
    if not paths:
        return
    sc = spark_context(spark)
    if sc is None:  # Spark Connect: artifacts travel with the session
        for path in paths:
            spark.addArtifacts(path, file=True)
        return
    for path in paths:
        try:
            sc.addFile(path)
        except Exception as e:  # the same file shipped by an earlier run in this session
            log.debug("not shipping %s again: %s", path, e)


@dataclass(frozen=True)
class Fingerprinted:
    docs: DataFrame  # the working frame: id, text, title_text, pass-through columns
    fps: DataFrame  # its fingerprints (persisted, computed)
    status_counts: dict[str, int]  # rows per status
    on: str  # where the fingerprints were computed: "driver" or "executors"
    at_hand: AtHand | None = None  # fingerprints and texts, when computed on the driver
    local: pd.DataFrame | None = None  # the collected documents (``collect_documents``), when on the driver
    summaries: DataFrame | None = None  # id, check_summary: what the text check filters with, where emitted

    @property
    def texts_valid(self) -> bool:
        """Every fingerprinted document's text is valid UTF-8 as read (none needed the repair that
        ``invalid_utf8`` says was made): the linking, the report and the index may read those texts
        without checking every byte again (``index_pass.texts_of``)."""
        return self.status_counts[INVALID_UTF8] == 0


def fingerprint_pass(
    spark: SparkSession, raw: DataFrame, cfg: Config, ctx: RunContext, *, source: str
) -> Fingerprinted:
    """The input's fingerprints.

    A small input (``cluster.local_max_documents`` rows, ``cluster.local_max_characters`` characters) is
    fingerprinted on the driver: one collect instead of a shuffle, Python workers and an aggregation."""
    with ctx.stage("validate"):
        validate_schema(raw, cfg, source=source)
        docs = prepare_docs(raw, cfg)
        small = is_small_input(
            docs,
            max_documents=cfg.cluster.local_max_documents,
            max_characters=cfg.cluster.local_max_characters,
        )
    with ctx.stage("fingerprint"):
        if small:
            return _fingerprint_on_driver(spark, raw, docs, collect_documents(docs), cfg, ctx, source=source)
        _ship_model_files(spark, cfg)
        spread = _spread(spark, docs, cfg)
        extra = tuple(c for c in spread.columns if c not in (C.ID, C.TEXT))
        # not through Spark Connect: its client sends each plan whole, and the summaries' joins would take
        # the linking's plans past the depth Connect's protocol decodes
        check = check_filter(cfg.model, cfg.verify) if spark_context(spark) is not None else None
        # the text check groups identical fingerprints by text too: hashing the text here, in the pass that
        # reads it anyway, spares the linking a second read (and shuffle) of every text
        fps = add_fingerprints(spread, model=cfg.model, extra=extra, check=check, text_hash=True)
        if cfg.input.title_column:
            fps = add_title_fingerprints(fps, model=cfg.title_model)
        fps = ctx.persist(fps)
        # the ids are checked in the same aggregation as the statuses are counted: one pass, no input re-read
        totals = fps.agg(*id_totals(F.col(C.ID)), *status_sums()).first()
        assert totals is not None
        validate_ids(totals, raw, cfg, source=source)
    counts = {s: int(totals[s]) for s in STATUSES}
    # the texts are read later as the input holds them: spread again, they would be shuffled for nothing
    if check is None:
        return Fingerprinted(docs, fps, counts, "executors")
    # both views read the one persisted pass; the summaries leave it only for the text check
    summaries = fps.where(F.col(C.CHECK_SUMMARY).isNotNull()).select(C.ID, C.CHECK_SUMMARY)
    return Fingerprinted(docs, fps.drop(C.CHECK_SUMMARY), counts, "executors", summaries=summaries)


def _fingerprint_on_driver(
    spark: SparkSession,
    raw: DataFrame,
    docs: DataFrame,
    local: pd.DataFrame,
    cfg: Config,
    ctx: RunContext,
    *,
    source: str,
) -> Fingerprinted:
    """``fingerprint_pass`` of documents collected to the driver: the same frames, counts and errors. ``docs``
    becomes the collected texts (no second read of the input); pass-through columns are joined back."""
    ids = local[C.ID]
    totals = {"rows": len(ids), "non_null": int(ids.notna().sum()), "distinct": int(ids.nunique())}
    validate_ids(totals, raw, cfg, source=source)
    title_model = cfg.title_model if cfg.input.title_column else None
    # the sketch bands link on the sketches; the sketch filter alone has nothing to filter on the driver
    check = check_filter(cfg.model, cfg.verify) if cfg.sketch_bands else None
    computed = local_fingerprints(
        local, model=cfg.model, title_model=title_model, processes=_driver_cores(spark), check=check
    )
    per_status = computed[C.STATUS].value_counts()
    id_type = docs.schema[C.ID].dataType
    fps = local_fingerprint_frame(spark, computed, id_type)
    # the Spark path's column order: pass-through columns come between n_chars and text_hash
    passthrough = [c for c in docs.columns if c not in (C.ID, C.TEXT, C.TITLE)]
    if passthrough:
        joined = fps.join(docs.select(C.ID, *passthrough), on=C.ID, how="inner")
        head, tail = fps.columns[:5], fps.columns[5:]
        fps = joined.select(*head, *passthrough, *tail)
    fps = ctx.persist(fps)
    by_id = dict(zip(local[C.ID].tolist(), local[C.TEXT].tolist(), strict=True))
    keyed = computed[computed[C.STATUS].isin(FINGERPRINTED)]
    titles = keyed[[C.ID, C.TITLE_FINGERPRINT]].dropna() if C.TITLE_FINGERPRINT in keyed.columns else None
    at_hand = AtHand(keyed, titles, lambda wanted: {i: by_id[i] for i in wanted})
    return Fingerprinted(
        local_text_frame(spark, local, id_type),
        fps,
        {s: int(per_status.get(s, 0)) for s in STATUSES},
        "driver",
        at_hand,
        local,
        summaries=None if check is None else _summary_frame(spark, keyed, id_type),
    )


def _summary_frame(spark: SparkSession, keyed: pd.DataFrame, id_type: T.DataType) -> DataFrame:
    """The check summaries computed on the driver, for a linking that runs in Spark after all."""
    rows = keyed.loc[keyed[C.CHECK_SUMMARY].notna(), [C.ID, C.CHECK_SUMMARY]]
    schema = T.StructType([T.StructField(C.ID, id_type), T.StructField(C.CHECK_SUMMARY, T.BinaryType())])
    return driver_frame(spark, rows, schema)


def status_sums() -> list[Column]:
    return [F.coalesce(F.sum((F.col(C.STATUS) == s).cast("long")), F.lit(0)).alias(s) for s in STATUSES]


def count_statuses(fps: DataFrame) -> dict[str, int]:
    row = fps.agg(*status_sums()).first()
    assert row is not None
    return {s: int(row[s]) for s in STATUSES}
