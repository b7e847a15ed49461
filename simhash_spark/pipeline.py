"""The dedup job: stages wired together, timed, summarized and published."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession

from simhash_spark import columns as C
from simhash_spark.assembly import RunTotals, assemble
from simhash_spark.config import Config, load_config, with_overrides
from simhash_spark.context import RunContext
from simhash_spark.errors import ConfigError, SimhashSparkError, essence
from simhash_spark.fingerprint_pass import Fingerprinted, fingerprint_pass
from simhash_spark.index.session import IndexSession, Lookup, run_record
from simhash_spark.index.store import open_store
from simhash_spark.index_pass import (
    index_entries,
    index_lookup,
    link_inputs,
    local_entries,
    n_linked,
    texts_of,
)
from simhash_spark.io import check_locations, empty_input, open_input, write_all
from simhash_spark.linking import LinkParams, link
from simhash_spark.progress import Progress, SparkProbe
from simhash_spark.publish import Publisher
from simhash_spark.report.collect import collect_report
from simhash_spark.report.render import ReportData, render
from simhash_spark.run_summary import (
    SKIPPED_LISTED,
    driver_memory,
    report_rows,
    run_statistics,
    versions,
    worker_numpy,
)
from simhash_spark.session import bound_plan_strings
from simhash_spark.storage import FileSystem
from simhash_spark.tables import OutputTables
from simhash_spark.transforms.classic import spark_context
from simhash_spark.transforms.clusters import drop_duplicates


class TablesNotWritten(SimhashSparkError):
    """The run's output is published, its catalog tables could not be written (exit 1)."""


@dataclass
class DedupResult:
    """Outputs of one run (persisted where later stages reuse them: ``unpersist`` releases them) and its
    statistics."""

    documents: DataFrame
    pairs: DataFrame
    clusters: DataFrame
    deduplicated: DataFrame
    texts: DataFrame  # id, text (the configured text columns joined), for the report
    index_entries: DataFrame | None = None  # incremental runs: what the index takes from this batch
    index_rows: pd.DataFrame | None = None  # the same on the driver, when the batch was looked up there
    stats: dict[str, Any] = field(default_factory=dict)  # summary.json's statistics, its documented keys
    ctx: RunContext = field(default_factory=RunContext, repr=False)
    totals: RunTotals | None = None
    # the report's data from what the driver holds (runs linked and assembled there), given the statistics
    report_at_hand: Callable[[dict[str, Any]], ReportData] | None = None
    clustered: pd.DataFrame | None = None  # the clustered documents, when clustered on the driver

    def report(self, local_max_edges: int) -> ReportData:
        """The report's data: from what the driver holds, else collected when the pairs and clustered
        documents are at most ``local_max_edges`` rows (``report_rows``), else aggregated by Spark."""
        if self.report_at_hand is not None:
            return self.report_at_hand(self.stats)
        on_driver = report_rows(self.stats) <= local_max_edges
        return collect_report(
            self.stats, self.documents, self.pairs, self.texts, on_driver=on_driver, members=self.clustered
        )

    @property
    def timings(self) -> dict[str, float]:
        return self.ctx.timings

    def unpersist(self) -> None:
        self.ctx.release()


def _sketches_to_store(index: IndexSession, fp_pass: Fingerprinted) -> DataFrame | None:
    """The batch's sketches, when the index stores them (its layout has sketch tables)."""
    return fp_pass.summaries if index.layout.sketch_bands else None


def _index_outputs(
    index: IndexSession | None, fp_pass: Fingerprinted, fps: DataFrame, looked: Lookup | None
) -> tuple[DataFrame | None, pd.DataFrame | None]:
    """An incremental run's entries for the index, and those held on the driver (``None`` without an index;
    the second also without a lookup)."""
    if index is None:
        return None, None
    sketches = _sketches_to_store(index, fp_pass)
    entries = index_entries(fps, fp_pass.docs, index.run_date, sketches, known_valid=fp_pass.texts_valid)
    return entries, None if looked is None else local_entries(fp_pass, looked, index.run_date)


def for_session(
    spark: SparkSession, cfg: Config, index: IndexSession | None = None, *, index_path: str | None = None
) -> Config:
    """``cfg`` with ``match.sketch_bands`` decided for this run: "auto" is off through Spark Connect
    (its fingerprint pass keeps no sketches; an explicit true is refused there before any work) and
    takes the index's setting (``IndexSession.resolved``). Through Spark Connect an index with sketch
    band tables, opened (``index``) or about to be (``index_path``, not to be rebuilt), is refused naming
    Spark Connect."""
    if spark_context(spark) is None and cfg.match.sketch_bands != "false":
        if cfg.match.sketch_bands == "true":
            raise ConfigError(
                "match.sketch_bands: not through Spark Connect (its fingerprint pass keeps no sketches); "
                'set match.sketch_bands = "auto" or false'
            )
        if _holds_sketch_tables(spark, index, index_path):
            raise ConfigError(
                f"index {index.path if index else index_path} holds sketch band tables (match.sketch_bands), "
                "which a run through Spark Connect cannot use: its fingerprint pass keeps no sketches. Run "
                "it in a local or submitted session, or --rebuild-index to rebuild the index's tables "
                "without them"
            )
        cfg = cfg.with_sketch_bands(False)
    return index.resolved(cfg) if index is not None else cfg


def _holds_sketch_tables(spark: SparkSession, index: IndexSession | None, index_path: str | None) -> bool:
    """Whether the run's index keeps its sketch band tables: the opened ``index`` (unless rebuilt), else
    the one at ``index_path``, read from its manifest (False where there is none yet)."""
    if index is not None:
        return index.rebuilt_from is None and index.layout.sketch_bands
    if index_path is None:
        return False
    manifest = open_store(spark, index_path).manifest()
    return manifest is not None and manifest.layout.sketch_bands


def dedup(
    spark: SparkSession,
    raw: DataFrame,
    cfg: Config | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    source: str = "input",
    index: IndexSession | None = None,
    ctx: RunContext | None = None,
) -> DedupResult:
    """Find near-duplicates in ``raw`` (the input rows, any columns) as configured; with ``index``, also
    against the documents of earlier runs it holds (``simhash_spark.index``).

    Steps: validate → fingerprint → (index lookup) → link (candidates, verify, clusters) → assemble. Runs
    the Spark actions these need; the returned DataFrames are persisted, ready to be written or
    inspected (``unpersist`` releases them).

    ``cfg`` defaults to the packaged configuration; ``overrides`` changes keys of it, e.g.
    ``overrides={"match.max_distance": 10, "input.text_columns": ["title", "body"]}``.
    """
    cfg = for_session(spark, with_overrides(cfg or load_config(), overrides or {}), index)
    bound_plan_strings(spark)
    ctx = ctx or RunContext()
    fp_pass = fingerprint_pass(spark, raw, cfg, ctx, source=source)
    docs, fps, status_counts = fp_pass.docs, fp_pass.fps, fp_pass.status_counts
    looked, at_hand = None, fp_pass.at_hand
    if index is not None:
        looked, fps, status_counts, at_hand = index_lookup(index, fp_pass, cfg, ctx)
    keyed, texts, titles, summaries = link_inputs(
        fps, docs, cfg, looked, fp_pass.summaries, known_valid=fp_pass.texts_valid
    )
    params = LinkParams.from_config(cfg, titled=bool(cfg.input.title_column))
    linked = link(
        keyed,
        params,
        ctx,
        texts=texts if cfg.verify.enabled else None,
        titles=titles,
        n_docs=n_linked(status_counts, looked),
        at_hand=at_hand,
        summaries=summaries,
    )
    with ctx.stage("assemble"):
        out = assemble(fps, linked, looked, fp_pass.at_hand, cfg, ctx, status_counts)
    stats = run_statistics(status_counts, linked.stats, out.totals, looked, fingerprinted_on=fp_pass.on)
    return DedupResult(
        out.documents,
        out.pairs,
        out.clusters,
        drop_duplicates(raw, out.duplicate_ids, id_column=cfg.input.id_column),
        texts_of(docs, known_valid=fp_pass.texts_valid),
        *_index_outputs(index, fp_pass, fps, looked),
        stats,
        ctx,
        out.totals,
        out.report,
        out.members,
    )


def summary(
    result: DedupResult,
    cfg: Config,
    *,
    source: str,
    spark: SparkSession,
    skipped_files: list[str] | None = None,
) -> dict[str, Any]:
    skipped = skipped_files or []
    return {
        "input": source,
        "skipped_files": {"count": len(skipped), "files": skipped[:SKIPPED_LISTED]},
        **result.stats,
        "timings_s": result.timings,
        "stages": result.ctx.stages,
        "spark_jobs": result.ctx.spark_jobs,
        "config": cfg.to_dict(),
        "spark": {
            "version": spark.version,
            "app_name": spark.conf.get("spark.app.name", None),
            "arrow_max_records_per_batch": spark.conf.get(
                "spark.sql.execution.arrow.maxRecordsPerBatch", None
            ),
            **driver_memory(spark),
            **worker_numpy(spark),
        },
        "versions": versions(),
    }


def run(
    spark: SparkSession,
    cfg: Config,
    *,
    output: str,
    input_path: str | None = None,
    input_table: str | None = None,
    output_table_prefix: str | None = None,
    index_path: str | None = None,
    run_date: str | None = None,
    rebuild_index: bool = False,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Read, dedup, write every output into staging, (with an index) commit the batch to the index, then
    publish the output atomically and write the catalog tables ``PREFIX{documents,pairs,clusters,
    deduplicated}`` from the published folders (simhash_spark.tables). Returns the summary.

    Nothing is published unless everything before succeeded, the index commit included: a run that exits
    non-zero leaves the previous output and the index as they were (docs/reliability.md)."""
    source = f"table {input_table}" if input_table else str(input_path)
    tables = OutputTables.from_config(cfg, output_table_prefix, run_date)
    out_fs = FileSystem(spark, output)
    check_locations(spark, output=output, index=index_path, input_path=input_path, input_table=input_table)
    tables.check(spark, overwrite=cfg.output.overwrite)
    cfg = for_session(spark, cfg, index_path=None if rebuild_index else index_path)
    publisher = Publisher(
        out_fs, output, overwrite=cfg.output.overwrite, timeout_s=cfg.writers.lease_timeout_seconds
    )
    publisher.prepare()
    index = None
    try:
        if index_path:
            assert run_date is not None
            index = IndexSession.open(spark, cfg, path=index_path, run_date=run_date, rebuild=rebuild_index)
            cfg = index.resolved(cfg)
        raw, skipped = open_input(
            spark, path=input_path, table=input_table, allow_empty=cfg.input.allow_empty
        )
        if raw is None:  # an existing folder without a data file, accepted as an empty day
            raw = empty_input(spark, cfg, id_type=index.base.id_type if index is not None else "")
        ctx = RunContext(Progress(SparkProbe(spark), show=show_progress))
        summ = _compute_and_publish(
            spark,
            cfg,
            raw,
            source=source,
            publisher=publisher,
            index=index,
            tables=tables,
            ctx=ctx,
            skipped_files=skipped,
        )
    except BaseException:
        publisher.abort()
        if index is not None:
            index.abort()
        raise
    if index is not None:
        index.finish()
    _write_tables(spark, tables, output, indexed=index is not None)
    return summ


def _write_tables(spark: SparkSession, tables: OutputTables, output: str, *, indexed: bool) -> None:
    """The catalog tables of a published output (``TablesNotWritten`` when the catalog fails)."""
    try:
        tables.write(spark, output)
    except Exception as e:  # everything checkable was checked before any work; this is the catalog failing
        raise TablesNotWritten(
            f"output {output} was published{' and the index committed' if indexed else ''}, but "
            f"its catalog tables were not written: {essence(e)}. Rerun the same command to write them"
        ) from e


def _compute_and_publish(
    spark: SparkSession,
    cfg: Config,
    raw: DataFrame,
    *,
    source: str,
    publisher: Publisher,
    index: IndexSession | None,
    tables: OutputTables,
    ctx: RunContext,
    skipped_files: list[str],
) -> dict[str, Any]:
    started = time.perf_counter()
    result = dedup(spark, raw, cfg, source=source, index=index, ctx=ctx)
    try:
        with result.ctx.stage("write"):
            outputs = {"documents": result.documents, "pairs": result.pairs, "clusters": result.clusters}
            if cfg.output.write_deduplicated:
                outputs["deduplicated"] = result.deduplicated
            write_all({publisher.path(name): df for name, df in outputs.items()})
            tables.prepare(spark, {name: publisher.path(name) for name in tables.names})
        if index is not None:
            assert result.totals is not None
            result.stats["monitor"] = index.monitor(
                result.totals.dedup_rate, cfg.monitor, input_rows=result.totals.input_rows
            )
            index.raise_if_alarming(result.stats["monitor"])
        report = None
        if cfg.output.write_report:
            with result.ctx.stage("report"):
                report = result.report(cfg.cluster.local_max_edges)
        if index is not None:
            with result.ctx.stage("index_write"):
                _commit(index, result)
        result.timings["total"] = round(time.perf_counter() - started, 3)
        summ = summary(result, cfg, source=source, spark=spark, skipped_files=skipped_files)
        publisher.write_json("summary.json", summ)
        if report is not None:
            publisher.write_text("report.html", render(replace(report, summary=summ)))
        publisher.publish()
    except BaseException:
        # the first failure is the one to report: after an out-of-memory error the JVM may be gone
        with contextlib.suppress(Exception):
            result.unpersist()
        raise
    result.unpersist()
    return summ


def _commit(index: IndexSession, result: DedupResult) -> None:
    """Add the batch to the index (the run's point of no return; the output is published after it)."""
    assert result.index_entries is not None and result.totals is not None
    t = result.totals
    record = run_record(
        index.run_date,
        input_rows=t.input_rows,
        duplicates=t.duplicates,
        dedup_rate=t.dedup_rate,
        matched_index=t.matched_index,
    )
    id_type = dict(result.documents.dtypes)[C.ID]
    snap = index.commit(
        result.index_entries, id_type=id_type, record=record, ctx=result.ctx, rows=result.index_rows
    )
    assert index.committed is not None
    result.stats["index"].update(
        appended=snap.docs_rows,
        snapshot=snap.id,
        version_after=index.committed.version,
        entries_after=index.committed.entries,
    )
