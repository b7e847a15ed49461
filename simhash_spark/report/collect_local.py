"""The report's data from the clustered documents and the pairs on the driver: the twin of the Spark
aggregations in ``report.collect`` (tests/test_assemble_local.py holds both to the same report), used for
a run linked on the driver and for any run whose clustered documents and pairs are few."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from simhash_spark import columns as C
from simhash_spark.core.link_local import PairRow
from simhash_spark.core.spark_hash import xxhash64
from simhash_spark.report.render import ExampleCluster, Member, ReportData

EXAMPLES = 20  # example clusters: the largest half, the rest in a hash order of their ids
MEMBERS_SHOWN = 4  # the first members of an example cluster by id
SIMILARITY_SAMPLE = 5000  # verified similarities drawn, in a hash order of their pairs


def local_report(
    summary: dict[str, Any],
    members: pd.DataFrame,
    pairs: list[PairRow],
    texts: Callable[[set[Any]], Mapping[Any, str]],
    *,
    id_kind: str,
) -> ReportData:
    """``collect_report`` of a run whose clusters are ``members`` (``core.assemble_local.cluster_members``)
    and whose pairs/ rows are ``pairs``; ``texts``: the texts of the given ids; ``id_kind``: how Spark
    hashes the id column (``core.spark_hash.KINDS``)."""
    heads = members[members[C.ID] == members[C.CLUSTER_ID]]
    sizes = {int(k): int(v) for k, v in Counter(heads[C.CLUSTER_SIZE].tolist()).items()}
    dists = {int(k): int(v) for k, v in Counter(p[2] for p in pairs).items()}
    checked = [(xxhash64((p[0], p[1]), id_kind), p[3]) for p in pairs if p[3] is not None]
    sims = [float(s) for _, s in sorted(checked, key=lambda hs: hs[0])[:SIMILARITY_SAMPLE]]
    chosen = _chosen(heads, id_kind)
    if not chosen:
        return ReportData(summary, sizes, dists, sims, [])
    return ReportData(summary, sizes, dists, sims, _examples(members, pairs, texts, chosen))


def _chosen(heads: pd.DataFrame, id_kind: str) -> list[Any]:
    """The example clusters: the largest, then more in the hash order of their ids."""
    rows = list(zip(heads[C.CLUSTER_ID].tolist(), heads[C.CLUSTER_SIZE].tolist(), strict=True))
    chosen = [cid for cid, _ in sorted(rows, key=lambda r: (-r[1], r[0]))[: EXAMPLES // 2]]
    taken = set(chosen)
    by_hash = sorted((xxhash64((cid,), id_kind), cid) for cid, _ in rows)
    chosen += [cid for _, cid in by_hash[:EXAMPLES] if cid not in taken][: EXAMPLES - len(chosen)]
    return chosen


def _examples(
    members: pd.DataFrame,
    pairs: list[PairRow],
    texts: Callable[[set[Any]], Mapping[Any, str]],
    chosen: list[Any],
) -> list[ExampleCluster]:
    """Each chosen cluster's first members by id, each with the accepted pair ``collect`` picks for it."""
    in_chosen = members[members[C.CLUSTER_ID].isin(chosen)].sort_values(C.ID)
    shown = {
        cid: group[C.ID].tolist()[:MEMBERS_SHOWN]
        for cid, group in in_chosen.groupby(C.CLUSTER_ID, sort=False)
    }
    size_of = dict(zip(in_chosen[C.CLUSTER_ID].tolist(), in_chosen[C.CLUSTER_SIZE].tolist(), strict=True))
    wanted = {m for ms in shown.values() for m in ms}
    partner_rows: dict[Any, list[tuple[Any, int, float | None]]] = {m: [] for m in wanted}
    for a, b, d, sim, _ in pairs:
        if a in wanted:
            partner_rows[a].append((b, d, sim))
        if b in wanted:
            partner_rows[b].append((a, d, sim))
    picks = {m: _partner(partner_rows[m], set(ms)) for ms in shown.values() for m in ms}
    text_of = texts(wanted | {p[0] for p in picks.values() if p is not None})
    examples = []
    for cid in chosen:
        if cid in shown:
            shown_members = [_member(m, picks[m], text_of) for m in shown[cid]]
            examples.append(ExampleCluster(str(cid), int(size_of[cid]), shown_members))
    return examples


def _partner(
    rows: list[tuple[Any, int, float | None]], shown: set[Any]
) -> tuple[Any, int, float | None] | None:
    """A shown member of the same cluster first, then the highest similarity (unchecked last), the
    smallest distance, the smallest partner id."""
    if not rows:
        return None
    return min(rows, key=lambda r: (r[0] not in shown, r[2] is None, -(r[2] or 0.0), r[1], r[0]))


def _member(m: Any, pick: tuple[Any, int, float | None] | None, text_of: Mapping[Any, str]) -> Member:
    if pick is None:
        return Member(id=str(m), text=text_of.get(m) or "")
    partner, distance, similarity = pick
    return Member(
        id=str(m),
        text=text_of.get(m) or "",
        partner_id=str(partner),
        partner_text=text_of.get(partner),
        distance=int(distance),
        similarity=None if similarity is None else float(similarity),
    )
