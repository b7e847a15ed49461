"""Linking fingerprints into duplicate pairs and clusters, in named steps: identical groups → band design →
candidates (band join, or spanning forests for hot buckets) → accepted pairs (the pair rule) → clusters
(connected components). Works on (id, fingerprint, n_chars) alone, so fingerprints computed elsewhere can
be linked too (``bench/scale.py`` does). Takes its own parameters (``LinkParams``), never the whole
configuration."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from simhash_spark import columns as C
from simhash_spark.config import BandsConfig, Config
from simhash_spark.context import RunContext
from simhash_spark.core.bands import BandScheme, parse_scheme
from simhash_spark.core.bucket_pairs import rank_buckets
from simhash_spark.core.link_local import (
    Documents,
    LinkSettings,
    LocalLinked,
    PairRow,
    choose_design_local,
    find_candidates,
    link_local,
)
from simhash_spark.core.rules import PairRule
from simhash_spark.core.verify import BY_TITLE, VERIFIED, ThresholdPolicy, VerifyOptions
from simhash_spark.transforms.candidates import (
    band_join,
    collect_fingerprints,
    hamming_distance,
    in_task_band_join,
    in_task_parallelism,
    partitioned_band_keys,
)
from simhash_spark.transforms.components import connected_components
from simhash_spark.transforms.designs import choose_design, design_rules
from simhash_spark.transforms.driver_frames import driver_frame
from simhash_spark.transforms.hot_buckets import hot_bucket_forest, large_buckets
from simhash_spark.transforms.identical import (
    GROUP_SIZE,
    cross_group_pair_count,
    expand_pairs,
    fingerprint_groups,
    group_members,
    star_edges,
    within_group_pairs,
)
from simhash_spark.transforms.verify import accept_pairs, drop_unreachable

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LinkParams:
    """What linking needs, resolved once from the configuration."""

    rule: PairRule  # k per pair, the text check, the title rule "and"
    bands: BandsConfig
    pairs_max_group: int  # identical groups larger than this are written as stars
    max_iterations: int  # connected components
    local_max_edges: int  # a graph of at most this many edges is clustered on the driver; as many
    # candidate pairs have their ids broadcast to the text check
    title_rule: str | None = None  # "and", "or", or None without titles
    title_max_distance: int = 0
    local_max_documents: int = 0  # at most this many documents are linked on the driver (core.link_local)

    @classmethod
    def from_config(cls, cfg: Config, *, titled: bool) -> LinkParams:
        title_rule = cfg.title.rule if titled else None
        and_distance = cfg.title.max_distance if title_rule == "and" else None
        return cls(
            rule=PairRule(cfg.policy, cfg.verify, cfg.normalize, and_distance, cfg.short_texts),
            bands=cfg.bands,
            pairs_max_group=cfg.output.pairs_max_group,
            max_iterations=cfg.cluster.max_iterations,
            local_max_edges=cfg.cluster.local_max_edges,
            title_rule=title_rule,
            title_max_distance=cfg.title.max_distance,
            local_max_documents=cfg.cluster.local_max_documents,
        )

    def for_titles(self) -> LinkParams:
        """Title rule "or": title fingerprints within ``title_max_distance``, no text check, auto bands."""
        rule = PairRule(
            ThresholdPolicy(self.title_max_distance), VerifyOptions(measure="none"), self.rule.norm
        )
        bands = dataclasses.replace(self.bands, scheme="auto")
        return LinkParams(rule, bands, self.pairs_max_group, self.max_iterations, self.local_max_edges)


@dataclass(frozen=True)
class AtHand:
    """What a caller that fingerprinted on the driver holds already, so the driver linking reads nothing
    back from Spark."""

    keyed: pd.DataFrame  # the rows of ``link``'s keyed: id, fingerprint, n_chars, text_hash
    titles: pd.DataFrame | None  # the rows of its titles: id, title_fingerprint (non-null)
    texts: Callable[[set[Any]], dict[Any, str]]  # the texts of the given ids


@dataclass
class Linked:
    pairs: DataFrame  # id_a < id_b, distance, similarity, reason (pairs/)
    assignments: DataFrame  # node, component (nodes with an edge only)
    stats: dict[str, Any]
    local: LocalLinked | None = None  # the same, when linked on the driver
    # (nodes, labels) of ``assignments``, when the components were labelled on the driver
    labelled: tuple[np.ndarray, np.ndarray] | None = None


@dataclass
class _Found:
    pairs: DataFrame  # id_a < id_b, distance, similarity, reason
    edges: DataFrame  # src, dst
    n_pairs: int
    stats: dict[str, Any]


def link(
    keyed: DataFrame,
    params: LinkParams,
    ctx: RunContext,
    *,
    texts: DataFrame | None = None,
    titles: DataFrame | None = None,
    n_docs: int | None = None,
    at_hand: AtHand | None = None,
    prefixes: DataFrame | None = None,
) -> Linked:
    """In: ``keyed`` (``id``, ``fingerprint``, ``n_chars``, optionally ``text_hash``: xxhash64 of the text,
    which spares a join with ``texts``) of the fingerprinted documents; when the rule checks texts, their
    ``texts`` (``id``, ``text``); with a title rule, the title fingerprints ``titles`` (``id``,
    ``title_fingerprint``, non-null). Stages "candidates", "verify", "titles" and "clusters".

    Title rule "and": a pair of documents that both have a title fingerprint must also have titles within
    ``title_max_distance`` bits. "or": documents whose titles are that close are duplicates too (found by
    a linking of their own, reason "title").

    ``n_docs``: the number of rows of ``keyed`` when known; at most ``local_max_documents`` of them are
    linked on the driver (``core.link_local``: the same pairs, clusters and statistics), which takes the
    fingerprints and texts from ``at_hand`` when the caller holds them. ``prefixes`` (``id``,
    ``check_prefix``): the prefixes the fingerprint pass emitted for the text check
    (``transforms.verify.drop_unreachable``)."""
    if _on_driver(keyed, params, n_docs):
        if at_hand is not None:
            held = partial(_documents, at_hand.keyed, at_hand.titles, params.rule)
            return _link_on_driver(keyed, params, ctx, documents=held, fetch=at_hand.texts)
        collected = partial(_collect_documents, keyed, titles, params.rule)
        return _link_on_driver(keyed, params, ctx, documents=collected, fetch=_texts_of(texts))
    return _link_in_spark(keyed, params, ctx, texts=texts, titles=titles, prefixes=prefixes)


def _link_in_spark(
    keyed: DataFrame,
    params: LinkParams,
    ctx: RunContext,
    *,
    texts: DataFrame | None,
    titles: DataFrame | None,
    prefixes: DataFrame | None,
) -> Linked:
    and_titles = titles if params.title_rule == "and" else None
    found = _find(keyed, params, ctx, texts=texts, titles=and_titles, prefixes=prefixes)
    if params.title_rule == "or":
        assert titles is not None
        with ctx.stage("titles"):
            found = _add_title_pairs(found, keyed, titles, params, ctx)
    with ctx.stage("clusters"):
        comps = connected_components(
            found.edges, max_iterations=params.max_iterations, local_max_edges=params.local_max_edges
        )
    _finish_stats(found.stats, params, found.n_pairs, iterations=comps.iterations, method=comps.method)
    return Linked(found.pairs, comps.assignments, found.stats, labelled=comps.labelled)


def _finish_stats(
    stats: dict[str, Any], params: LinkParams, n_pairs: int, *, iterations: int, method: str
) -> None:
    """The statistics both linking paths add last: the title rule "and", pairs accepted, components."""
    if params.title_rule == "and":
        stats["title"] = {"rule": "and", "max_distance": params.title_max_distance}
    stats["pairs_accepted"] = n_pairs
    stats["components_iterations"] = iterations
    stats["components_method"] = method


def _add_title_pairs(
    body: _Found, keyed: DataFrame, titles: DataFrame, params: LinkParams, ctx: RunContext
) -> _Found:
    """Title rule "or": the pairs whose titles are close, added to the body's (reason "title")."""
    title_keyed = titles.select(
        C.ID, F.col(C.TITLE_FINGERPRINT).alias(C.FINGERPRINT), F.lit(0).alias(C.N_CHARS)
    )
    by_title = _find(title_keyed, params.for_titles(), ctx.untimed(), texts=None, titles=None)
    fa = keyed.select(F.col(C.ID).alias("_fa_id"), F.col(C.FINGERPRINT).alias("_fa"))
    fb = keyed.select(F.col(C.ID).alias("_fb_id"), F.col(C.FINGERPRINT).alias("_fb"))
    only_title = ctx.persist(
        by_title.pairs.join(body.pairs.select(C.ID_A, C.ID_B), on=[C.ID_A, C.ID_B], how="left_anti")
        .join(fa, on=F.col(C.ID_A) == F.col("_fa_id"), how="left")
        .join(fb, on=F.col(C.ID_B) == F.col("_fb_id"), how="left")
        .select(
            C.ID_A,
            C.ID_B,
            hamming_distance(F.col("_fa"), F.col("_fb")).cast("int").alias(C.DISTANCE),
            F.lit(None).cast("double").alias(C.SIMILARITY),
            F.lit(BY_TITLE).alias(C.REASON),
        )
    )
    n_title = only_title.count()
    stats = {
        **body.stats,
        "pairs_complete": body.stats["pairs_complete"] and by_title.stats["pairs_complete"],
        "title": {
            "rule": "or",
            "max_distance": params.title_max_distance,
            "title_pairs": by_title.n_pairs,
            "pairs_added_by_title": n_title,
            "bands": by_title.stats["bands"]["scheme"],
        },
    }
    pairs = body.pairs.unionByName(only_title)
    return _Found(pairs, body.edges.unionByName(by_title.edges), body.n_pairs + n_title, stats)


# --- the steps of one linking -------------------------------------------------------------------------


@dataclass
class _Identical:
    """Documents grouped by fingerprint (and, with a text check, by text): one representative each."""

    groups: DataFrame  # id (the representative), fingerprint, group size
    members: DataFrame
    totals: dict[str, Any]  # distinct, fingerprints, groups, shared, largest, cut, within

    @property
    def reps(self) -> DataFrame:
        return self.groups.select(C.ID, C.FINGERPRINT)


@dataclass
class _Design:
    scheme: BandScheme
    masks: list[int]
    report: dict[str, Any]
    hot: DataFrame | None  # band, band_key of the buckets over the limit (None: linked on the driver)
    n_hot: int
    largest_buckets: list[dict[str, Any]]
    join: str  # where the band join ran: "in_task", "shuffled" or "driver"


def _identical(keyed: DataFrame, texts: DataFrame | None, limit: int, ctx: RunContext) -> _Identical:
    """Identical groups of ``keyed`` (``id``, ``fingerprint``), split by text when ``texts`` is given:
    only (id, hash of the text) reaches the grouping."""
    if texts is None:
        keyed = keyed.select(C.ID, C.FINGERPRINT)
    elif C.TEXT_HASH in keyed.columns:  # hashed where the texts were read
        keyed = keyed.select(C.ID, C.FINGERPRINT, C.TEXT_HASH)
    else:
        keyed = keyed.join(texts.select(C.ID, F.xxhash64(C.TEXT).alias(C.TEXT_HASH)), on=C.ID, how="inner")
    groups = ctx.persist(fingerprint_groups(keyed))
    members = ctx.persist(group_members(keyed, groups))
    # per fingerprint first (a fingerprint splits into several groups under a text check), then over all:
    # one action for every total
    size = F.col(GROUP_SIZE)
    per_fp = groups.groupBy(C.FINGERPRINT).agg(
        F.count(F.lit(1)).alias("g"),
        F.sum(size).alias("n"),
        F.sum((size > 1).cast("long")).alias("multi"),
        F.max(size).alias("largest"),
        F.sum((size > limit).cast("long")).alias("cut"),
        F.sum(within_group_pairs(size, limit)).alias("within"),
    )
    row = per_fp.agg(
        F.coalesce(F.sum("g"), F.lit(0)).alias("distinct"),
        F.count(F.lit(1)).alias("fingerprints"),
        F.coalesce(F.sum("multi"), F.lit(0)).alias("groups"),
        F.coalesce(F.sum((F.col("n") > 1).cast("long")), F.lit(0)).alias("shared"),
        F.coalesce(F.max("largest"), F.lit(0)).alias("largest"),
        F.coalesce(F.sum("cut"), F.lit(0)).alias("cut"),
        F.coalesce(F.sum("within"), F.lit(0)).alias("within"),
    ).first()
    assert row is not None
    totals = row.asDict()
    return _Identical(groups, members, totals)


def _scheme(ident: _Identical, k: int, bands: BandsConfig) -> tuple[BandScheme, dict[str, Any]]:
    """The band design for the shuffled join (``auto``: chosen from a sample counted by Spark)."""
    scheme = parse_scheme(bands.scheme)
    if not scheme.auto:
        return scheme, {}
    n_distinct = int(ident.totals["distinct"])
    scheme, report = choose_design(ident.reps, n=n_distinct, k=k, rules=design_rules(bands, in_task=False))
    log.info("bands.scheme=auto chose %s (%s)", scheme.spec, report["reason"])
    return scheme, report


def _shuffled_join(
    ident: _Identical, scheme: BandScheme, report: dict[str, Any], k: int, bands: BandsConfig, ctx: RunContext
) -> tuple[_Design, DataFrame]:
    """Hot buckets found on a sample and counted exactly, then the band join over shuffled band keys."""
    masks = scheme.table_masks(k)
    n_distinct = int(ident.totals["distinct"])
    fraction = min(1.0, bands.auto_sample_rows / n_distinct) if n_distinct else 1.0
    sizes = ctx.persist(
        large_buckets(ident.reps, masks=masks, fraction=fraction, limit=bands.hot_bucket_limit)
    )
    # sizes holds the sampled candidates for hot buckets only (a few hundred rows): one collect serves
    # the count and the top ten
    largest, hot_keys = rank_buckets(
        [
            (r[C.BUCKET_SIZE], r[C.BAND], r[C.KEY])
            for r in sizes.select(C.BAND, C.KEY, C.BUCKET_SIZE).collect()
        ],
        bands.hot_bucket_limit,
    )
    hot = sizes.where(F.col(C.BUCKET_SIZE) > bands.hot_bucket_limit)
    design = _Design(scheme, masks, report, hot, len(hot_keys), largest, "shuffled")
    keys = partitioned_band_keys(ident.reps, masks=masks, skip=hot if hot_keys else None)
    return design, ctx.persist(band_join(keys, masks=masks, max_distance=k))


def _in_task_join(
    ident: _Identical, k: int, bands: BandsConfig, ctx: RunContext, *, tasks: int
) -> tuple[_Design, DataFrame]:
    """The band join with whole tables sorted inside tasks. The representatives are collected once: the
    design is chosen on the driver from them (``auto``), bucket sizes come out of the join, exact."""
    spark = ident.reps.sparkSession
    reps = collect_fingerprints(ident.reps)
    scheme, report = choose_design_local(
        reps.fingerprints, k, bands.scheme, design_rules(bands, in_task=True)
    )
    if report:
        log.info("bands.scheme=auto chose %s (%s)", scheme.spec, report["reason"])
    masks = scheme.table_masks(k)
    joined = ctx.persist(
        in_task_band_join(
            spark,
            reps,
            masks=masks,
            max_distance=k,
            hot_bucket_limit=bands.hot_bucket_limit,
            tasks=tasks,
        )
    )
    is_bucket = F.col(C.BUCKET_SIZE).isNotNull()
    largest, hot_keys = rank_buckets(
        [(r[C.BUCKET_SIZE], r[C.BAND], r[C.KEY]) for r in joined.where(is_bucket).collect()],
        bands.hot_bucket_limit,
    )
    hot = spark.createDataFrame(hot_keys, f"{C.BAND} int, {C.KEY} bigint")
    design = _Design(scheme, masks, report, hot, len(hot_keys), largest, "in_task")
    return design, joined.where(~is_bucket).select(C.ID_A, C.ID_B, C.DISTANCE)


def _accepted(
    candidates: DataFrame,
    ident: _Identical,
    design: _Design,
    rule: PairRule,
    ctx: RunContext,
    *,
    lengths: DataFrame,
    texts: DataFrame | None,
    titles: DataFrame | None,
    prefixes: DataFrame | None,
    n_candidates: int,
    few_candidates: bool,
) -> tuple[DataFrame, int, int | None]:
    """The representatives' pairs the rule accepts (band-join candidates and hot-bucket forests), the
    number of forest edges, and how many of the ``n_candidates`` candidates the prefixes rejected (None
    without them). ``few_candidates``: few enough for the driver to broadcast their ids. With
    ``prefixes``, the candidates whose prefixes show they cannot pass the check are dropped first, in joins
    of the prefixes alone, so only the texts of the others are joined."""
    rejected = None
    if prefixes is not None and rule.verify.enabled:
        candidates = ctx.persist(
            drop_unreachable(candidates, rule=rule, prefixes=prefixes, few=few_candidates)
        )
        rejected = n_candidates - candidates.count()
    rep_pairs = accept_pairs(
        candidates, rule=rule, lengths=lengths, texts=texts, titles=titles, few=few_candidates
    )
    forest_edges = 0
    if design.n_hot and design.hot is not None:
        members_in = ident.reps.join(lengths, on=C.ID, how="inner")
        if titles is not None:
            members_in = members_in.join(titles.select(C.ID, C.TITLE_FINGERPRINT), on=C.ID, how="left")
        forest = ctx.persist(
            hot_bucket_forest(members_in, design.hot, masks=design.masks, rule=rule, texts=texts)
        )
        forest_edges = forest.count()
        rep_pairs = rep_pairs.unionByName(forest).dropDuplicates([C.ID_A, C.ID_B])
    return ctx.persist(rep_pairs), forest_edges, rejected


def _find(
    keyed: DataFrame,
    params: LinkParams,
    ctx: RunContext,
    *,
    texts: DataFrame | None,
    titles: DataFrame | None,
    prefixes: DataFrame | None = None,
) -> _Found:
    """Duplicate pairs among ``keyed`` (one fingerprint per document), with the statistics of each step."""
    rule, k, limit = params.rule, params.rule.largest_k, params.pairs_max_group
    checking = rule.verify.enabled
    if checking and texts is None:
        raise ValueError("verify.measure needs the documents' texts")
    lengths = keyed.select(C.ID, C.N_CHARS)
    with ctx.stage("candidates"):
        ident = _identical(keyed, texts if checking else None, limit, ctx)
        n_distinct = int(ident.totals["distinct"])
        tasks = in_task_parallelism(keyed.sparkSession, n_distinct)
        if tasks is not None and n_distinct <= params.bands.in_task_max_fingerprints:
            design, candidates = _in_task_join(ident, k, params.bands, ctx, tasks=tasks)
        else:
            scheme, report = _scheme(ident, k, params.bands)
            design, candidates = _shuffled_join(ident, scheme, report, k, params.bands, ctx)
        within_k = candidates.count()
    with ctx.stage("verify"):
        rep_pairs, forest_edges, prefix_rejected = _accepted(
            candidates,
            ident,
            design,
            rule,
            ctx,
            lengths=lengths,
            texts=texts,
            titles=titles,
            prefixes=prefixes,
            n_candidates=within_k,
            few_candidates=within_k <= params.local_max_edges,
        )
        by_reason = {r[C.REASON]: int(r["count"]) for r in rep_pairs.groupBy(C.REASON).count().collect()}
        pairs = expand_pairs(rep_pairs, ident.members, max_group=limit)
        n_pairs = int(ident.totals["within"]) + cross_group_pair_count(
            rep_pairs, ident.groups, max_group=limit
        )
    edges = rep_pairs.select(F.col(C.ID_A).alias(C.SRC), F.col(C.ID_B).alias(C.DST)).unionByName(
        star_edges(ident.members)
    )
    stats = _stats(ident.totals, design, rule, k, within_k, by_reason, n_pairs, forest_edges)
    if prefix_rejected is not None:  # the check read only the pairs whose prefixes meet
        stats["verify"].update(prefix_filter=True, prefix_rejected=prefix_rejected)
    return _Found(pairs, edges, n_pairs, stats)


def _stats(
    t: Mapping[str, Any],
    design: _Design,
    rule: PairRule,
    k: int,
    within_k: int,
    by_reason: dict[str, int],
    n_pairs: int,
    forest_edges: int,
) -> dict[str, Any]:
    return {
        "distinct_fingerprints": int(t["fingerprints"]),
        # rows of the band join: one per distinct fingerprint (and, with a text check, distinct text)
        "representatives": int(t["distinct"]),
        # fingerprints that two or more documents share, whatever their texts
        "same_fingerprint_groups": int(t["shared"]),
        # groups of two or more identical documents: same fingerprint and, with a text check, same text
        "identical_groups": int(t["groups"]),
        "largest_identical_group": int(t["largest"]),
        "candidate_pairs_within_k": within_k,
        "representative_pairs_accepted": sum(by_reason.values()),
        "representative_pairs_by_reason": by_reason,
        "pairs_accepted": n_pairs,
        "pairs_complete": int(t["cut"]) == 0 and design.n_hot == 0,
        "hot_buckets": design.n_hot,
        "hot_bucket_forest_edges": forest_edges,
        "largest_buckets": design.largest_buckets,
        "groups_written_as_stars": int(t["cut"]),
        "verify": {
            "measure": rule.verify.measure,
            "min_similarity": rule.verify.min_similarity if rule.verify.enabled else None,
            "passed": by_reason.get(VERIFIED, 0),
        },
        "bands": {
            "scheme": design.scheme.spec,
            "tables": design.scheme.n_tables(k),
            "max_distance": k,
            "exact": design.scheme.exact,
            "recall_at_k": round(design.scheme.recall(k), 6),
            "join": design.join,
            **({"auto": design.report} if design.report else {}),
        },
    }


# --- the same linking on the driver, for small inputs -------------------------------------------------


def _on_driver(keyed: DataFrame, params: LinkParams, n_docs: int | None) -> bool:
    """Small enough for the driver, and every input ``core.link_local`` needs is at hand: the text hash
    under a text check, no title rule "or" (a second linking of its own), and few enough documents that
    the Spark path's design counts every fingerprint too (``bands.auto_sample_rows``)."""
    limit = min(params.local_max_documents, params.bands.auto_sample_rows)
    return (
        n_docs is not None
        and n_docs <= limit
        and params.title_rule != "or"
        and (not params.rule.verify.enabled or C.TEXT_HASH in keyed.columns)
    )


def _texts_of(texts: DataFrame | None) -> Callable[[set[Any]], dict[Any, str]]:
    """A lookup of the texts of a few ids: one broadcast join, run only when the text check needs it."""

    def fetch(ids: set[Any]) -> dict[Any, str]:
        if not ids or texts is None:
            return {}
        id_type = texts.schema[C.ID].dataType
        want = texts.sparkSession.createDataFrame(
            [(i,) for i in sorted(ids)], T.StructType([T.StructField(C.ID, id_type, False)])
        )
        got: pd.DataFrame = (
            texts.join(F.broadcast(want), on=C.ID, how="inner").select(C.ID, C.TEXT).toPandas()
        )
        return dict(zip(got[C.ID].tolist(), got[C.TEXT].tolist(), strict=True))

    return fetch


def _collect_documents(keyed: DataFrame, titles: DataFrame | None, rule: PairRule) -> Documents:
    cols = [C.ID, C.FINGERPRINT, C.N_CHARS] + ([C.TEXT_HASH] if rule.verify.enabled else [])
    title_rows = None
    if rule.title_max_distance is not None and titles is not None:
        title_rows = titles.select(C.ID, C.TITLE_FINGERPRINT).toPandas()
    return _documents(keyed.select(*cols).toPandas(), title_rows, rule)


def _documents(pdf: pd.DataFrame, titles: pd.DataFrame | None, rule: PairRule) -> Documents:
    """``core.link_local``'s documents from the rows of ``keyed`` and ``titles``."""
    title_map: dict[Any, int] = {}
    if rule.title_max_distance is not None and titles is not None:
        title_map = dict(
            zip(titles[C.ID].tolist(), (int(v) for v in titles[C.TITLE_FINGERPRINT]), strict=True)
        )
    return Documents(
        ids=pdf[C.ID].to_numpy(),
        fingerprints=pdf[C.FINGERPRINT].to_numpy(dtype=np.int64),
        n_chars=pdf[C.N_CHARS].to_numpy(dtype=np.int64),
        text_hash=pdf[C.TEXT_HASH].to_numpy(dtype=np.int64) if rule.verify.enabled else None,
        titles=title_map,
    )


def pairs_frame(spark: SparkSession, id_type: str, rows: list[PairRow], dtype: np.dtype) -> DataFrame:
    """pairs/ rows of a driver-side linking (``LocalLinked.pairs``, ids of numpy ``dtype``) as a
    DataFrame, sent through Arrow (no Python worker has to unpickle rows)."""
    pairs = pd.DataFrame(
        {
            C.ID_A: pd.Series([r[0] for r in rows], dtype=dtype),
            C.ID_B: pd.Series([r[1] for r in rows], dtype=dtype),
            C.DISTANCE: pd.Series([r[2] for r in rows], dtype="int32"),
            C.SIMILARITY: pd.Series([r[3] for r in rows], dtype=object),  # None stays null (not NaN)
            C.REASON: pd.Series([r[4] for r in rows], dtype=object),
        }
    )
    schema = (
        f"{C.ID_A} {id_type}, {C.ID_B} {id_type}, {C.DISTANCE} int, {C.SIMILARITY} double, {C.REASON} string"
    )
    return driver_frame(spark, pairs, schema)


def _frames(keyed: DataFrame, local: LocalLinked) -> tuple[DataFrame, DataFrame]:
    """(pairs, assignments) of a driver-side linking as DataFrames."""
    spark, id_type = keyed.sparkSession, keyed.schema[C.ID].dataType.simpleString()
    assignments = pd.DataFrame({C.NODE: local.nodes, C.COMPONENT: local.labels})
    # at most cluster.local_max_documents assignments: broadcast wherever joined (the pairs, mostly written
    # as they are, are left to Spark's size estimate: a hint on a frame never joined draws a warning)
    return (
        pairs_frame(spark, id_type, local.pairs, local.nodes.dtype),
        F.broadcast(driver_frame(spark, assignments, f"{C.NODE} {id_type}, {C.COMPONENT} {id_type}")),
    )


def _link_on_driver(
    keyed: DataFrame,
    params: LinkParams,
    ctx: RunContext,
    *,
    documents: Callable[[], Documents],
    fetch: Callable[[set[Any]], dict[Any, str]],
) -> Linked:
    """``link`` with ``core.link_local`` over ``documents()`` (``keyed`` on the driver): texts fetched only
    for the pairs the rule checks, the results handed back as DataFrames."""
    rule, k = params.rule, params.rule.largest_k
    settings = LinkSettings(
        rule, params.bands.scheme, design_rules(params.bands, in_task=True), params.pairs_max_group
    )
    with ctx.stage("candidates"):
        found = find_candidates(documents(), settings)
    with ctx.stage("verify"):
        local = link_local(found, settings, fetch)
    with ctx.stage("clusters"):
        pairs, assignments = _frames(keyed, local)
    design = _Design(
        local.scheme, found.masks, local.design_report, None, local.n_hot, local.largest_buckets, "driver"
    )
    stats = _stats(
        local.totals, design, rule, k, local.within_k, local.by_reason, local.n_pairs, local.forest_edges
    )
    _finish_stats(stats, params, local.n_pairs, iterations=0, method="local")
    return Linked(pairs, assignments, stats, local, (local.nodes, local.labels))
