"""Connected components of a graph that fits in memory (pure numpy), labelled like the distributed
algorithm: each node by the smallest node of its component.

Hook and compress: every edge between two trees hooks the larger root under the smaller one (so a root is
always the smallest node of its tree), then pointer jumping flattens every tree; repeat until no edge
joins two trees. Each round is a few vectorized passes over the edges, and the rounds are few (each
hooks every tree that touches a smaller one).
"""

from __future__ import annotations

import numpy as np


def component_labels(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(nodes, labels): every node with an edge, sorted, and the smallest node of its component. Nodes
    are any values numpy sorts as the job's ids sort (integers, strings)."""
    nodes, inverse = np.unique(np.concatenate([src, dst]), return_inverse=True)
    a, b = inverse[: len(src)], inverse[len(src) :]
    parent = np.arange(len(nodes))
    while True:
        ra, rb = parent[a], parent[b]
        lo, hi = np.minimum(ra, rb), np.maximum(ra, rb)
        joins = lo != hi
        if not joins.any():
            return nodes, nodes[parent]
        np.minimum.at(parent, hi[joins], lo[joins])
        while True:
            jumped = parent[parent]
            if np.array_equal(jumped, parent):
                break
            parent = jumped
