"""Clusters from a driver-side linking's components, on the driver: the twin of
``transforms.clusters.cluster_members`` and ``cluster_table`` (tests/test_assemble_local.py holds them to
the same rows) for runs small enough to be linked there."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from simhash_spark import columns as C

# the representative policies that need nothing but what the driver linking holds (id, n_chars); a policy
# on an input column (min:COL, max:COL) is applied by Spark, which orders that column's type as it does
LOCAL_POLICIES = ("min_id", "longest_text")


def cluster_members(
    nodes: np.ndarray, labels: np.ndarray, n_chars: Mapping[object, int], *, representative: str
) -> pd.DataFrame:
    """``id``, ``cluster_id`` (the representative's id), ``cluster_size`` of the documents in a component.

    ``nodes``, ``labels``: each node's component, labelled by its smallest node; ``n_chars``: the
    documents' normalized lengths by id; ``representative``: one of ``LOCAL_POLICIES``."""
    if representative not in LOCAL_POLICIES:
        raise ValueError(f"cluster.representative {representative!r} is applied by Spark, not here")
    members = pd.DataFrame({C.ID: nodes, "component": labels})
    members[C.CLUSTER_SIZE] = members.groupby("component")[C.ID].transform("size").astype(np.int64)
    if representative == "min_id":
        members[C.CLUSTER_ID] = members["component"]
    else:  # longest_text: most characters first, ties to the smallest id
        members["_n"] = [n_chars[i] for i in members[C.ID].tolist()]
        ordered = members.sort_values(["component", "_n", C.ID], ascending=[True, False, True])
        first = ordered.drop_duplicates("component")[["component", C.ID]]
        reps = dict(zip(first["component"].tolist(), first[C.ID].tolist(), strict=True))
        members[C.CLUSTER_ID] = members["component"].map(reps)
    ordered = members.sort_values(C.ID, ignore_index=True)
    return ordered[[C.ID, C.CLUSTER_ID, C.CLUSTER_SIZE]].astype({C.CLUSTER_ID: members[C.ID].dtype})


def cluster_rows(members: pd.DataFrame) -> pd.DataFrame:
    """clusters/ rows from ``cluster_members``: ``cluster_id``, ``size``, ``member_ids`` (sorted, plain
    Python values), by cluster id."""
    ordered = members.sort_values([C.CLUSTER_ID, C.ID])
    by_cluster: dict[object, list[object]] = {}
    for cid, member in zip(ordered[C.CLUSTER_ID].tolist(), ordered[C.ID].tolist(), strict=True):
        by_cluster.setdefault(cid, []).append(member)
    return pd.DataFrame(
        {
            C.CLUSTER_ID: pd.Series(list(by_cluster), dtype=members[C.CLUSTER_ID].dtype),
            C.SIZE: pd.Series([len(m) for m in by_cluster.values()], dtype=np.int64),
            C.MEMBER_IDS: pd.Series(list(by_cluster.values()), dtype=object),
        }
    )


@dataclass(frozen=True)
class ClusterTotals:
    duplicates: int
    clusters: int
    largest: int  # cluster size; 1 when no document has a duplicate, 0 without documents


def cluster_totals(members: pd.DataFrame, n_documents: int) -> ClusterTotals:
    """The totals the Spark path aggregates over documents/, from ``cluster_members`` and the number of
    documents (every input row)."""
    sizes = members[C.CLUSTER_SIZE]
    return ClusterTotals(
        duplicates=int((members[C.CLUSTER_ID] != members[C.ID]).sum()),
        clusters=int(members[C.CLUSTER_ID].nunique()),
        largest=int(sizes.max()) if len(sizes) else min(n_documents, 1),
    )


def batch_components(
    nodes: np.ndarray, labels: np.ndarray, index_dates: Mapping[object, str]
) -> pd.DataFrame:
    """The twin of ``transforms.incremental.batch_components`` for an incremental run linked on the driver:
    ``node``, ``component`` (the smallest batch node of it), ``matched_index_id`` (the earliest index entry
    of it by run date, then id; None without one), for the batch's nodes, by node.

    ``nodes``, ``labels``: each node's component over batch documents and index entries; ``index_dates``:
    the run date of every index entry among the nodes (the other nodes are the batch's)."""
    first_batch: dict[object, object] = {}
    earliest: dict[object, tuple[str, object]] = {}
    for node, component in zip(nodes.tolist(), labels.tolist(), strict=True):
        run_date = index_dates.get(node)
        if run_date is None:
            if component not in first_batch or node < first_batch[component]:
                first_batch[component] = node
        elif component not in earliest or (run_date, node) < earliest[component]:
            earliest[component] = (run_date, node)
    batch = [(n, c) for n, c in zip(nodes.tolist(), labels.tolist(), strict=True) if n not in index_dates]
    batch.sort(key=lambda nc: nc[0])
    matched = [earliest[c][1] if c in earliest else None for _, c in batch]
    return pd.DataFrame(
        {
            C.NODE: pd.Series([n for n, _ in batch], dtype=nodes.dtype),
            C.COMPONENT: pd.Series([first_batch[c] for _, c in batch], dtype=nodes.dtype),
            C.MATCHED_INDEX_ID: pd.Series(matched, dtype=object),
        }
    )


def matched_totals(
    members: pd.DataFrame, components: pd.DataFrame, n_documents: int, already: int
) -> tuple[ClusterTotals, int]:
    """(totals, documents that matched the index) of an incremental run's documents/ from
    ``cluster_members`` of the batch's nodes, their ``batch_components`` and the number of documents and
    of already indexed ones (each matches itself and is a duplicate)."""
    matched = components.set_index(C.NODE)[C.MATCHED_INDEX_ID].notna()
    flagged = (members[C.CLUSTER_ID] != members[C.ID]).to_numpy() | matched.reindex(members[C.ID]).to_numpy(
        dtype=bool
    )
    multi = members[members[C.CLUSTER_SIZE] > 1]
    sizes = members[C.CLUSTER_SIZE]
    totals = ClusterTotals(
        duplicates=int(flagged.sum()) + already,
        clusters=int(multi[C.CLUSTER_ID].nunique()),
        largest=int(sizes.max()) if len(sizes) else min(n_documents, 1),
    )
    return totals, int(matched.sum()) + already
