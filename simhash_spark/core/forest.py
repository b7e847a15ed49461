"""Connected pieces of one hot bucket, locally: a breadth-first search with vectorized Hamming tests.

A bucket with thousands of distinct fingerprints would put size² pairs into the output; its members are
instead gathered in one task and searched breadth-first: each member taken from the queue is compared
with every member not reached yet in one XOR + popcount over a numpy array, and only the edges that
reach a new member leave the task (at most size − 1 of them). The components are unchanged; only the
list of pairs is shortened. A near-identical pile-up is one component, so the members still to reach
shrink at once and the work stays far below size² comparisons.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence

import numpy as np

from simhash_spark.core.rules import PairRule
from simhash_spark.core.simhash import popcount, to_unsigned
from simhash_spark.core.sketch_bands import share_band


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
    u = to_unsigned(fps)
    n = len(u)
    reached = np.zeros(n, dtype=bool)
    rest = np.arange(n)  # members not reached yet (compacted as the search goes)
    edges: list[tuple[int, int, int]] = []
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
            for c, d in zip(rest[close].tolist(), dist[close].tolist(), strict=True):
                a, b = (i, c) if i < c else (c, i)
                if accept is None or accept(a, b, d):
                    reached[c] = True
                    queue.append(c)
                    edges.append((a, b, d))
    return edges


_M64 = (1 << 64) - 1


def accepted_forest(
    fps: np.ndarray,
    n_chars: Sequence[int],
    texts: Sequence[str | None],
    titles: Sequence[int | None],
    rule: PairRule,
    sketch_keys: np.ndarray | None = None,
) -> list[tuple[int, int, int, float | None, str]]:
    """Spanning-forest edges of the graph of pairs ``rule`` accepts among one bucket's members:
    (i, j, distance, similarity or None, reason) with i < j. ``texts``, ``titles`` (None: no title) and
    ``sketch_keys`` (with sketch bands: ``core.sketch_bands.stored_keys`` of the members) are per member;
    texts are compared only for pairs within their k, or sharing a sketch band, whose titles agree."""
    found: dict[tuple[int, int], tuple[float | None, str]] = {}

    def accept(i: int, j: int, d: int) -> bool:
        ti, tj = titles[i], titles[j]
        title_distance = None if ti is None or tj is None else ((ti ^ tj) & _M64).bit_count()
        within_k = d <= rule.k(n_chars[i], n_chars[j])
        band = (
            not within_k
            and sketch_keys is not None
            and bool(share_band(sketch_keys[[i]], sketch_keys[[j]])[0])
        )
        if not (within_k or band) or not rule.titles_agree(title_distance):
            return False
        checked = rule.needs_text_check(d, within_k=within_k)
        sim = rule.similarity(texts[i] or "", texts[j] or "") if checked else None
        reason = rule.reason(
            d, n_chars[i], n_chars[j], similarity=sim, title_distance=title_distance, shares_band=band
        )
        if reason is None:
            return False
        found[(i, j)] = (sim, reason)
        return True

    return [(i, j, d, *found[(i, j)]) for i, j, d in within_k_forest(fps, rule.largest_k, accept)]
