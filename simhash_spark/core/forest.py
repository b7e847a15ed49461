"""A spanning forest of fingerprints within a Hamming distance, locally: a breadth-first search with
vectorized Hamming tests.

``core.flood`` resolves the members of hot buckets with it when the check is not the n-gram Jaccard (or
pairs are accepted by their distance alone): each member taken from the queue is compared with every
member not reached yet in one XOR + popcount over a numpy array, and only the edges that reach a new
member are kept (at most size − 1 of them). The components are those of the accepted pairs; only the list
of pairs is shortened. A near-identical pile-up is one component, so the members still to reach shrink at
once and the work stays far below size² comparisons.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import numpy as np

from simhash_spark.core.simhash import popcount, to_unsigned


def within_k_forest(
    fps: np.ndarray, k: int, accept: Callable[[int, int, int], bool] | None = None
) -> list[tuple[int, int, int]]:
    """Spanning forest of the graph "Hamming distance ≤ k and ``accept(i, j, d)``" over ``fps`` (int64 or
    uint64).

    Returns (i, j, distance) index triples with i < j, one per member reached from another, in a
    deterministic order. ``accept`` (a per-pair threshold, a text check) is asked with i < j, at most
    once per pair, and only about pairs whose second member is not reached yet, so an expensive check
    runs about once per member instead of once per pair; the components are still those of the accepted
    pairs, since every accepted pair from a member to an unreached one is tried when the member is taken.
    """
    return spanning_search(fps, k, accept)[0]


def spanning_search(
    fps: np.ndarray,
    k: int,
    accept: Callable[[int, int, int], bool] | None = None,
    max_failures: int | None = None,
) -> tuple[list[tuple[int, int, int]], int]:
    """``within_k_forest``, and with ``max_failures`` each member taken from the queue stops trying its
    unreached neighbours after that many refusals of ``accept``. Returns the edges and the number of
    members stopped so (only there can a component miss an edge)."""
    u = to_unsigned(fps)
    n = len(u)
    reached = np.zeros(n, dtype=bool)
    rest = np.arange(n)  # members not reached yet (compacted as the search goes)
    edges: list[tuple[int, int, int]] = []
    stopped = 0
    for root in range(n):
        if reached[root]:
            continue
        reached[root] = True
        queue = deque([root])
        while queue:
            i = queue.popleft()
            rest = rest[~reached[rest]]
            if not len(rest):
                break
            dist = popcount(u[rest] ^ u[i])
            close = dist <= k
            failures = 0
            for c, d in zip(rest[close].tolist(), dist[close].tolist(), strict=True):
                a, b = (i, c) if i < c else (c, i)
                if accept is None or accept(a, b, d):
                    reached[c] = True
                    queue.append(c)
                    edges.append((a, b, d))
                    continue
                failures += 1
                if max_failures is not None and failures >= max_failures:
                    stopped += 1
                    break
    return edges, stopped
