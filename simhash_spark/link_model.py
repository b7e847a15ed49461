"""What linking takes and gives, shared by its Spark and driver paths: the parameters (``LinkParams``),
what a caller holds already (``AtHand``), the result (``Linked``), the band design record and the
statistics both paths report."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame

from simhash_spark.config import BandsConfig, Config
from simhash_spark.core.bands import BandScheme
from simhash_spark.core.flood import FloodLimits
from simhash_spark.core.link_local import LocalLinked
from simhash_spark.core.rules import PairRule
from simhash_spark.core.verify import VERIFIED, ThresholdPolicy, VerifyOptions


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
    sketch_bands: bool = False  # pairs whose sketches share a band are candidates too (core.sketch_bands)

    @property
    def flood_limits(self) -> FloodLimits:
        return FloodLimits(self.bands.flood_max_candidates, self.bands.flood_max_checks)

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
            sketch_bands=cfg.sketch_bands,
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
class Design:
    scheme: BandScheme
    masks: list[int]
    report: dict[str, Any]
    hot: DataFrame | None  # band, band_key of the buckets over the limit (None: linked on the driver)
    n_hot: int
    largest_buckets: list[dict[str, Any]]
    join: str  # where the band join ran: "in_task", "shuffled" or "driver"
    # the fingerprints in the hot buckets, when the driver knows them (None: found by a Spark join)
    hot_members: np.ndarray | None = None


def finish_stats(
    stats: dict[str, Any], params: LinkParams, n_pairs: int, *, iterations: int, method: str
) -> None:
    """The statistics both linking paths add last: the title rule "and", pairs accepted, components."""
    if params.title_rule == "and":
        stats["title"] = {"rule": "and", "max_distance": params.title_max_distance}
    stats["pairs_accepted"] = n_pairs
    stats["components_iterations"] = iterations
    stats["components_method"] = method


def link_stats(
    t: Mapping[str, Any],
    design: Design,
    rule: PairRule,
    k: int,
    within_k: int,
    by_reason: dict[str, int],
    n_pairs: int,
    flood: Flood,
    sketch: SketchBands | None = None,
) -> dict[str, Any]:
    """``flood``: what resolving the hot buckets' members found; ``sketch``: what the sketch bands added,
    when on."""
    sketch_hot = sketch.hot_keys if sketch is not None else 0
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
        "pairs_complete": int(t["cut"]) == 0 and design.n_hot == 0 and sketch_hot == 0,
        "hot_buckets": design.n_hot,
        "hot_bucket_forest_edges": flood.edges,
        # the hot buckets' members, resolved together (core.flood): only where "capped" members reached
        # the bounds on their work can a cluster miss an edge
        "flood": {"members": flood.members, "edges": flood.edges, "capped": flood.capped},
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
        **({"sketch_bands": dataclasses.asdict(sketch)} if sketch is not None else {}),
    }


@dataclass(frozen=True)
class Flood:
    """What resolving the hot buckets' members found: its members, the accepted pairs spanning their
    clusters, and the members whose work reached ``bands.flood_max_*``."""

    members: int
    edges: int
    capped: int


@dataclass(frozen=True)
class SketchBands:
    """summary.json's ``sketch_bands``: the candidate pairs only the sketch bands gave, and the band keys
    over the hot-bucket limit, not joined."""

    candidate_pairs: int
    hot_keys: int
