"""The driver's assembly of small runs (``core.assemble_local``, ``report.collect_local``,
``core.spark_hash``) against its Spark twins (``transforms.clusters``, ``report.collect``, Spark's
``xxhash64``): the same clusters, clusters/ rows, totals and report data."""

import dataclasses
import itertools
import json
import random

import numpy as np
import pytest
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.config import load_config
from simhash_spark.core.assemble_local import batch_components as batch_components_local
from simhash_spark.core.assemble_local import cluster_members, cluster_rows, cluster_totals
from simhash_spark.core.spark_hash import xxhash64
from simhash_spark.demo.corpus import generate
from simhash_spark.pipeline import dedup
from simhash_spark.report import collect, collect_local
from simhash_spark.transforms.clusters import assign_clusters, cluster_table
from simhash_spark.transforms.incremental import batch_components

ID_TYPES = {"string": "string", "bigint": "long"}


def _ids(id_type, n, rng):
    if id_type == "string":  # unequal lengths, non-ASCII: the order Spark and Python agree on
        return [f"{rng.choice(['a', 'Zb', '新闻', 'é'])}-{i}" for i in range(n)]
    return [rng.randrange(-(1 << 62), 1 << 62) for _ in range(n)]


def _run(id_type, seed):
    """(ids, n_chars, nodes, labels, pairs) of random components labelled by their smallest node."""
    rng = random.Random(seed)
    ids = _ids(id_type, 120, rng)
    n_chars = {i: rng.choice([50, 80, 80, 200]) for i in ids}  # ties: the smallest id wins
    clustered = rng.sample(ids, 90)
    groups: list[list] = []
    while clustered:
        size = min(len(clustered), rng.choice([2, 2, 3, 5, 9]))
        groups.append(sorted(clustered[:size]))
        clustered = clustered[size:]
    nodes = [m for g in groups for m in g]
    labels = [g[0] for g in groups for _ in g]
    pairs = []
    for g in groups:
        for a, b in itertools.pairwise(g):
            sim = None if rng.random() < 0.3 else round(rng.uniform(0.8, 1.0), 3)
            pairs.append((a, b, rng.randrange(0, 13), sim, "verified" if sim else "close"))
        if len(g) > 2:  # a second pair for a member: the partner choice has something to choose
            pairs.append((g[0], g[-1], rng.randrange(0, 13), 0.95, "verified"))
    return ids, n_chars, np.array(nodes, dtype=object), np.array(labels, dtype=object), pairs


def _frames(spark, id_type, ids, n_chars, nodes, labels, pairs):
    docs = spark.createDataFrame(
        [(i, 1, "0", "ok", n_chars[i]) for i in ids],
        f"id {id_type}, fingerprint long, fingerprint_hex string, status string, n_chars int",
    )
    comps = spark.createDataFrame(
        list(zip(nodes, labels, strict=True)), f"node {id_type}, component {id_type}"
    )
    pair_frame = spark.createDataFrame(
        pairs, f"id_a {id_type}, id_b {id_type}, distance int, similarity double, reason string"
    )
    return docs, comps, pair_frame


@pytest.mark.parametrize("id_type", list(ID_TYPES))
@pytest.mark.parametrize("policy", ["min_id", "longest_text"])
def test_driver_clusters_equal_the_spark_clusters(spark, id_type, policy):
    ids, n_chars, nodes, labels, pairs = _run(id_type, seed=len(policy))
    docs, comps, _ = _frames(spark, id_type, ids, n_chars, nodes, labels, pairs)
    documents = assign_clusters(docs, comps, representative=policy)
    members = cluster_members(nodes, labels, n_chars, representative=policy)
    in_spark = sorted(
        (r[C.ID], r[C.CLUSTER_ID], r[C.CLUSTER_SIZE])
        for r in documents.where(F.col(C.CLUSTER_SIZE) > 1).collect()
    )
    assert list(members.itertuples(index=False, name=None)) == in_spark
    spark_clusters = sorted(tuple(r) for r in cluster_table(documents).collect())
    assert [tuple(r) for r in cluster_rows(members).itertuples(index=False, name=None)] == spark_clusters
    totals = cluster_totals(members, len(ids))
    assert totals.duplicates == documents.where(F.col(C.IS_DUPLICATE)).count()
    assert totals.clusters == len(spark_clusters)
    assert totals.largest == max(r[2] for r in in_spark)
    smallest = dict(zip(nodes.tolist(), labels.tolist(), strict=True))
    moved = sum(cid != smallest[i] for i, cid in zip(members[C.ID], members[C.CLUSTER_ID], strict=True))
    assert (moved > 0) == (policy == "longest_text")  # the policy changed some representatives


def test_no_clusters():
    members = cluster_members(
        np.array([], dtype=object), np.array([], dtype=object), {}, representative="min_id"
    )
    assert cluster_rows(members).empty
    assert cluster_totals(members, 5) == cluster_totals(members, 5).__class__(0, 0, 1)
    assert cluster_totals(members, 0).largest == 0


def _texts(spark, id_type, ids):
    texts = {i: f"text of {i}" for i in ids}
    return texts, spark.createDataFrame(list(texts.items()), f"id {id_type}, text string")


@pytest.mark.parametrize("id_type", list(ID_TYPES))
def test_driver_report_data_equals_the_spark_report_data(spark, monkeypatch, id_type):
    # a sample smaller than the similarities: which ones are drawn must agree too
    monkeypatch.setattr(collect, "SIMILARITY_SAMPLE", 9)
    monkeypatch.setattr(collect_local, "SIMILARITY_SAMPLE", 9)
    ids, n_chars, nodes, labels, pairs = _run(id_type, seed=7)
    docs, comps, pair_frame = _frames(spark, id_type, ids, n_chars, nodes, labels, pairs)
    texts, text_frame = _texts(spark, id_type, ids)
    documents = assign_clusters(docs, comps, representative="min_id")
    in_spark = collect.collect_report({}, documents, pair_frame, text_frame)
    members = cluster_members(nodes, labels, n_chars, representative="min_id")
    on_driver = collect_local.local_report(
        {}, members, pairs, lambda wanted: {i: texts[i] for i in wanted}, id_kind=ID_TYPES[id_type]
    )
    assert len(in_spark.examples) == collect.EXAMPLES and len(in_spark.pair_similarities) == 9
    assert on_driver == in_spark


@pytest.mark.parametrize("id_type", list(ID_TYPES))
def test_report_of_a_spark_run_summarized_on_the_driver_equals_its_aggregations(spark, monkeypatch, id_type):
    monkeypatch.setattr(collect, "SIMILARITY_SAMPLE", 9)
    monkeypatch.setattr(collect_local, "SIMILARITY_SAMPLE", 9)
    ids, n_chars, nodes, labels, pairs = _run(id_type, seed=11)
    docs, comps, pair_frame = _frames(spark, id_type, ids, n_chars, nodes, labels, pairs)
    _, text_frame = _texts(spark, id_type, ids)
    documents = assign_clusters(docs, comps, representative="longest_text")
    aggregated = collect.collect_report({}, documents, pair_frame, text_frame)

    def no_aggregation(*_args):
        raise AssertionError("summarized on the driver: no Spark aggregation")

    monkeypatch.setattr(collect, "_sizes_and_chosen", no_aggregation)
    on_driver = collect.collect_report({}, documents, pair_frame, text_frame, on_driver=True)
    assert len(aggregated.examples) == collect.EXAMPLES and len(aggregated.pair_similarities) == 9
    assert on_driver == aggregated


def test_spark_hash_is_sparks_xxhash64(spark):
    row = spark.sql(
        "SELECT xxhash64('新闻-1') s, xxhash64(CAST(-7 AS BIGINT)) l, xxhash64(CAST(7 AS INT)) i, "
        "xxhash64(CAST(3 AS TINYINT)) t, xxhash64(CAST(-3 AS SMALLINT)) h, xxhash64('a', 'b') ss, "
        "xxhash64(CAST(1 AS BIGINT), CAST(2 AS BIGINT)) ll"
    ).first()
    assert tuple(row) == (
        xxhash64(("新闻-1",), "string"),
        xxhash64((-7,), "long"),
        xxhash64((7,), "int"),
        xxhash64((3,), "int"),
        xxhash64((-3,), "int"),
        xxhash64(("a", "b"), "string"),
        xxhash64((1, 2), "long"),
    )


def _outputs(spark, raw, policy, local_max_edges, monkeypatch):
    """A run linked by Spark (documents, clusters, deduplicated, stats, documents/' plan, the report's
    data and how many frames it collected with toPandas)."""
    overrides = [
        "cluster.local_max_documents=0",
        f"cluster.local_max_edges={local_max_edges}",
        f"cluster.representative={policy}",
    ]
    res = dedup(spark, raw, load_config(overrides=overrides))

    def rows(df):
        return sorted(json.dumps(r.asDict(), sort_keys=True, default=str) for r in df.collect())

    out = {
        "documents": rows(res.documents),
        "clusters": rows(res.clusters),
        "deduplicated": rows(res.deduplicated),
        "stats": {k: v for k, v in res.stats.items() if not k.startswith("components_")},
        "method": res.stats["components_method"],
        "plan": res.documents._jdf.queryExecution().executedPlan().toString(),
    }
    collected = []
    frame_class = type(res.pairs)  # classic or Connect
    to_pandas = frame_class.toPandas
    monkeypatch.setattr(frame_class, "toPandas", lambda df: collected.append(1) or to_pandas(df))
    out["report"] = dataclasses.replace(res.report(local_max_edges), summary={})
    out["report_collects"] = len(collected)
    monkeypatch.undo()
    res.unpersist()
    return out


@pytest.mark.heavy
@pytest.mark.parametrize("policy", ["min_id", "longest_text"])
def test_a_spark_run_whose_components_were_labelled_on_the_driver_is_assembled_there(
    spark, policy, monkeypatch
):
    """The clusters stage labels a graph of at most ``cluster.local_max_edges`` edges on the driver: the
    documents are then clustered there too (no window over the components, no totals job), with the outputs
    and statistics of the Spark assembly that a larger graph takes."""
    raw = spark.createDataFrame(generate(40, seed=11, dup_share=0.7).to_pandas())
    labelled = _outputs(spark, raw, policy, 10**6, monkeypatch)
    distributed = _outputs(spark, raw, policy, 0, monkeypatch)
    assert (labelled["method"], distributed["method"]) == ("local", "distributed")
    for key in ("documents", "clusters", "deduplicated", "stats"):
        assert labelled[key] == distributed[key], key
    assert labelled["stats"]["duplicates"] > 5
    assert "Window" in distributed["plan"] and "Window" not in labelled["plan"]
    # the report's data: summarized from the clusters at hand (only the pairs collected) = aggregated
    assert labelled["report"] == distributed["report"]
    assert (labelled["report_collects"], distributed["report_collects"]) == (1, 0)


@pytest.mark.parametrize("id_type", list(ID_TYPES))
def test_driver_batch_components_equal_the_spark_ones(spark, id_type):
    """An incremental run linked on the driver labels the batch's components and finds their earliest
    index entry there (``core.assemble_local.batch_components``): the rows of ``transforms.incremental``'s."""
    rng = random.Random(7)
    _, _, nodes, labels, _ = _run(id_type, seed=3)
    dates = {n: f"2026-11-0{rng.randrange(1, 4)}" for n in nodes.tolist() if rng.random() < 0.4}
    local = batch_components_local(nodes, labels, dates)
    comps = spark.createDataFrame(
        list(zip(nodes.tolist(), labels.tolist(), strict=True)), f"node {id_type}, component {id_type}"
    )
    batch_ids = spark.createDataFrame([(n,) for n in nodes.tolist() if n not in dates], f"id {id_type}")
    index = spark.createDataFrame(list(dates.items()), f"id {id_type}, run_date string")
    in_spark = sorted(tuple(r) for r in batch_components(comps, batch_ids, index).collect())
    assert list(local.itertuples(index=False, name=None)) == in_spark
    assert local[C.MATCHED_INDEX_ID].notna().any() and local[C.MATCHED_INDEX_ID].isna().any()
    # a component's earliest entry is by run date first: some are not the smallest id of its entries
    entries: dict = {}
    for n, c in zip(nodes.tolist(), labels.tolist(), strict=True):
        if n in dates:
            entries.setdefault(c, []).append(n)
    assert any(min(e) != min(e, key=lambda n: (dates[n], n)) for e in entries.values())
