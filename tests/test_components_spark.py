"""Connected components equal a union-find reference."""

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.transforms.components import connected_components


def union_find(edges):
    parent = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    nodes = {x for e in edges for x in e}
    groups = {}
    for x in nodes:
        groups.setdefault(find(x), []).append(x)
    return {x: min(g) for g in groups.values() for x in g}


def run(spark, edges):
    df = spark.createDataFrame(edges, [C.SRC, C.DST])
    res = connected_components(df, max_iterations=60)
    got = {r[C.NODE]: r[C.COMPONENT] for r in res.assignments.collect()}
    return got, res.iterations, res.assignments.count()


def check(spark, edges):
    got, iterations, rows = run(spark, edges)
    want = union_find(edges)
    assert got == want
    assert rows == len(want), "a node was assigned twice"
    return iterations


@pytest.mark.heavy
def test_random_graphs(spark):
    rng = random.Random(4)
    for n, m in ((50, 30), (400, 380), (1000, 700)):
        edges = [(rng.randrange(n), rng.randrange(n)) for _ in range(m)]
        check(spark, [(a, b) for a, b in edges if a != b])


@pytest.mark.heavy
def test_long_chain_in_shuffled_order(spark):
    nodes = list(range(3000))
    random.Random(1).shuffle(nodes)
    edges = list(itertools.pairwise(nodes))
    iterations = check(spark, edges)
    assert iterations <= 30


def test_star_and_string_ids(spark):
    star = [("hub-z", f"leaf-{i:04d}") for i in range(2000)]
    other = [("a", "b"), ("b", "c"), ("x", "y")]
    check(spark, star + other)


def test_self_loops_and_duplicate_edges(spark):
    check(spark, [(1, 2), (2, 1), (1, 2), (3, 3), (3, 4)])


def test_the_case_two_roots_must_not_survive(spark):
    # after one small-star round node 4 links to both 1 and 2; the fixpoint check must not stop there
    check(spark, [(5, 2), (5, 4), (4, 1)])


@pytest.mark.slow
def test_100k_chain_and_200k_star_stay_bounded(spark):
    n = 100_000
    chain = spark.range(n - 1).select(F.col("id").alias(C.SRC), (F.col("id") + 1).alias(C.DST))
    res = connected_components(chain, max_iterations=60)
    row = res.assignments.agg(F.count(F.lit(1)).alias("n"), F.max(C.COMPONENT).alias("c")).first()
    assert row["n"] == n and row["c"] == 0
    assert res.iterations <= 40
    star = spark.range(1, 200_001).select(F.lit(0).cast("long").alias(C.SRC), F.col("id").alias(C.DST))
    res2 = connected_components(star, max_iterations=60)
    row2 = res2.assignments.agg(F.count(F.lit(1)).alias("n"), F.max(C.COMPONENT).alias("c")).first()
    assert row2["n"] == 200_001 and row2["c"] == 0
    assert res2.iterations <= 3
    print(f"iterations: chain {res.iterations}, star {res2.iterations}")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), max_size=120), st.booleans())
def test_local_labels_equal_union_find(edges, as_strings):
    import numpy as np

    from simhash_spark.core.components import component_labels

    if as_strings:
        edges = [(f"d{a:03d}", f"d{b:03d}") for a, b in edges]
    src = np.array([a for a, _ in edges] or [0])[: len(edges)]
    dst = np.array([b for _, b in edges] or [0])[: len(edges)]
    nodes, labels = component_labels(src, dst)
    assert dict(zip(nodes.tolist(), labels.tolist(), strict=True)) == union_find(edges)


def test_the_driver_path_gives_the_distributed_labels(spark):
    rng = random.Random(9)
    nodes = [f"doc-{i:05d}" for i in range(2000)]
    chain = nodes[:500]
    rng.shuffle(chain)
    edges = list(itertools.pairwise(chain)) + [(rng.choice(nodes), rng.choice(nodes)) for _ in range(900)]
    edges = [(a, b) for a, b in edges if a != b]
    df = spark.createDataFrame(edges, [C.SRC, C.DST])
    local = connected_components(df, local_max_edges=10**6)
    distributed = connected_components(df, max_iterations=60, local_max_edges=0)
    assert (local.method, local.iterations, distributed.method) == ("local", 0, "distributed")
    got = {r[C.NODE]: r[C.COMPONENT] for r in local.assignments.collect()}
    assert got == {r[C.NODE]: r[C.COMPONENT] for r in distributed.assignments.collect()} == union_find(edges)
    assert local.assignments.schema == distributed.assignments.schema
