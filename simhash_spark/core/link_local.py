"""Linking on the driver (pure numpy/pandas): the same steps and the same results as the Spark linking
(``simhash_spark.linking``) for inputs small enough to hold in one process, without a Spark job per step.

Identical groups → band design (``core.designs``, counted on every fingerprint: the Spark path counts on
all of them too below ``bands.auto_sample_rows``) → bucket sizes and hot buckets → candidates
(``core.bucket_pairs.join_tables``: each table's keys sorted, hot buckets skipped) → the pair rule
(``core.rules``; texts fetched only for the pairs that need the check) → spanning forests of hot buckets
(``core.flood``) → pairs expanded to every member → connected components (``core.components``). Every
step mirrors its Spark twin, and tests compare the two on the same inputs (tests/test_link_local.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from simhash_spark.core.bands import BITS, BandScheme, BitModel, parse_scheme
from simhash_spark.core.bucket_pairs import band_join_finds, flood_rows, join_tables, rank_buckets
from simhash_spark.core.components import component_labels
from simhash_spark.core.designs import DesignRules, auto_designs, decide_design
from simhash_spark.core.flood import DEFAULT_LIMITS, FloodLimits, flood_forest
from simhash_spark.core.mix64 import scramble
from simhash_spark.core.rules import PairRule
from simhash_spark.core.simhash import popcount, to_unsigned
from simhash_spark.core.sketch_bands import BANDS, band_pairs, drop_hot, share_band, without_keys
from simhash_spark.core.sketch_filter import stored_sketches_may_pass
from simhash_spark.core.verify import IDENTICAL

_M64 = (1 << 64) - 1
PairRow = tuple[Any, Any, int, float | None, str]  # id_a < id_b, distance, similarity, reason


@dataclass(frozen=True)
class Documents:
    """The fingerprinted documents, one entry per document (arrays of equal length)."""

    ids: np.ndarray
    fingerprints: np.ndarray  # int64
    n_chars: np.ndarray  # int64
    text_hash: np.ndarray | None = None  # int64; splits identical groups under a text check
    titles: Mapping[Any, int] = field(default_factory=dict)  # id -> title fingerprint (documents with one)
    # with sketch bands: each document's sketch (None: none, e.g. a short text) and its band keys,
    # (n, BANDS) uint32 (core.sketch_bands.stored_keys)
    sketches: Sequence[bytes | None] | None = None
    sketch_keys: np.ndarray | None = None

    def keys_of(self, ids: Sequence[Any]) -> np.ndarray:
        """The sketch keys of the documents ``ids`` (in that order)."""
        assert self.sketch_keys is not None
        return self.sketch_keys[pd.Index(self.ids).get_indexer(pd.Index(ids))]


@dataclass(frozen=True)
class LinkSettings:
    rule: PairRule
    scheme: str  # bands.scheme
    design_rules: DesignRules
    pairs_max_group: int
    sketch_bands: bool = False
    flood_limits: FloodLimits = DEFAULT_LIMITS


@dataclass
class LocalLinked:
    pairs: list[PairRow]  # pairs/ rows, expanded to every member
    nodes: np.ndarray  # every document with an edge
    labels: np.ndarray  # its component: the smallest node of it
    totals: dict[str, int]  # as the Spark linking's identical-group totals
    scheme: BandScheme
    design_report: dict[str, Any]
    largest_buckets: list[dict[str, Any]]
    n_hot: int
    within_k: int  # candidate pairs of the band join
    sketch_pairs: int  # candidate pairs only the sketch bands gave
    sketch_hot_keys: int  # sketch band keys over the hot-bucket limit (not joined)
    sketch_rejected: int | None  # pairs the sketch filter dropped unchecked (None: no sketches)
    by_reason: dict[str, int]
    n_pairs: int
    forest_edges: int
    flood_members: int = 0  # the hot buckets' members (core.flood)
    flood_capped: int = 0  # of those, whose work reached the flood limits


@dataclass
class _Groups:
    reps: pd.DataFrame  # id (smallest of the group), fingerprint, group_size; one row per group
    members: pd.DataFrame  # member, rep, group_size


def _groups(docs: Documents, checking: bool) -> _Groups:
    frame = pd.DataFrame({"id": docs.ids, "fingerprint": docs.fingerprints})
    keys = ["fingerprint"]
    if checking:
        assert docs.text_hash is not None, "a text check groups by text hash"
        frame["text_hash"] = docs.text_hash
        keys.append("text_hash")
    # sorted by group, then id, each group's first row holds its smallest id (pandas' grouped min of
    # string ids would loop in Python)
    ordered = frame.sort_values([*keys, "id"])
    key_values = ordered[keys].to_numpy(dtype=np.int64)
    starts = np.ones(len(ordered), dtype=bool)
    starts[1:] = (key_values[1:] != key_values[:-1]).any(axis=1)
    first = np.flatnonzero(starts)
    group = np.cumsum(starts) - 1
    sizes = np.diff(np.append(first, len(ordered)))
    frame["rep"] = pd.Series(ordered["id"].to_numpy()[first][group], index=ordered.index)
    frame["group_size"] = pd.Series(sizes[group], index=ordered.index).astype(np.int64)
    reps = frame[frame["id"] == frame["rep"]][["id", "fingerprint", "group_size"]].reset_index(drop=True)
    members = frame[["id", "rep", "group_size"]].rename(columns={"id": "member"})
    return _Groups(reps, members)


def _within_group_pairs(size: np.ndarray, max_group: int) -> np.ndarray:
    return np.where(size <= max_group, size * (size - 1) // 2, size - 1)


def _totals(groups: _Groups, max_group: int) -> dict[str, int]:
    size = groups.reps["group_size"].to_numpy()
    return {
        "distinct": len(size),
        "fingerprints": int(groups.reps["fingerprint"].nunique()),
        "groups": int((size > 1).sum()),
        "shared": int((groups.reps.groupby("fingerprint")["group_size"].sum() > 1).sum()),
        "largest": int(size.max()) if len(size) else 0,
        "cut": int((size > max_group).sum()),
        "within": int(_within_group_pairs(size, max_group).sum()),
    }


def _table_keys(fps: np.ndarray, masks: list[int]) -> list[np.ndarray]:
    return [fps & np.int64(m) for m in masks]


def _measured(fps: np.ndarray, designs: list[BandScheme], k: int) -> dict[int, tuple[float, int]]:
    out = {}
    for i, d in enumerate(designs):
        pairs, largest = 0, 0
        for keys in _table_keys(fps, d.table_masks(k)):
            counts = np.unique(keys, return_counts=True)[1]
            pairs += int((counts * (counts - 1) // 2).sum())
            largest = max(largest, int(counts.max()))
        out[i] = (float(pairs), largest)
    return out


def _bits(fps: np.ndarray) -> BitModel:
    u = to_unsigned(fps)
    return BitModel(tuple(int(((u >> np.uint64(i)) & np.uint64(1)).sum()) / len(u) for i in range(BITS)))


def choose_design_local(
    fps: np.ndarray, k: int, spec: str, rules: DesignRules
) -> tuple[BandScheme, dict[str, Any]]:
    """``bands.scheme`` resolved on the driver, for fingerprints it already holds: ``auto`` counts bucket
    sizes on every fingerprint, or on a sample of about ``rules.sample_rows`` of them chosen by a hash of
    the value (the same sample whatever the order), as the Spark path's ``transforms.designs``."""
    scheme = parse_scheme(spec)
    if not scheme.auto:
        return scheme, {}
    n = len(fps)
    fraction = min(1.0, rules.sample_rows / n) if n else 1.0
    if fraction < 1.0:
        fps = fps[scramble(fps) % np.uint64(1_000_000) < np.uint64(int(fraction * 1_000_000))]
    designs = auto_designs(k)
    measured = _measured(fps, designs, k) if designs and len(fps) else {}
    return decide_design(designs, measured, n=n, k=k, fraction=fraction, rules=rules, bits=lambda: _bits(fps))


def _title_distance(titles: Mapping[Any, int], a: Any, b: Any) -> int | None:
    ta, tb = titles.get(a), titles.get(b)
    return None if ta is None or tb is None else ((ta ^ tb) & _M64).bit_count()


def _accept(
    cands: list[tuple[Any, Any, int]],
    docs: Documents,
    rule: PairRule,
    texts: Callable[[set[Any]], Mapping[Any, str]],
) -> tuple[list[PairRow], int]:
    """The candidates the rule accepts, as ``transforms.verify.accept_pairs`` does, and how many of those
    the check would test were dropped by their sketches (``_sketch_filtered``)."""
    n_chars = dict(zip(docs.ids.tolist(), docs.n_chars.tolist(), strict=True))
    use_titles = rule.title_max_distance is not None
    shares = _shares_band(cands, docs)
    kept = []
    for (a, b, d), band in zip(cands, shares.tolist(), strict=True):
        td = _title_distance(docs.titles, a, b) if use_titles else None
        within_k = d <= rule.k(n_chars[a], n_chars[b])
        if (within_k or band) and rule.titles_agree(td):
            kept.append((a, b, d, td, band, within_k))
    needs_check = [c for c in kept if rule.needs_text_check(c[2], within_k=c[5])]
    to_check = _sketch_filtered(needs_check, docs, rule)
    text_of = texts({x for c in to_check for x in c[:2]}) if to_check else {}
    checked = rule.similarities([text_of.get(c[0]) for c in to_check], [text_of.get(c[1]) for c in to_check])
    similarity_of = dict(zip(((c[0], c[1]) for c in to_check), checked.tolist(), strict=True))
    dropped = {(c[0], c[1]) for c in needs_check} - similarity_of.keys()
    out: list[PairRow] = []
    for a, b, d, td, band, _ in kept:
        if (a, b) in dropped:
            continue
        sim = similarity_of.get((a, b))
        reason = rule.reason(d, n_chars[a], n_chars[b], similarity=sim, title_distance=td, shares_band=band)
        if reason is not None:
            out.append((a, b, d, sim, reason))
    return out, len(dropped)


def _sketch_filtered(to_check: list[Any], docs: Documents, rule: PairRule) -> list[Any]:
    """The pairs to check but those whose sketches show they cannot reach the threshold, as the Spark
    path's ``transforms.verify.drop_unreachable`` drops them (where the documents have sketches)."""
    if docs.sketches is None or not to_check:
        return to_check
    rows = pd.Index(docs.ids)
    first = rows.get_indexer(pd.Index([c[0] for c in to_check])).tolist()
    second = rows.get_indexer(pd.Index([c[1] for c in to_check])).tolist()
    sketches = docs.sketches
    keep = stored_sketches_may_pass(
        [sketches[r] for r in first], [sketches[r] for r in second], rule.verify.min_similarity
    )
    return [c for c, kept in zip(to_check, keep.tolist(), strict=True) if kept]


def _shares_band(cands: list[tuple[Any, Any, int]], docs: Documents) -> np.ndarray:
    """Whether each candidate's sketches share a band (all False without sketch keys)."""
    if docs.sketch_keys is None or not cands:
        return np.zeros(len(cands), dtype=bool)
    return share_band(docs.keys_of([c[0] for c in cands]), docs.keys_of([c[1] for c in cands]))


def _forests(
    reps: pd.DataFrame,
    docs: Documents,
    found: Candidates,
    settings: LinkSettings,
    texts: Callable[[set[Any]], Mapping[Any, str]],
) -> tuple[set[PairRow], int, int]:
    """Accepted pairs spanning the clusters of all hot buckets' members, resolved together as
    ``transforms.hot_buckets`` resolves them; with the number of members and of those capped."""
    rule = settings.rule
    fps = reps["fingerprint"].to_numpy(dtype=np.int64)
    ids = reps["id"].to_numpy()
    keys = _table_keys(fps, found.masks)
    members = np.unique(np.concatenate([np.flatnonzero(keys[t] == np.int64(key)) for t, key in found.hot]))
    member_ids = ids[members]
    order = np.argsort(member_ids, kind="stable")
    m_ids = member_ids[order].tolist()
    text_of = texts(set(m_ids)) if rule.verify.enabled else {}
    n_chars = dict(zip(docs.ids.tolist(), docs.n_chars.tolist(), strict=True))
    resolved = flood_forest(
        fps[members][order],
        [n_chars[x] for x in m_ids],
        [text_of.get(x) for x in m_ids],
        [docs.titles.get(x) for x in m_ids] if rule.title_max_distance is not None else [None] * len(m_ids),
        rule,
        None if docs.sketch_keys is None else without_keys(docs.keys_of(m_ids), found.sketch_hot),
        settings.flood_limits,
    )
    edges = {(m_ids[i], m_ids[j], d, sim, reason) for i, j, d, sim, reason in resolved.edges}
    return edges, len(m_ids), resolved.capped


def _expand(rep_pairs: list[PairRow], groups: _Groups, max_group: int) -> list[PairRow]:
    """``transforms.identical.expand_pairs`` on the driver."""
    # a document alone in its group stands for itself: only the groups of two or more are looked at
    members = groups.members[groups.members["group_size"] > 1]
    small = members["group_size"] <= max_group
    stand_in = members[small | (members["member"] == members["rep"])]
    stands: dict[Any, list[Any]] = stand_in.groupby("rep")["member"].agg(list).to_dict()
    out: list[PairRow] = []
    for a, b, d, sim, reason in rep_pairs:
        for ma in stands.get(a, [a]):
            for mb in stands.get(b, [b]):
                out.append((min(ma, mb), max(ma, mb), d, sim, reason))
    for _, grp in members[small].groupby("rep"):
        ms = sorted(grp["member"].tolist())
        out += [(ms[x], ms[y], 0, None, IDENTICAL) for x in range(len(ms)) for y in range(x + 1, len(ms))]
    big = members[~small & (members["member"] != members["rep"])]
    for m, r in zip(big["member"].tolist(), big["rep"].tolist(), strict=True):
        out.append((min(m, r), max(m, r), 0, None, IDENTICAL))
    return out


@dataclass
class Candidates:
    """The first half of a driver-side linking: groups, design, hot buckets and band-join candidates."""

    docs: Documents
    groups: _Groups
    scheme: BandScheme
    design_report: dict[str, Any]
    masks: list[int]
    largest: list[dict[str, Any]]  # summary.json's largest_buckets
    hot: list[tuple[int, int]]
    pairs: list[tuple[Any, Any, int]]  # id_a < id_b, distance
    sketch_pairs: int = 0  # of ``pairs``, those only the sketch bands gave (the last ones)
    sketch_hot_keys: int = 0
    sketch_hot: list[tuple[int, int]] = field(default_factory=list)  # those keys: (band, key)


def find_candidates(docs: Documents, settings: LinkSettings) -> Candidates:
    """Identical groups, the band design, bucket sizes and the band join, as the Spark "candidates" stage."""
    k = settings.rule.largest_k
    groups = _groups(docs, settings.rule.verify.enabled)
    fps = groups.reps["fingerprint"].to_numpy(dtype=np.int64)
    scheme, report = choose_design_local(fps, k, settings.scheme, settings.design_rules)
    masks = scheme.table_masks(k)
    limit = settings.design_rules.hot_bucket_limit
    table_masks = np.array(masks, dtype=np.int64)
    flood, flood_buckets = flood_rows(fps, table_masks, limit=limit)
    flooded = flood if flood.any() else None
    joined = join_tables(fps, table_masks, range(len(masks)), k=k, limit=limit, flood=flooded)
    largest, hot = rank_buckets(list(set(joined.buckets) | set(flood_buckets)), limit)
    hot = sorted(set(hot) | {(table, key) for _, table, key in flood_buckets})
    ids = groups.reps["id"].to_numpy()
    i, j, d = joined.i, joined.j, joined.distance
    n_sketch = n_sketch_hot = 0
    hot_keys: list[tuple[int, int]] = []
    if settings.sketch_bands and docs.sketch_keys is not None:
        keys, sketch_hot = drop_hot(docs.keys_of(ids), limit)
        si, sj = band_pairs(keys, range(BANDS), skip=band_join_finds(fps, masks, k, flooded))
        sd = popcount(to_unsigned(fps[si]) ^ to_unsigned(fps[sj])).astype(np.int32)
        i, j, d = np.concatenate([i, si]), np.concatenate([j, sj]), np.concatenate([d, sd])
        n_sketch, n_sketch_hot = len(si), len(sketch_hot)
        hot_keys = [(h.band, h.key) for h in sketch_hot]
    pairs = [
        (min(a, b), max(a, b), int(x))
        for a, b, x in zip(ids[i].tolist(), ids[j].tolist(), d.tolist(), strict=True)
    ]
    return Candidates(
        docs, groups, scheme, report, masks, largest, hot, pairs, n_sketch, n_sketch_hot, hot_keys
    )


def link_local(
    found: Candidates, settings: LinkSettings, texts: Callable[[set[Any]], Mapping[Any, str]]
) -> LocalLinked:
    """The rest of the linking, as the Spark "verify" and "clusters" stages: accepted pairs (and hot-bucket
    forests), pairs expanded to every member, connected components. ``texts``: the texts of a set of ids
    (asked only for the documents the text check needs)."""
    rule, limit, docs, groups = settings.rule, settings.pairs_max_group, found.docs, found.groups
    reps = groups.reps
    rows, sketch_rejected = _accept(found.pairs, docs, rule, texts)
    accepted = {(p[0], p[1]): p for p in rows}
    forest, flood_members, flood_capped = (
        _forests(reps, docs, found, settings, texts) if found.hot else (set(), 0, 0)
    )
    for p in sorted(forest, key=lambda p: (p[0], p[1])):
        accepted.setdefault((p[0], p[1]), p)
    rep_pairs = list(accepted.values())
    by_reason: dict[str, int] = {}
    for p in rep_pairs:
        by_reason[p[4]] = by_reason.get(p[4], 0) + 1
    totals = _totals(groups, limit)
    sizes = dict(zip(reps["id"].tolist(), reps["group_size"].tolist(), strict=True))
    stand = {r: (s if s <= limit else 1) for r, s in sizes.items()}
    cross = sum(stand[a] * stand[b] for a, b, *_ in rep_pairs)
    star = groups.members[groups.members["member"] != groups.members["rep"]]
    src = np.array([p[0] for p in rep_pairs] + star["rep"].tolist(), dtype=docs.ids.dtype)
    dst = np.array([p[1] for p in rep_pairs] + star["member"].tolist(), dtype=docs.ids.dtype)
    nodes, labels = component_labels(src, dst) if len(src) else (src, src)
    return LocalLinked(
        pairs=_expand(rep_pairs, groups, limit),
        nodes=nodes,
        labels=labels,
        totals=totals,
        scheme=found.scheme,
        design_report=found.design_report,
        largest_buckets=found.largest,
        n_hot=len(found.hot),
        within_k=len(found.pairs) - found.sketch_pairs,
        sketch_pairs=found.sketch_pairs,
        sketch_hot_keys=found.sketch_hot_keys,
        sketch_rejected=None if docs.sketches is None else sketch_rejected,
        by_reason=by_reason,
        n_pairs=totals["within"] + cross,
        forest_edges=len(forest),
        flood_members=flood_members,
        flood_capped=flood_capped,
    )
