import numpy as np
import pytest

from simhash_spark.core.forest import within_k_forest
from tests.test_candidates_spark import brute_force_pairs, planted_fingerprints
from tests.test_components_spark import union_find


@pytest.mark.parametrize(("seed", "k"), [(1, 3), (2, 5), (3, 0)])
def test_forest_has_the_components_of_the_full_graph(seed, k, monkeypatch):
    monkeypatch.setattr("simhash_spark.core.forest.BLOCK", 97)  # several blocks, uneven last one
    fps = planted_fingerprints(seed, n_random=300, n_centres=120, k=k)
    fps = np.concatenate([fps, fps[:40]])  # identical values too
    ids = list(range(len(fps)))
    full = brute_force_pairs(ids, fps, k)
    edges = within_k_forest(fps, k)
    u = fps.view(np.uint64)
    for i, j, d in edges:
        assert i < j and d == int(np.bitwise_count(u[i] ^ u[j])) <= k
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
