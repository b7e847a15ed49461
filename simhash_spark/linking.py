"""Linking fingerprints: identical groups, the band join (or local forests for hot buckets), the Hamming
filter and connected components. Works on (id, fingerprint) alone, so fingerprints computed elsewhere
can be linked too (``bench/scale.py`` does). Runs the actions these stages need."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.config import Config, MatchConfig
from simhash_spark.core.bands import parse_scheme
from simhash_spark.core.verify import TITLE, VERIFIED, VerifyOptions
from simhash_spark.stages import timed as _timed
from simhash_spark.transforms.candidates import band_join, hamming_distance, partitioned_band_keys
from simhash_spark.transforms.components import connected_components
from simhash_spark.transforms.designs import choose_design
from simhash_spark.transforms.hot_buckets import SIZE, hot_bucket_forest, large_buckets
from simhash_spark.transforms.identical import (
    GROUP_SIZE,
    cross_group_pair_count,
    expand_pairs,
    fingerprint_groups,
    group_members,
    star_edges,
    within_group_pairs,
)
from simhash_spark.transforms.verify import verify_pairs, within_threshold

log = logging.getLogger(__name__)


@dataclass
class Linked:
    pairs: DataFrame  # id_a < id_b, distance (pairs/)
    assignments: DataFrame  # node, component (nodes with an edge only)
    stats: dict[str, Any]


@dataclass
class _Found:
    pairs: DataFrame  # id_a < id_b, distance, similarity, reason
    edges: DataFrame  # src, dst
    n_pairs: int
    stats: dict[str, Any]


def link(
    keyed: DataFrame,
    cfg: Config,
    *,
    timings: dict[str, float],
    persisted: list[DataFrame],
    texts: DataFrame | None = None,
    titles: DataFrame | None = None,
) -> Linked:
    """In: ``keyed`` (``id``, ``fingerprint``, ``n_chars``) of the fingerprinted documents; when
    ``verify.measure`` is not "none", their ``texts`` (``id``, ``text``); with a title column, the title
    fingerprints ``titles`` (``id``, ``title_fingerprint``, non-null). Stages "candidates", "verify",
    "titles" and "clusters" are timed into ``timings``; persisted frames are appended to ``persisted``.

    Title rule "and": a pair of documents that both have a title fingerprint must also have titles within
    ``title.max_distance`` bits. "or": documents whose titles are that close are duplicates too (found by
    a band join of their own, reason "title")."""
    rule = cfg.title.rule if titles is not None else None
    body = _find(
        keyed,
        cfg,
        timings=timings,
        persisted=persisted,
        texts=texts,
        titles=titles if rule == "and" else None,
    )
    pairs, edges, n_pairs, stats = body.pairs, body.edges, body.n_pairs, body.stats
    if rule == "or":
        assert titles is not None
        with _timed(timings, "titles"):
            title_cfg = cfg.replace(
                match=MatchConfig(max_distance=cfg.title.max_distance),
                verify=VerifyOptions(measure="none"),
                bands=dataclasses.replace(cfg.bands, scheme="auto"),
            )
            by_title = _find(
                titles.select(
                    C.ID, F.col(C.TITLE_FINGERPRINT).alias(C.FINGERPRINT), F.lit(0).alias(C.N_CHARS)
                ),
                title_cfg,
                timings={},
                persisted=persisted,
                texts=None,
                titles=None,
            )
            fa = keyed.select(F.col(C.ID).alias("_fa_id"), F.col(C.FINGERPRINT).alias("_fa"))
            fb = keyed.select(F.col(C.ID).alias("_fb_id"), F.col(C.FINGERPRINT).alias("_fb"))
            only_title = (
                by_title.pairs.join(body.pairs.select(C.ID_A, C.ID_B), on=[C.ID_A, C.ID_B], how="left_anti")
                .join(fa, on=F.col(C.ID_A) == F.col("_fa_id"), how="left")
                .join(fb, on=F.col(C.ID_B) == F.col("_fb_id"), how="left")
                .select(
                    C.ID_A,
                    C.ID_B,
                    hamming_distance(F.col("_fa"), F.col("_fb")).cast("int").alias(C.DISTANCE),
                    F.lit(None).cast("double").alias(C.SIMILARITY),
                    F.lit(TITLE).alias(C.REASON),
                )
                .persist(StorageLevel.MEMORY_AND_DISK)
            )
            persisted.append(only_title)
            n_title = only_title.count()
            pairs = pairs.unionByName(only_title)
            edges = edges.unionByName(by_title.edges)
            n_pairs += n_title
            stats["pairs_complete"] = stats["pairs_complete"] and by_title.stats["pairs_complete"]
            stats["title"] = {
                "rule": "or",
                "max_distance": cfg.title.max_distance,
                "title_pairs": by_title.n_pairs,
                "pairs_added_by_title": n_title,
                "bands": by_title.stats["bands"]["scheme"],
            }
    elif rule == "and":
        stats["title"] = {"rule": "and", "max_distance": cfg.title.max_distance}
    stats["pairs_accepted"] = n_pairs

    with _timed(timings, "clusters"):
        comps = connected_components(edges, max_iterations=cfg.cluster.max_iterations)
    stats["components_iterations"] = comps.iterations
    return Linked(pairs, comps.assignments, stats)


def _title_within(pairs: DataFrame, titles: DataFrame, max_distance: int) -> DataFrame:
    """Pairs whose titles are within ``max_distance`` bits, or that lack a title on either side."""
    ta = titles.select(F.col(C.ID).alias("_ta_id"), F.col(C.TITLE_FINGERPRINT).alias("_ta"))
    tb = titles.select(F.col(C.ID).alias("_tb_id"), F.col(C.TITLE_FINGERPRINT).alias("_tb"))
    return (
        pairs.join(ta, on=F.col(C.ID_A) == F.col("_ta_id"), how="left")
        .join(tb, on=F.col(C.ID_B) == F.col("_tb_id"), how="left")
        .where(
            F.col("_ta").isNull()
            | F.col("_tb").isNull()
            | (hamming_distance(F.col("_ta"), F.col("_tb")) <= max_distance)
        )
        .select(*pairs.columns)
    )


def _find(
    keyed: DataFrame,
    cfg: Config,
    *,
    timings: dict[str, float],
    persisted: list[DataFrame],
    texts: DataFrame | None,
    titles: DataFrame | None,
) -> _Found:
    """Duplicate pairs among ``keyed`` (one fingerprint per document): identical groups, band join or
    hot-bucket forests, per-pair k, the second tier and (``titles`` given) the title condition."""
    policy = cfg.policy
    k = policy.largest
    if cfg.verify.enabled and texts is None:
        raise ValueError("verify.measure needs the documents' texts")
    lengths = keyed.select(C.ID, C.N_CHARS)
    keyed = keyed.select(C.ID, C.FINGERPRINT)
    if cfg.verify.enabled and texts is not None:
        # the hash is computed where the texts are read; only (id, hash) reaches the join
        text_hashes = texts.select(C.ID, F.xxhash64(C.TEXT).alias(C.TEXT_HASH))
        keyed = keyed.join(text_hashes, on=C.ID, how="inner")
    scheme = parse_scheme(cfg.bands.scheme)
    with _timed(timings, "candidates"):
        groups = fingerprint_groups(keyed).persist(StorageLevel.MEMORY_AND_DISK)
        members = group_members(keyed, groups).persist(StorageLevel.MEMORY_AND_DISK)
        persisted += [groups, members]
        limit = cfg.output.pairs_max_group
        grp = groups.agg(
            F.count(F.lit(1)).alias("distinct"),
            F.count_distinct(C.FINGERPRINT).alias("fingerprints"),
            F.coalesce(F.sum((F.col(GROUP_SIZE) > 1).cast("long")), F.lit(0)).alias("groups"),
            F.coalesce(F.max(GROUP_SIZE), F.lit(0)).alias("largest"),
            F.coalesce(F.sum((F.col(GROUP_SIZE) > limit).cast("long")), F.lit(0)).alias("cut"),
            F.coalesce(F.sum(within_group_pairs(F.col(GROUP_SIZE), limit)), F.lit(0)).alias("within"),
        ).first()
        assert grp is not None
        design_report: dict[str, Any] = {}
        if scheme.auto:
            scheme, design_report = choose_design(
                groups.select(C.ID, C.FINGERPRINT), n=int(grp["distinct"]), k=k, cfg=cfg.bands
            )
            log.info("bands.scheme=auto chose %s (%s)", scheme.spec, design_report["reason"])
        reps = groups.select(C.ID, C.FINGERPRINT)
        masks = scheme.table_masks(k)
        n_distinct = int(grp["distinct"])
        fraction = min(1.0, cfg.bands.auto_sample_rows / n_distinct) if n_distinct else 1.0
        sizes = large_buckets(reps, masks=masks, fraction=fraction, limit=cfg.bands.hot_bucket_limit).persist(
            StorageLevel.MEMORY_AND_DISK
        )
        persisted.append(sizes)
        hot = sizes.where(F.col(SIZE) > cfg.bands.hot_bucket_limit)
        # sizes holds only the sampled candidates for hot buckets (a few hundred rows): one collect serves
        # both the count and the top ten
        bucket_rows = sorted(
            ((r[SIZE], r[C.TABLE], r[C.KEY]) for r in sizes.select(C.TABLE, C.KEY, SIZE).collect()),
            key=lambda t: (-t[0], t[1], t[2]),
        )
        n_hot = sum(1 for size, _, _ in bucket_rows if size > cfg.bands.hot_bucket_limit)
        largest_buckets = [
            {"band": band, "key": f"{key & 0xFFFFFFFFFFFFFFFF:016x}", "fingerprints": size}
            for size, band, key in bucket_rows[:10]
        ]
        keys = partitioned_band_keys(reps, masks=masks, skip=hot if n_hot else None)
        candidates = band_join(keys, masks=masks, max_distance=k).persist(StorageLevel.MEMORY_AND_DISK)
        persisted.append(candidates)
        within_k = candidates.count()
    with _timed(timings, "verify"):
        rep_pairs = verify_pairs(
            within_threshold(candidates, lengths, policy=policy), texts, opts=cfg.verify, norm=cfg.normalize
        )
        if titles is not None:
            rep_pairs = _title_within(rep_pairs, titles, cfg.title.max_distance)
        forest_edges = 0
        if n_hot:
            members_in = reps.join(lengths, on=C.ID, how="inner")
            if titles is not None:
                members_in = members_in.join(titles.select(C.ID, C.TITLE_FINGERPRINT), on=C.ID, how="left")
            forest = hot_bucket_forest(
                members_in,
                hot,
                masks=masks,
                policy=policy,
                verify=cfg.verify,
                norm=cfg.normalize,
                texts=texts,
                title_max_distance=cfg.title.max_distance if titles is not None else None,
            ).persist(StorageLevel.MEMORY_AND_DISK)
            persisted.append(forest)
            forest_edges = forest.count()
            rep_pairs = rep_pairs.unionByName(forest).dropDuplicates([C.ID_A, C.ID_B])
        rep_pairs = rep_pairs.persist(StorageLevel.MEMORY_AND_DISK)
        persisted.append(rep_pairs)
        by_reason = {r[C.REASON]: int(r["count"]) for r in rep_pairs.groupBy(C.REASON).count().collect()}
        pairs = expand_pairs(rep_pairs, members, max_group=limit)
        n_pairs = int(grp["within"]) + cross_group_pair_count(rep_pairs, groups, max_group=limit)

    edges = rep_pairs.select(F.col(C.ID_A).alias(C.SRC), F.col(C.ID_B).alias(C.DST)).unionByName(
        star_edges(members)
    )

    stats = {
        "distinct_fingerprints": int(grp["fingerprints"]),
        # rows of the band join: one per distinct fingerprint (and, with a text check, distinct text)
        "representatives": int(grp["distinct"]),
        "identical_fingerprint_groups": int(grp["groups"]),
        "largest_identical_group": int(grp["largest"]),
        "candidate_pairs_within_k": within_k,
        "representative_pairs_accepted": sum(by_reason.values()),
        "representative_pairs_by_reason": by_reason,
        "pairs_accepted": n_pairs,
        "pairs_complete": int(grp["cut"]) == 0 and n_hot == 0,
        "hot_buckets": n_hot,
        "hot_bucket_forest_edges": forest_edges,
        "largest_buckets": largest_buckets,
        "groups_written_as_stars": int(grp["cut"]),
        "verify": {
            "measure": cfg.verify.measure,
            "min_similarity": cfg.verify.min_similarity if cfg.verify.enabled else None,
            "passed": by_reason.get(VERIFIED, 0),
        },
        "bands": {
            "scheme": scheme.spec,
            "tables": scheme.n_tables(k),
            "max_distance": k,
            "exact": scheme.exact,
            "recall_at_k": round(scheme.recall(k), 6),
            **({"auto": design_report} if design_report else {}),
        },
    }
    return _Found(pairs, edges, n_pairs, stats)
