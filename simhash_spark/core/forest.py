"""Connected pieces of one hot bucket, locally: all-pairs Hamming in numpy, union-find, spanning forest.

A bucket with thousands of distinct fingerprints would put size² rows through the shuffle; its members
are instead gathered in one task, compared block by block with vectorized XOR + popcount, and only the
edges of a spanning forest of the "within k bits" graph leave the task (at most size − 1 of them). The
components are unchanged; only the list of pairs is shortened.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

BLOCK = 2048  # rows compared at once: BLOCK × size bytes of distances in memory


def within_k_forest(
    fps: np.ndarray, k: int, accept: Callable[[int, int, int], bool] | None = None
) -> list[tuple[int, int, int]]:
    """Spanning forest of the graph "Hamming distance ≤ k and ``accept(i, j, d)``" over ``fps`` (int64 or
    uint64).

    Returns (i, j, distance) index triples with i < j, one per union, in a deterministic order.
    ``accept`` (a per-pair threshold, a text check) is asked only about pairs not yet connected, so an
    expensive check runs about once per member instead of once per pair; the components are still those
    of the accepted pairs, since a pair skipped as connected could add no connection.
    """
    u = np.asarray(fps).view(np.uint64) if np.asarray(fps).dtype == np.int64 else np.asarray(fps, np.uint64)
    n = len(u)
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    edges: list[tuple[int, int, int]] = []
    for start in range(0, n, BLOCK):
        block = u[start : start + BLOCK]
        dist = np.bitwise_count(block[:, None] ^ u[None, :])
        rows, cols = np.nonzero(dist <= k)
        keep = cols > rows + start
        for r, c in zip(rows[keep].tolist(), cols[keep].tolist(), strict=True):
            i = r + start
            ri, rc = find(i), find(c)
            if ri != rc and (accept is None or accept(i, c, int(dist[r, c]))):
                parent[max(ri, rc)] = min(ri, rc)
                edges.append((i, c, int(dist[r, c])))
    return edges
