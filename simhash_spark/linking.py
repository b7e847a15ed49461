"""Linking fingerprints into duplicate pairs and clusters, in named steps: identical groups → band design →
candidates (band join, or spanning forests for hot buckets) → accepted pairs (the pair rule) → clusters
(connected components). Works on (id, fingerprint, n_chars) alone, so fingerprints computed elsewhere can
be linked too (``bench/scale.py`` does). Takes its own parameters (``LinkParams``), never the whole
configuration. This module holds the Spark steps; small inputs are linked on the driver
(``linking_local``); what both share is in ``link_model``."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.config import BandsConfig
from simhash_spark.context import RunContext, shuffle_partitions
from simhash_spark.core.bands import BandScheme, parse_scheme
from simhash_spark.core.bucket_pairs import flood_rows, in_buckets, rank_buckets
from simhash_spark.core.check_filter import SKETCH, CheckFilter, requested
from simhash_spark.core.flood import DEFAULT_LIMITS, FloodLimits
from simhash_spark.core.link_local import choose_design_local
from simhash_spark.core.rules import PairRule
from simhash_spark.core.sketch_bands import drop_hot
from simhash_spark.core.verify import BY_TITLE
from simhash_spark.link_model import (
    AtHand,
    Design,
    Flood,
    Linked,
    LinkParams,
    SketchBands,
    finish_stats,
    link_stats,
)
from simhash_spark.linking_local import collect_documents, held_documents, link_on_driver, on_driver, texts_of
from simhash_spark.transforms.candidates import (
    SKETCH_PAIR,
    band_join,
    collect_fingerprints,
    hamming_distance,
    in_task_band_join,
    in_task_parallelism,
    partitioned_band_keys,
    shuffled_sketch_join,
    sketch_key_rows,
)
from simhash_spark.transforms.components import connected_components
from simhash_spark.transforms.designs import choose_design, design_rules
from simhash_spark.transforms.hot_buckets import FLOOD_CAPPED, hot_bucket_forest, large_buckets
from simhash_spark.transforms.identical import (
    GROUP_SIZE,
    cross_group_pair_count,
    expand_pairs,
    fingerprint_groups,
    group_members,
    grouped_members,
    star_edges,
    within_group_pairs,
)
from simhash_spark.transforms.verify import (
    accept_pairs,
    drop_unreachable,
    keep_reachable,
    rows_of_pairs,
    unreachable_column,
)

log = logging.getLogger(__name__)


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
    summaries: DataFrame | None = None,
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
    fingerprints and texts from ``at_hand`` when the caller holds them. ``summaries`` (``id``,
    ``check_summary``): what the fingerprint pass emitted for the text check's filter
    (``transforms.verify.drop_unreachable``)."""
    if on_driver(keyed, params, n_docs):
        if at_hand is not None:
            held = partial(held_documents, at_hand.keyed, at_hand.titles, params.rule)
            return link_on_driver(keyed, params, ctx, documents=held, fetch=at_hand.texts)
        wanted = summaries if params.sketch_bands else None
        collected = partial(collect_documents, keyed, titles, params.rule, wanted)
        return link_on_driver(keyed, params, ctx, documents=collected, fetch=texts_of(texts))
    return _link_in_spark(keyed, params, ctx, texts=texts, titles=titles, summaries=summaries)


def _link_in_spark(
    keyed: DataFrame,
    params: LinkParams,
    ctx: RunContext,
    *,
    texts: DataFrame | None,
    titles: DataFrame | None,
    summaries: DataFrame | None,
) -> Linked:
    and_titles = titles if params.title_rule == "and" else None
    found = _find(keyed, params, ctx, texts=texts, titles=and_titles, summaries=summaries)
    if params.title_rule == "or":
        assert titles is not None
        with ctx.stage("titles"):
            found = _add_title_pairs(found, keyed, titles, params, ctx)
    with ctx.stage("clusters"):
        comps = connected_components(
            found.edges, max_iterations=params.max_iterations, local_max_edges=params.local_max_edges
        )
    finish_stats(found.stats, params, found.n_pairs, iterations=comps.iterations, method=comps.method)
    return Linked(found.pairs, comps.assignments, found.stats, labelled=comps.labelled)


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


def _identical(keyed: DataFrame, texts: DataFrame | None, limit: int, ctx: RunContext) -> _Identical:
    """Identical groups of ``keyed`` (``id``, ``fingerprint``), split by text when ``texts`` is given:
    only (id, hash of the text) reaches the grouping."""
    if texts is None:
        keyed = keyed.select(C.ID, C.FINGERPRINT)
    elif C.TEXT_HASH in keyed.columns:  # hashed where the texts were read
        keyed = keyed.select(C.ID, C.FINGERPRINT, C.TEXT_HASH)
    else:
        keyed = keyed.join(texts.select(C.ID, F.xxhash64(C.TEXT).alias(C.TEXT_HASH)), on=C.ID, how="inner")
    # read by every later step of the linking: leaves of their plans
    grouped = ctx.materialize(grouped_members(keyed))
    groups, members = fingerprint_groups(grouped), group_members(grouped)
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
) -> tuple[Design, DataFrame]:
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
    design = Design(scheme, masks, report, hot, len(hot_keys), largest, "shuffled")
    keys = partitioned_band_keys(ident.reps, masks=masks, skip=hot if hot_keys else None)
    return design, ctx.persist(band_join(keys, masks=masks, max_distance=k))


def _in_task_join(
    ident: _Identical,
    k: int,
    bands: BandsConfig,
    ctx: RunContext,
    *,
    tasks: int,
    sketches: DataFrame | None,
    judge: _Judge | None,
) -> tuple[Design, DataFrame, list[tuple[int, int]]]:
    """The band join with whole tables sorted inside tasks. The representatives are collected once: the
    design is chosen on the driver from them (``auto``), bucket sizes come out of the join, exact. With
    ``sketches`` (``id``, ``check_summary``), the sketch bands are joined in the same tasks; with
    ``judge``, each pair is judged by the sketch filter there too. Returns the design, the candidates
    (``id_a``, ``id_b``, ``distance``, ``band``: ``SKETCH_PAIR`` for the sketch bands' pairs; judged:
    ``may_pass``, ``shares_band``) and the hot sketch band keys (band, key)."""
    spark = ident.reps.sparkSession
    summaries = judge.summaries if judge is not None else sketches
    reps = collect_fingerprints(ident.reps, summaries, keys=sketches is not None, sketches=judge is not None)
    sketch_hot: list[tuple[int, int]] = []
    if reps.sketch_keys is not None:
        cooled, dropped = drop_hot(reps.sketch_keys, bands.hot_bucket_limit)
        reps, sketch_hot = dataclasses.replace(reps, sketch_keys=cooled), [(h.band, h.key) for h in dropped]
    scheme, report = choose_design_local(
        reps.fingerprints, k, bands.scheme, design_rules(bands, in_task=True)
    )
    if report:
        log.info("bands.scheme=auto chose %s (%s)", scheme.spec, report["reason"])
    masks = scheme.table_masks(k)
    flood, flood_buckets = flood_rows(
        reps.fingerprints, np.array(masks, dtype=np.int64), limit=bands.hot_bucket_limit
    )
    joined = ctx.persist(
        in_task_band_join(
            spark,
            reps,
            masks=masks,
            max_distance=k,
            hot_bucket_limit=bands.hot_bucket_limit,
            tasks=tasks,
            check=judge.check if judge is not None else None,
            flood=flood if flood.any() else None,
        )
    )
    is_bucket = F.col(C.BUCKET_SIZE).isNotNull()
    largest, hot_keys = rank_buckets(
        list(
            {(r[C.BUCKET_SIZE], r[C.BAND], r[C.KEY]) for r in joined.where(is_bucket).collect()}
            | set(flood_buckets)
        ),
        bands.hot_bucket_limit,
    )
    hot_keys = sorted(set(hot_keys) | {(table, key) for _, table, key in flood_buckets})
    hot = spark.createDataFrame(hot_keys, f"{C.BAND} int, {C.KEY} bigint")
    members = reps.fingerprints[in_buckets(reps.fingerprints, np.array(masks, dtype=np.int64), hot_keys)]
    design = Design(scheme, masks, report, hot, len(hot_keys), largest, "in_task", np.unique(members))
    verdicts = [C.MAY_PASS, C.SHARES_BAND] if judge is not None else []
    pairs = joined.where(~is_bucket).select(C.ID_A, C.ID_B, C.DISTANCE, C.BAND, *verdicts)
    return design, pairs, sketch_hot


def _shuffled_sketch_join(
    ident: _Identical, sketches: DataFrame, design: Design, k: int, bands: BandsConfig, ctx: RunContext
) -> tuple[DataFrame, list[tuple[int, int]]]:
    """The sketch bands' pairs for the shuffled join (``band`` = ``SKETCH_PAIR``), and the hot sketch band
    keys (band, key)."""
    rows = ctx.persist(sketch_key_rows(ident.reps, sketches))
    pairs, hot = shuffled_sketch_join(
        rows, masks=design.masks, max_distance=k, hot_bucket_limit=bands.hot_bucket_limit
    )
    found = ctx.materialize(pairs.withColumn(C.BAND, F.lit(SKETCH_PAIR)))
    return found, [(r[C.BAND], r[C.KEY]) for r in hot.select(C.BAND, C.KEY).collect()]


@dataclass(frozen=True)
class _Judge:
    """The sketch filter, applied where the band join finds the pairs (inside its tasks)."""

    check: CheckFilter
    summaries: DataFrame  # id, check_summary: the sketches


def _in_task_judge(rule: PairRule, summaries: DataFrame | None) -> _Judge | None:
    """The sketch filter for the band join's tasks to judge pairs with: where the rule checks texts and
    its filter is the sketch (the prefix filter is applied by joins, ``drop_unreachable``)."""
    check = requested(rule.verify)
    if summaries is None or check is None or check.kind != SKETCH or not rule.verify.enabled:
        return None
    return _Judge(check, summaries)


def _candidates(
    ident: _Identical,
    k: int,
    bands: BandsConfig,
    ctx: RunContext,
    sketches: DataFrame | None,
    judge: _Judge | None = None,
) -> tuple[Design, DataFrame, list[tuple[int, int]]]:
    """The band join inside tasks where the representatives fit the driver, else shuffled; with
    ``sketches``, the sketch bands' pairs too; ``judge`` judges them inside the tasks only (the candidates
    then have ``may_pass``). As ``_in_task_join``."""
    n_distinct = int(ident.totals["distinct"])
    collects_sketches = sketches is not None or judge is not None
    tasks = in_task_parallelism(ident.reps.sparkSession, n_distinct, sketches=collects_sketches)
    if tasks is not None and n_distinct <= bands.in_task_max_fingerprints:
        return _in_task_join(ident, k, bands, ctx, tasks=tasks, sketches=sketches, judge=judge)
    scheme, report = _scheme(ident, k, bands)
    design, joined = _shuffled_join(ident, scheme, report, k, bands, ctx)
    candidates = joined.withColumn(C.BAND, F.lit(None).cast("int"))
    if sketches is None:
        return design, candidates, []
    from_sketch, sketch_hot = _shuffled_sketch_join(ident, sketches, design, k, bands, ctx)
    return design, ctx.persist(candidates.unionByName(from_sketch)), sketch_hot


def _count_candidates(candidates: DataFrame, judged_by: PairRule | None = None) -> tuple[int, int, int]:
    """(the band join's candidates, the sketch bands' candidates, and of all those judged by the sketch
    filter where they were found, how many ``judged_by`` need not check: ``unreachable_column``) in one
    action."""
    from_sketch = (F.col(C.BAND) == SKETCH_PAIR).cast("long")
    rejected = unreachable_column(judged_by).cast("long") if judged_by is not None else F.lit(0)
    row = candidates.agg(
        F.count(F.lit(1)).alias("n"),
        F.coalesce(F.sum(from_sketch), F.lit(0)).alias("s"),
        F.coalesce(F.sum(rejected), F.lit(0)).alias("r"),
    ).first()
    assert row is not None
    return int(row["n"]) - int(row["s"]), int(row["s"]), int(row["r"])


def _filtered(
    candidates: DataFrame,
    rule: PairRule,
    ctx: RunContext,
    *,
    summaries: DataFrame | None,
    n_candidates: int,
    few_limit: int,
    sketch_bands: bool,
    rejected_in_task: int | None,
) -> tuple[DataFrame, int, dict[str, Any]]:
    """The ``n_candidates`` candidates less those the text check's filter shows need not be checked, how
    many are left, and the filter's statistics (``verify.<kind>_filter`` and how many it rejected,
    ``verify.<kind>_rejected``; empty without a filter). ``rejected_in_task``: the candidates were judged
    where the band join found them (``may_pass``, ``shares_band``) and this many need not be checked:
    they are dropped by a filter. Else, with ``summaries``, they are judged in joins of the summaries alone
    (the ids broadcast when at most ``few_limit``), so no text is read for them."""
    check = requested(rule.verify)
    if check is None or not rule.verify.enabled:
        return candidates, n_candidates, {}
    if rejected_in_task is not None:
        kept = keep_reachable(candidates, rule=rule, sketch_bands=sketch_bands)
        n_left = n_candidates - rejected_in_task
    elif summaries is not None:
        few = n_candidates <= few_limit
        judged = drop_unreachable(
            candidates, rule=rule, check=check, summaries=summaries, few=few, sketch_bands=sketch_bands
        )
        kept = ctx.materialize(judged)
        n_left = kept.count()
    else:
        return candidates, n_candidates, {}
    return kept, n_left, {f"{check.kind}_filter": True, f"{check.kind}_rejected": n_candidates - n_left}


def _accepted(
    candidates: DataFrame,
    ident: _Identical,
    design: Design,
    rule: PairRule,
    ctx: RunContext,
    *,
    lengths: DataFrame,
    texts: DataFrame | None,
    titles: DataFrame | None,
    summaries: DataFrame | None,
    n_candidates: int,
    few_limit: int,
    sketch_bands: bool = False,
    rejected_in_task: int | None = None,
    limits: FloodLimits = DEFAULT_LIMITS,
    sketch_hot: Sequence[tuple[int, int]] = (),
) -> tuple[DataFrame, Flood, dict[str, Any]]:
    """The representatives' pairs the rule accepts (band-join candidates and the hot buckets' members
    resolved together), what that resolution found, and the check filter's statistics (``_filtered``). Up to ``few_limit``
    candidates are few enough for the driver to broadcast their ids: once the filter leaves that few, only
    those documents' texts are joined."""
    candidates, n_left, filtered = _filtered(
        candidates,
        rule,
        ctx,
        summaries=summaries,
        n_candidates=n_candidates,
        few_limit=few_limit,
        sketch_bands=sketch_bands,
        rejected_in_task=rejected_in_task,
    )
    few = n_left <= few_limit
    checked_texts = texts
    if few and texts is not None and rule.verify.enabled:
        # the check joins a text to each end of a pair: persisted, the input is scanned for them once, and
        # partitioned by id as both joins want them, the texts are shuffled once
        partitions = shuffle_partitions(texts.sparkSession)
        checked_texts = ctx.persist(rows_of_pairs(candidates, texts, partitions=partitions))
    rep_pairs = accept_pairs(candidates, rule=rule, lengths=lengths, texts=checked_texts, titles=titles)
    if not (design.n_hot and design.hot is not None):
        return ctx.materialize(rep_pairs), Flood(0, 0, 0), filtered
    resolved = ctx.persist(
        _hot_forest(
            ident,
            design,
            rule,
            lengths=lengths,
            texts=texts,
            titles=titles,
            sketches=summaries if sketch_bands else None,
            limits=limits,
            sketch_hot=sketch_hot,
        )
    )
    # one job: the flood's single task runs beside the other pairs' checks
    forest = resolved.where(F.col(C.REASON) != FLOOD_CAPPED)
    rep_pairs = ctx.materialize(rep_pairs.unionByName(forest).dropDuplicates([C.ID_A, C.ID_B]))
    return rep_pairs, _flood_totals(resolved), filtered


def _flood_totals(resolved: DataFrame) -> Flood:
    """What the resolution of the hot buckets' members found (its rows, computed already)."""
    capped = F.col(C.REASON) == FLOOD_CAPPED
    totals = resolved.agg(
        F.sum(F.when(capped, F.col(C.DISTANCE)).otherwise(0)).alias("capped"),
        F.sum(F.when(capped, F.col(C.SIMILARITY)).otherwise(0)).alias("members"),
        F.count(F.when(~capped, 1)).alias("edges"),
    ).first()
    assert totals is not None
    return Flood(int(totals["members"] or 0), int(totals["edges"]), int(totals["capped"] or 0))


def _hot_forest(
    ident: _Identical,
    design: Design,
    rule: PairRule,
    *,
    lengths: DataFrame,
    texts: DataFrame | None,
    titles: DataFrame | None,
    sketches: DataFrame | None,
    limits: FloodLimits,
    sketch_hot: Sequence[tuple[int, int]],
) -> DataFrame:
    """The hot buckets' members resolved together (``transforms.hot_buckets.hot_bucket_forest``)."""
    assert design.hot is not None
    members_in = ident.reps.join(lengths, on=C.ID, how="inner")
    if titles is not None:
        members_in = members_in.join(titles.select(C.ID, C.TITLE_FINGERPRINT), on=C.ID, how="left")
    return hot_bucket_forest(
        members_in,
        design.hot,
        masks=design.masks,
        rule=rule,
        texts=texts,
        sketches=sketches,
        limits=limits,
        sketch_hot=sketch_hot,
        member_fingerprints=design.hot_members,
    )


def _find(
    keyed: DataFrame,
    params: LinkParams,
    ctx: RunContext,
    *,
    texts: DataFrame | None,
    titles: DataFrame | None,
    summaries: DataFrame | None = None,
) -> _Found:
    """Duplicate pairs among ``keyed`` (one fingerprint per document), with the statistics of each step."""
    rule, k, limit = params.rule, params.rule.largest_k, params.pairs_max_group
    checking = rule.verify.enabled
    if checking and texts is None:
        raise ValueError("verify.measure needs the documents' texts")
    lengths = keyed.select(C.ID, C.N_CHARS)
    sketches = summaries if params.sketch_bands else None
    if params.sketch_bands and summaries is None:
        raise ValueError("match.sketch_bands needs the documents' sketches (summaries)")
    with ctx.stage("candidates"):
        ident = _identical(keyed, texts if checking else None, limit, ctx)
        judge = _in_task_judge(rule, summaries)
        design, candidates, sketch_hot = _candidates(ident, k, params.bands, ctx, sketches, judge)
        judged = C.MAY_PASS in candidates.columns
        within_k, n_sketch, rejected = _count_candidates(candidates, rule if judged else None)
        verdicts = [C.MAY_PASS, C.SHARES_BAND] if judged else []
        candidates = candidates.select(C.ID_A, C.ID_B, C.DISTANCE, *verdicts)
    with ctx.stage("verify"):
        rep_pairs, flood, filtered = _accepted(
            candidates,
            ident,
            design,
            rule,
            ctx,
            lengths=lengths,
            texts=texts,
            titles=titles,
            summaries=summaries,
            n_candidates=within_k + n_sketch,
            few_limit=params.local_max_edges,
            sketch_bands=sketches is not None,
            rejected_in_task=rejected if judged else None,
            limits=params.flood_limits,
            sketch_hot=sketch_hot,
        )
        by_reason = {r[C.REASON]: int(r["count"]) for r in rep_pairs.groupBy(C.REASON).count().collect()}
        # read by the write and again by the report: its joins with every member run once
        pairs = ctx.persist(expand_pairs(rep_pairs, ident.members, max_group=limit))
        n_pairs = int(ident.totals["within"]) + cross_group_pair_count(
            rep_pairs, ident.groups, max_group=limit
        )
    edges = rep_pairs.select(F.col(C.ID_A).alias(C.SRC), F.col(C.ID_B).alias(C.DST)).unionByName(
        star_edges(ident.members)
    )
    sketch = SketchBands(n_sketch, len(sketch_hot)) if sketches is not None else None
    stats = link_stats(ident.totals, design, rule, k, within_k, by_reason, n_pairs, flood, sketch)
    stats["verify"].update(filtered)  # the check read only the pairs its filter kept
    return _Found(pairs, edges, n_pairs, stats)
