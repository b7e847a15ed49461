"""The dedup job: stages wired together, timed, summarized and published."""

from __future__ import annotations

import contextlib
import logging
import platform
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from importlib import metadata
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.config import Config, load_config, with_overrides
from simhash_spark.context import RunContext
from simhash_spark.core.assemble_local import (
    LOCAL_POLICIES,
    cluster_members,
    cluster_rows,
    cluster_totals,
    matched_totals,
)
from simhash_spark.core.assemble_local import batch_components as local_batch_components
from simhash_spark.core.fingerprint import ALREADY_INDEXED, FINGERPRINTED, STATUSES, prefix_threshold
from simhash_spark.core.index_model import ENTRY_COLUMNS
from simhash_spark.core.spark_hash import KINDS, xxhash64
from simhash_spark.errors import SimhashSparkError, essence
from simhash_spark.index.session import HeldBatch, IndexSession, LocalMatches, Lookup, run_record
from simhash_spark.index.snapshots import entries_of_batch
from simhash_spark.io import (
    check_locations,
    id_totals,
    open_input,
    prepare_docs,
    validate_ids,
    validate_schema,
    write_all,
)
from simhash_spark.linking import AtHand, Linked, LinkParams, link, pairs_frame
from simhash_spark.progress import Progress, SparkProbe
from simhash_spark.publish import Publisher
from simhash_spark.report.collect import collect_report
from simhash_spark.report.collect_local import local_report
from simhash_spark.report.render import ReportData, render
from simhash_spark.storage import FileSystem
from simhash_spark.tables import OutputTables
from simhash_spark.transforms.classic import spark_context
from simhash_spark.transforms.clusters import (
    assign_clusters,
    attach_clusters,
    cluster_table,
    drop_duplicates,
    duplicate_ids_of,
)
from simhash_spark.transforms.driver_frames import driver_frame
from simhash_spark.transforms.fingerprint import (
    add_fingerprints,
    add_title_fingerprints,
    collect_documents,
    is_fingerprinted,
    is_small_input,
    local_fingerprint_frame,
    local_fingerprints,
    local_text_frame,
    model_files,
    valid_text,
)
from simhash_spark.transforms.incremental import batch_components, drop_index_pairs, with_index_matches

log = logging.getLogger(__name__)


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
        documents are at most ``local_max_edges`` rows (``_report_rows``), else aggregated by Spark."""
        if self.report_at_hand is not None:
            return self.report_at_hand(self.stats)
        on_driver = _report_rows(self.stats) <= local_max_edges
        return collect_report(
            self.stats, self.documents, self.pairs, self.texts, on_driver=on_driver, members=self.clustered
        )

    @property
    def timings(self) -> dict[str, float]:
        return self.ctx.timings

    def unpersist(self) -> None:
        self.ctx.release()


def _default_parallelism(spark: SparkSession) -> int:
    sc = spark_context(spark)
    if sc is None:
        return int(spark.conf.get("spark.sql.shuffle.partitions") or 200)
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
    cfg = with_overrides(cfg or load_config(), overrides or {})
    ctx = ctx or RunContext()
    fp_pass = _fingerprint(spark, raw, cfg, ctx, source=source)
    docs, fps, status_counts = fp_pass.docs, fp_pass.fps, fp_pass.status_counts
    looked, at_hand = None, fp_pass.at_hand
    if index is not None:
        looked, fps, status_counts, at_hand = _index_lookup(index, fp_pass, cfg, ctx)
    keyed, texts, titles, prefixes = _link_inputs(fps, docs, cfg, looked, fp_pass.prefixes)
    params = LinkParams.from_config(cfg, titled=bool(cfg.input.title_column))
    linked = link(
        keyed,
        params,
        ctx,
        texts=texts if cfg.verify.enabled else None,
        titles=titles,
        n_docs=_n_linked(status_counts, looked),
        at_hand=at_hand,
        prefixes=prefixes,
    )
    with ctx.stage("assemble"):
        out = _assemble(fps, linked, looked, fp_pass.at_hand, cfg, ctx, status_counts)
    stats = _stats(status_counts, linked.stats, out.totals, looked, fingerprinted_on=fp_pass.on)
    return DedupResult(
        out.documents,
        out.pairs,
        out.clusters,
        drop_duplicates(raw, out.duplicate_ids, id_column=cfg.input.id_column),
        _texts(docs),
        None if index is None else _index_entries(fps, docs, index.run_date),
        _local_entries(fp_pass, looked, index.run_date) if index is not None and looked is not None else None,
        stats,
        ctx,
        out.totals,
        out.report,
        out.members,
    )


@dataclass(frozen=True)
class _Fingerprinted:
    docs: DataFrame  # the working frame: id, text, title_text, pass-through columns
    fps: DataFrame  # its fingerprints (persisted, computed)
    status_counts: dict[str, int]  # rows per status
    on: str  # where the fingerprints were computed: "driver" or "executors"
    at_hand: AtHand | None = None  # fingerprints and texts, when computed on the driver
    local: pd.DataFrame | None = None  # the collected documents (``collect_documents``), when on the driver
    prefixes: DataFrame | None = None  # id, check_prefix: the text check's prefixes, where emitted


def _fingerprint(
    spark: SparkSession, raw: DataFrame, cfg: Config, ctx: RunContext, *, source: str
) -> _Fingerprinted:
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
        # the text check groups identical fingerprints by text too: hashing the text here, in the pass that
        # reads it anyway, spares the linking a second read (and shuffle) of every text
        spread = _spread(spark, docs, cfg)
        docs_hashed = spread.select("*", F.xxhash64(valid_text(F.col(C.TEXT))).alias(C.TEXT_HASH))
        extra = tuple(c for c in docs_hashed.columns if c not in (C.ID, C.TEXT))
        threshold = prefix_threshold(cfg.model, cfg.verify)
        fps = add_fingerprints(docs_hashed, model=cfg.model, extra=extra, prefix_threshold=threshold)
        if cfg.input.title_column:
            fps = add_title_fingerprints(fps, model=cfg.title_model)
        fps = ctx.persist(fps)
        # the ids are checked in the same aggregation as the statuses are counted: one pass, no input re-read
        totals = fps.agg(*id_totals(F.col(C.ID)), *_status_sums()).first()
        assert totals is not None
        validate_ids(totals, raw, cfg, source=source)
    counts = {s: int(totals[s]) for s in STATUSES}
    # the texts are read later as the input holds them: spread again, they would be shuffled for nothing
    if threshold is None:
        return _Fingerprinted(docs, fps, counts, "executors")
    # both views read the one persisted pass; the prefixes leave it only for the text check
    prefixes = fps.where(F.col(C.PREFIX).isNotNull()).select(C.ID, C.PREFIX)
    return _Fingerprinted(docs, fps.drop(C.PREFIX), counts, "executors", prefixes=prefixes)


def _fingerprint_on_driver(
    spark: SparkSession,
    raw: DataFrame,
    docs: DataFrame,
    local: pd.DataFrame,
    cfg: Config,
    ctx: RunContext,
    *,
    source: str,
) -> _Fingerprinted:
    """``_fingerprint`` of documents collected to the driver: the same frames, counts and errors. ``docs``
    becomes the collected texts (no second read of the input); pass-through columns are joined back."""
    ids = local[C.ID]
    totals = {"rows": len(ids), "non_null": int(ids.notna().sum()), "distinct": int(ids.nunique())}
    validate_ids(totals, raw, cfg, source=source)
    title_model = cfg.title_model if cfg.input.title_column else None
    computed = local_fingerprints(
        local, model=cfg.model, title_model=title_model, processes=_driver_cores(spark)
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
    return _Fingerprinted(
        local_text_frame(spark, local, id_type),
        fps,
        {s: int(per_status.get(s, 0)) for s in STATUSES},
        "driver",
        at_hand,
        local,
    )


def _n_linked(status_counts: dict[str, int], looked: Lookup | None) -> int:
    """What is linked: the batch's fingerprinted rows and, in an incremental run, the entries it touches
    (disjoint: a batch row whose id the index holds is already_indexed, not fingerprinted)."""
    fingerprinted = sum(status_counts[s] for s in FINGERPRINTED)
    return fingerprinted + (0 if looked is None else int(looked.stats["touched_entries"]))


def _index_lookup(
    index: IndexSession, fp_pass: _Fingerprinted, cfg: Config, ctx: RunContext
) -> tuple[Lookup, DataFrame, dict[str, int], AtHand | None]:
    """(the lookup, fps, rows per status, what the driver holds for the linking): ids the index holds
    already change status; a batch looked up on the driver is linked there with the entries it touched."""
    fps, status_counts, at_hand = fp_pass.fps, fp_pass.status_counts, fp_pass.at_hand
    local = fp_pass.local
    held = (
        HeldBatch(local[C.ID].tolist(), at_hand.keyed) if at_hand is not None and local is not None else None
    )
    with ctx.stage("index_lookup"):
        if index.rebuilt_from is not None:
            index.rebuild(cfg)
        looked = index.lookup(fps, cfg.policy.largest, ctx, held)
        if looked.fps is not fps:
            fps = ctx.persist(looked.fps)
            if looked.local is not None and at_hand is not None:
                status_counts = _marked_indexed(status_counts, at_hand.keyed, looked.local.known_ids)
            else:
                status_counts = _status_counts(fps)
    linked_at_hand = _with_touched(at_hand, looked.local) if at_hand is not None and looked.local else None
    return looked, fps, status_counts, linked_at_hand


def _marked_indexed(status_counts: dict[str, int], keyed: pd.DataFrame, known: list[Any]) -> dict[str, int]:
    """Rows per status once the fingerprinted rows of ``known`` ids are ``already_indexed``
    (``mark_already_indexed``, counted on the driver)."""
    counts = dict(status_counts)
    for status, n in keyed.loc[keyed[C.ID].isin(known), C.STATUS].value_counts().items():
        counts[str(status)] -= int(n)
        counts[ALREADY_INDEXED] += int(n)
    return counts


def _stacked(first: pd.DataFrame, second: pd.DataFrame) -> pd.DataFrame:
    """The rows of both (pandas types an empty frame's columns as it likes: left out)."""
    if not len(second):
        return first
    return pd.concat([first, second], ignore_index=True) if len(first) else second.reset_index(drop=True)


def _with_touched(at_hand: AtHand, found: LocalMatches) -> AtHand:
    """What an incremental run links, on the driver: the batch's fingerprinted rows but those whose ids
    the index holds (linked as the index's entries, with its texts), and the touched entries."""
    known, entries = set(found.known_ids), found.touched
    batch = at_hand.keyed[~at_hand.keyed[C.ID].isin(known)] if known else at_hand.keyed
    ids = entries[C.ID].to_numpy()
    if batch[C.ID].dtype.kind in "iu":
        ids = ids.astype(batch[C.ID].dtype)
    indexed = pd.DataFrame(
        {
            C.ID: ids,
            C.FINGERPRINT: entries[C.FINGERPRINT].to_numpy(np.int64),
            C.N_CHARS: entries[C.N_CHARS].to_numpy(np.int64),
            # what the Spark path hashes: the stored text, as it is
            C.TEXT_HASH: np.array([xxhash64((t,), "string") for t in entries[C.TEXT]], dtype=np.int64),
        }
    )
    columns = [C.ID, C.FINGERPRINT, C.N_CHARS, C.TEXT_HASH]
    keyed = _stacked(batch[columns], indexed)
    titles = at_hand.titles
    if titles is not None:
        titled = entries[C.TITLE_FINGERPRINT].notna().to_numpy()
        title_fps = entries[C.TITLE_FINGERPRINT].to_numpy()[titled].astype(np.int64)
        more = pd.DataFrame({C.ID: ids[titled], C.TITLE_FINGERPRINT: title_fps})
        titles = _stacked(titles[~titles[C.ID].isin(known)], more)
    stored = dict(zip(ids.tolist(), entries[C.TEXT].tolist(), strict=True))

    def texts(wanted: set[Any]) -> dict[Any, str]:
        out = at_hand.texts({i for i in wanted if i not in stored})
        out.update({i: stored[i] for i in wanted if i in stored})
        return out

    return AtHand(keyed, titles, texts)


def _status_sums() -> list[Column]:
    return [F.coalesce(F.sum((F.col(C.STATUS) == s).cast("long")), F.lit(0)).alias(s) for s in STATUSES]


def _status_counts(fps: DataFrame) -> dict[str, int]:
    row = fps.agg(*_status_sums()).first()
    assert row is not None
    return {s: int(row[s]) for s in STATUSES}


def _texts(docs: DataFrame, *more: Column) -> DataFrame:
    """``id``, ``text`` (valid UTF-8) and ``more`` of the working frame."""
    return docs.select(C.ID, valid_text(F.col(C.TEXT)).alias(C.TEXT), *more)


def _index_entries(fps: DataFrame, docs: DataFrame, run_date: str) -> DataFrame:
    """The batch's entries for the index (``entries_of_batch``), titles included when the input has them."""
    title = [valid_text(F.col(C.TITLE)).alias(C.TITLE)] if C.TITLE in docs.columns else []
    return entries_of_batch(fps, _texts(docs, *title), run_date)


def _local_entries(fp_pass: _Fingerprinted, looked: Lookup, run_date: str) -> pd.DataFrame | None:
    """``_index_entries`` on the driver, when the batch was fingerprinted and looked up there."""
    if fp_pass.at_hand is None or fp_pass.local is None or looked.local is None:
        return None
    keyed, local = fp_pass.at_hand.keyed, fp_pass.local
    keep = keyed[~keyed[C.ID].isin(looked.local.known_ids)]
    titles = keep[C.TITLE_FINGERPRINT] if C.TITLE_FINGERPRINT in keep.columns else None
    texts = local.set_index(C.ID)
    rows = {
        C.ID: keep[C.ID].to_numpy(),
        C.FINGERPRINT: keep[C.FINGERPRINT].to_numpy(np.int64),
        C.N_CHARS: keep[C.N_CHARS].to_numpy(np.int64),
        C.TITLE_FINGERPRINT: [None] * len(keep)
        if titles is None
        else titles.astype(object).where(titles.notna(), None),
        C.TEXT: texts.loc[keep[C.ID], C.TEXT].to_numpy(),
        C.TITLE: texts.loc[keep[C.ID], C.TITLE].to_numpy()
        if C.TITLE in texts.columns
        else [None] * len(keep),
        C.RUN_DATE: run_date,
    }
    return pd.DataFrame({c: rows[c] for c in ENTRY_COLUMNS})


def _link_inputs(
    fps: DataFrame, docs: DataFrame, cfg: Config, looked: Lookup | None, prefixes: DataFrame | None
) -> tuple[DataFrame, DataFrame, DataFrame | None, DataFrame | None]:
    """(keyed, texts, titles, prefixes) of what is linked: the fingerprinted documents, and the index
    entries the batch touches (which have no prefixes)."""
    fingerprinted = fps.where(is_fingerprinted(F.col(C.STATUS)))
    keyed = fingerprinted.select(C.ID, C.FINGERPRINT, C.N_CHARS, C.TEXT_HASH)
    texts = _texts(docs)
    titles = (
        fingerprinted.where(F.col(C.TITLE_FINGERPRINT).isNotNull()).select(C.ID, C.TITLE_FINGERPRINT)
        if cfg.input.title_column
        else None
    )
    if looked is None:
        return keyed, texts, titles, prefixes
    # an id the index holds already is linked as the index's entry, with the index's text: the batch's
    # row for it (already_indexed) must not bring a second text, title or prefix for the same id
    batch_ids = keyed.select(C.ID)
    texts = texts.join(batch_ids, on=C.ID, how="left_semi")
    if prefixes is not None:
        prefixes = prefixes.join(batch_ids, on=C.ID, how="left_semi")
    touched = looked.touched
    keyed = keyed.unionByName(
        touched.select(C.ID, C.FINGERPRINT, C.N_CHARS, F.xxhash64(C.TEXT).alias(C.TEXT_HASH))
    )
    texts = texts.unionByName(touched.select(C.ID, C.TEXT))
    if titles is not None:
        titled = touched.where(F.col(C.TITLE_FINGERPRINT).isNotNull())
        titles = titles.unionByName(titled.select(C.ID, C.TITLE_FINGERPRINT))
    return keyed, texts, titles, prefixes


def _assemble_full(fps: DataFrame, linked: Linked, cfg: Config) -> DataFrame:
    return assign_clusters(
        fps,
        linked.assignments,
        representative=cfg.cluster.representative,
        extra=cfg.input.passthrough_columns,
    )


@dataclass(frozen=True)
class _Assembled:
    """A run's outputs but deduplicated/, and its totals."""

    documents: DataFrame  # persisted
    pairs: DataFrame
    clusters: DataFrame
    duplicate_ids: DataFrame  # id: the documents that are duplicates
    totals: RunTotals
    report: Callable[[dict[str, Any]], ReportData] | None = None  # the report's data, drawn on the driver
    members: pd.DataFrame | None = None  # the clustered documents, when clustered on the driver


def _assemble(
    fps: DataFrame,
    linked: Linked,
    looked: Lookup | None,
    at_hand: AtHand | None,
    cfg: Config,
    ctx: RunContext,
    status_counts: dict[str, int],
) -> _Assembled:
    """The outputs from the linking: on the driver for a full run whose components were labelled there
    and whose representatives need nothing but ids and lengths, else by Spark."""
    on_driver = linked.labelled is not None and cfg.cluster.representative in LOCAL_POLICIES
    if on_driver and looked is None:
        return _assemble_on_driver(fps, linked, at_hand, cfg, status_counts, ctx)
    if on_driver and looked is not None:
        return _assemble_incremental_on_driver(fps, linked, looked, at_hand, cfg, status_counts, ctx)
    if looked is None:
        documents, pairs = _assemble_full(fps, linked, cfg), linked.pairs
    else:
        documents, pairs = _assemble_incremental(fps, linked, looked, cfg, ctx)
        linked.stats["pairs_accepted"] = pairs.count()
    documents = ctx.persist(documents)
    totals = _document_totals(documents, status_counts, incremental=looked is not None)
    return _Assembled(documents, pairs, cluster_table(documents), duplicate_ids_of(documents), totals)


def _assemble_on_driver(
    fps: DataFrame,
    linked: Linked,
    at_hand: AtHand | None,
    cfg: Config,
    status_counts: dict[str, int],
    ctx: RunContext,
) -> _Assembled:
    """``_assemble_full`` from the components labelled on the driver (``core.assemble_local``): documents/
    is the fingerprints joined with a broadcast of the clustered documents, the rest is built here. A run
    linked on the driver gets its report's data from there too."""
    assert linked.labelled is not None
    nodes, labels = linked.labelled
    spark, id_type = fps.sparkSession, fps.schema[C.ID].dataType.simpleString()
    longest = cfg.cluster.representative == "longest_text"
    n_chars = _lengths(fps, nodes, at_hand, id_type) if longest else {}
    members = cluster_members(nodes, labels, n_chars, representative=cfg.cluster.representative)
    members_frame, clusters = _member_frames(spark, members, members, id_type)
    documents = attach_clusters(fps, members_frame, extra=cfg.input.passthrough_columns)
    duplicates = members.loc[members[C.CLUSTER_ID] != members[C.ID], [C.ID]]
    duplicate_ids = F.broadcast(driver_frame(spark, duplicates, f"{C.ID} {id_type}"))
    counted = cluster_totals(members, sum(status_counts.values()))
    totals = RunTotals(
        input_rows=sum(status_counts.values()),
        fingerprinted=sum(status_counts[s] for s in FINGERPRINTED),
        duplicates=counted.duplicates,
        clusters=counted.clusters,
        largest_cluster=counted.largest,
        matched_index=0,
    )
    id_kind = KINDS.get(id_type)
    report = None
    if id_kind is not None and linked.local is not None and at_hand is not None:
        report = partial(
            local_report, members=members, pairs=linked.local.pairs, texts=at_hand.texts, id_kind=id_kind
        )
    return _Assembled(ctx.persist(documents), linked.pairs, clusters, duplicate_ids, totals, report, members)


def _assemble_incremental_on_driver(
    fps: DataFrame,
    linked: Linked,
    looked: Lookup,
    at_hand: AtHand | None,
    cfg: Config,
    status_counts: dict[str, int],
    ctx: RunContext,
) -> _Assembled:
    """``_assemble_incremental`` from the components labelled on the driver: the batch's components and
    index matches (``core.assemble_local.batch_components``), clusters, pairs and totals are built here;
    documents/ is the fingerprints joined with broadcasts of them."""
    assert linked.labelled is not None
    nodes, labels = linked.labelled
    spark, id_type = fps.sparkSession, fps.schema[C.ID].dataType.simpleString()
    dates = _touched_dates(looked)
    comps = local_batch_components(nodes, labels, dates)
    batch_nodes, batch_labels = comps[C.NODE].to_numpy(), comps[C.COMPONENT].to_numpy()
    longest = cfg.cluster.representative == "longest_text"
    n_chars = _lengths(fps, batch_nodes, at_hand, id_type) if longest else {}
    members = cluster_members(batch_nodes, batch_labels, n_chars, representative=cfg.cluster.representative)
    # a batch document whose component holds no other batch document is a cluster of one (it matched the
    # index only): it has no clusters/ row
    clustered = members[members[C.CLUSTER_SIZE] > 1]
    members_frame, clusters = _member_frames(spark, members, clustered, id_type)
    comps_schema = f"{C.NODE} {id_type}, {C.COMPONENT} {id_type}, {C.MATCHED_INDEX_ID} {id_type}"
    extra = cfg.input.passthrough_columns
    documents = attach_clusters(fps, members_frame, extra=extra)
    documents = ctx.persist(
        with_index_matches(documents, F.broadcast(driver_frame(spark, comps, comps_schema)), extra=extra)
    )
    pairs, n_pairs = _batch_pairs(linked, looked, dates, id_type, ctx)
    linked.stats["pairs_accepted"] = n_pairs
    n_rows = sum(status_counts.values())
    counted, matched = matched_totals(members, comps, n_rows, status_counts[ALREADY_INDEXED])
    totals = RunTotals(
        input_rows=n_rows,
        fingerprinted=sum(status_counts[s] for s in FINGERPRINTED),
        duplicates=counted.duplicates,
        clusters=counted.clusters,
        largest_cluster=counted.largest,
        matched_index=matched,
    )
    return _Assembled(documents, pairs, clusters, duplicate_ids_of(documents), totals)


def _member_frames(
    spark: SparkSession, members: pd.DataFrame, clustered: pd.DataFrame, id_type: str
) -> tuple[DataFrame, DataFrame]:
    """(``cluster_members``' rows as a broadcast frame, clusters/ from the ``clustered`` ones among them)."""
    schema = f"{C.ID} {id_type}, {C.CLUSTER_ID} {id_type}, {C.CLUSTER_SIZE} long"
    clusters_schema = f"{C.CLUSTER_ID} {id_type}, {C.SIZE} long, {C.MEMBER_IDS} array<{id_type}>"
    return (
        F.broadcast(driver_frame(spark, members, schema)),
        driver_frame(spark, cluster_rows(clustered), clusters_schema),
    )


def _touched_dates(looked: Lookup) -> dict[object, str]:
    """The run date of each index entry the batch touched (no job when it touched none)."""
    if not looked.stats["touched_entries"]:
        return {}
    if looked.local is not None:
        held = looked.local.touched
    else:
        held = looked.touched.select(C.ID, C.RUN_DATE).toPandas()
    return dict(zip(held[C.ID].tolist(), held[C.RUN_DATE].tolist(), strict=True))


def _batch_pairs(
    linked: Linked, looked: Lookup, dates: Mapping[object, str], id_type: str, ctx: RunContext
) -> tuple[DataFrame, int]:
    """(pairs/ of an incremental run, their number): the pairs with a batch document (``drop_index_pairs``),
    chosen on the driver when the linking ran there."""
    if linked.local is None:
        pairs = ctx.persist(drop_index_pairs(linked.pairs, looked.touched.select(C.ID)))
        return pairs, pairs.count()
    kept = [p for p in linked.local.pairs if p[0] not in dates or p[1] not in dates]
    return pairs_frame(linked.pairs.sparkSession, id_type, kept, linked.local.nodes.dtype), len(kept)


def _lengths(fps: DataFrame, nodes: np.ndarray, at_hand: AtHand | None, id_type: str) -> dict[object, int]:
    """The normalized lengths of the graph's documents by id: those a driver fingerprinting holds, else
    collected for these documents only."""
    if at_hand is not None:
        held = at_hand.keyed
    else:
        wanted = F.broadcast(driver_frame(fps.sparkSession, pd.DataFrame({C.ID: nodes}), f"{C.ID} {id_type}"))
        held = fps.join(wanted, on=C.ID, how="left_semi").select(C.ID, C.N_CHARS).toPandas()
    return dict(zip(held[C.ID].tolist(), held[C.N_CHARS].tolist(), strict=True))


def _assemble_incremental(
    fps: DataFrame, linked: Linked, looked: Lookup, cfg: Config, ctx: RunContext
) -> tuple[DataFrame, DataFrame]:
    """(documents with ``matched_index_id``, the pairs that involve a batch document)."""
    batch_ids = fps.where(is_fingerprinted(F.col(C.STATUS))).select(C.ID)
    comps = ctx.persist(
        batch_components(linked.assignments, batch_ids, looked.touched.select(C.ID, C.RUN_DATE))
    )
    documents = assign_clusters(
        fps,
        comps.select(C.NODE, C.COMPONENT),
        representative=cfg.cluster.representative,
        extra=cfg.input.passthrough_columns,
    )
    documents = with_index_matches(documents, comps, extra=cfg.input.passthrough_columns)
    pairs = ctx.persist(drop_index_pairs(linked.pairs, looked.touched.select(C.ID)))
    return documents, pairs


@dataclass(frozen=True)
class RunTotals:
    """The run's headline numbers, typed: what the index's run record and the monitor use."""

    input_rows: int
    fingerprinted: int
    duplicates: int
    clusters: int
    largest_cluster: int
    matched_index: int  # batch documents whose cluster holds an indexed document (incremental runs)

    @property
    def dedup_rate(self) -> float:
        return round(self.duplicates / self.input_rows, 6) if self.input_rows else 0.0


def _document_totals(documents: DataFrame, status_counts: dict[str, int], *, incremental: bool) -> RunTotals:
    matched = F.count(F.col(C.MATCHED_INDEX_ID)) if incremental else F.lit(0)
    multi = F.col(C.CLUSTER_SIZE) > 1
    # a full run's cluster has exactly one member that is no duplicate, its representative: counting those
    # needs no distinct (a shuffle); an incremental run's cluster may be represented by an indexed document
    clusters = (
        F.count_distinct(F.when(multi, F.col(C.CLUSTER_ID)))
        if incremental
        else F.coalesce(F.sum((multi & ~F.col(C.IS_DUPLICATE)).cast("long")), F.lit(0))
    )
    row = documents.agg(
        F.coalesce(F.sum(F.col(C.IS_DUPLICATE).cast("long")), F.lit(0)).alias("duplicates"),
        clusters.alias("clusters"),
        F.coalesce(F.max(C.CLUSTER_SIZE), F.lit(0)).alias("largest"),
        matched.alias("matched"),
    ).first()
    assert row is not None
    return RunTotals(
        input_rows=sum(status_counts.values()),
        fingerprinted=sum(status_counts[s] for s in FINGERPRINTED),
        duplicates=int(row["duplicates"]),
        clusters=int(row["clusters"]),
        largest_cluster=int(row["largest"]),
        matched_index=int(row["matched"]),
    )


def _stats(
    status_counts: dict[str, int],
    link_stats: dict[str, Any],
    totals: RunTotals,
    looked: Lookup | None,
    *,
    fingerprinted_on: str,
) -> dict[str, Any]:
    """summary.json's statistics (its documented keys, in their order)."""
    stats = {
        "input_rows": totals.input_rows,
        "fingerprinted": totals.fingerprinted,
        "fingerprinted_on": fingerprinted_on,
        "status": status_counts,
        **{
            k: v
            for k, v in link_stats.items()
            if k not in ("components_iterations", "components_method", "bands")
        },
        "clusters": totals.clusters,
        "largest_cluster": totals.largest_cluster,
        "duplicates": totals.duplicates,
        "dedup_rate": totals.dedup_rate,
        "components_iterations": link_stats["components_iterations"],
        "components_method": link_stats["components_method"],
        "bands": link_stats["bands"],
    }
    if looked is not None:
        stats["index"] = {**looked.stats, "batch_documents_matched": totals.matched_index}
    return stats


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("simhash_spark", "pyspark", "jieba", "pyarrow", "pandas", "numpy", "xxhash", "mmh3"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


_SKIPPED_LISTED = 100  # skipped files named in summary.json; the count is always exact


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
        "skipped_files": {"count": len(skipped), "files": skipped[:_SKIPPED_LISTED]},
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
            **_driver_memory(spark),
        },
        "versions": _versions(),
    }


def _driver_memory(spark: SparkSession) -> dict[str, str | None]:
    """The driver heap and who chose it: the job for a local run (simhash_spark.session), else the
    launcher (spark-submit, --spark-conf, Spark's default of 1g when unset)."""
    from simhash_spark.session import DRIVER_MEMORY, DRIVER_MEMORY_CHOSEN, SPARK_DEFAULT_DRIVER_MEMORY

    try:
        memory = spark.conf.get(DRIVER_MEMORY, None)
        chosen = spark.conf.get(DRIVER_MEMORY_CHOSEN, None)
    except Exception:  # Spark Connect servers may refuse to show static settings
        return {"driver_memory": None, "driver_memory_from": None}
    if memory is None:
        return {"driver_memory": SPARK_DEFAULT_DRIVER_MEMORY, "driver_memory_from": "Spark's default"}
    return {"driver_memory": memory, "driver_memory_from": chosen or "the launcher"}


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
    publisher = Publisher(
        out_fs, output, overwrite=cfg.output.overwrite, timeout_s=cfg.writers.lease_timeout_seconds
    )
    publisher.prepare()
    index = None
    try:
        if index_path:
            assert run_date is not None
            index = IndexSession.open(spark, cfg, path=index_path, run_date=run_date, rebuild=rebuild_index)
        raw, skipped = open_input(spark, path=input_path, table=input_table)
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
    try:
        tables.write(spark, output)
    except Exception as e:  # everything checkable was checked before any work; this is the catalog failing
        raise TablesNotWritten(
            f"output {output} was published{' and the index committed' if index is not None else ''}, but "
            f"its catalog tables were not written: {essence(e)}. Rerun the same command to write them"
        ) from e
    return summ


def _report_rows(stats: dict[str, Any]) -> int:
    """How many rows the report's data takes on the driver: the pairs, and the clustered documents (every
    duplicate, and at most one more per cluster). The driver takes them up to ``cluster.local_max_edges``,
    as many as the graph it clusters itself."""
    return int(stats["pairs_accepted"]) + int(stats["duplicates"]) + int(stats["clusters"])


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
            result.stats["monitor"] = index.monitor(result.totals.dedup_rate, cfg.monitor)
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
    snap = index.commit(result.index_entries, id_type=id_type, record=record, rows=result.index_rows)
    assert index.committed is not None
    result.stats["index"].update(
        appended=snap.docs_rows,
        snapshot=snap.id,
        version_after=index.committed.version,
        entries_after=index.committed.entries,
    )
