import numpy as np
import pytest

from simhash_spark.core.forest import within_k_forest
from simhash_spark.core.simhash import popcount
from tests.test_candidates_spark import brute_force_pairs, planted_fingerprints
from tests.test_components_spark import union_find


@pytest.mark.parametrize(("seed", "k"), [(1, 3), (2, 5), (3, 0)])
def test_forest_has_the_components_of_the_full_graph(seed, k):
    fps = planted_fingerprints(seed, n_random=300, n_centres=120, k=k)
    fps = np.concatenate([fps, fps[:40]])  # identical values too
    ids = list(range(len(fps)))
    full = brute_force_pairs(ids, fps, k)
    edges = within_k_forest(fps, k)
    u = fps.view(np.uint64)
    for i, j, d in edges:
        assert i < j and d == int(popcount(u[i] ^ u[j])) <= k
    want = union_find([(a, b) for a, b, _ in full])
    got = union_find([(i, j) for i, j, _ in edges])
    assert got == want
    assert len(edges) == len(want) - len(set(want.values()))  # a forest: nodes minus components


def test_star_like_hot_cluster_gives_few_edges():
    rng = np.random.default_rng(5)
    centre = int(rng.integers(0, 2**63))
    vals = {centre}
    while len(vals) < 3000:
        v = centre
        for b in rng.choice(64, size=int(rng.integers(1, 4)), replace=False):
            v ^= 1 << int(b)
        vals.add(v)
    fps = np.array(sorted(vals), dtype=np.uint64)
    edges = within_k_forest(fps, 3)
    assert len(edges) == len(fps) - 1  # one component, a spanning tree


@pytest.mark.parametrize("seed", [4, 5])
def test_forest_with_a_check_has_the_components_of_the_accepted_pairs(seed):
    """A pair predicate (per-pair k, a text check) is asked only about unconnected pairs, yet the
    components equal those of every pair that passes it."""
    fps = planted_fingerprints(seed, n_random=200, n_centres=100, k=6)
    ids = list(range(len(fps)))
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 300, size=len(fps))

    def ok(i: int, j: int, d: int) -> bool:  # stricter for short documents, and an arbitrary veto
        return d <= (2 if min(lengths[i], lengths[j]) < 100 else 6) and (i * 7 + j) % 5 != 0

    asked: list[tuple[int, int]] = []

    def accept(i: int, j: int, d: int) -> bool:
        asked.append((i, j))
        return ok(i, j, d)

    full = [(a, b) for a, b, d in brute_force_pairs(ids, fps, 6) if ok(a, b, d)]
    edges = within_k_forest(fps, 6, accept)
    assert union_find([(i, j) for i, j, _ in edges]) == union_find(full)
    assert all(ok(i, j, d) for i, j, d in edges)
    assert len(asked) <= len(brute_force_pairs(ids, fps, 6))
    assert len(asked) == len(set(asked)) and all(i < j for i, j in asked)  # each pair asked once, i < j
