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
