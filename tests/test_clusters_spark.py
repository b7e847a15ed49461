"""The cluster stage: one documents row per input row, representatives by policy, clusters/ and
deduplicated/ rows."""

from simhash_spark import columns as C
from simhash_spark.transforms.clusters import (
    assign_clusters,
    cluster_table,
    drop_duplicates,
    duplicate_ids_of,
)

DOCS = "id long, fingerprint long, fingerprint_hex string, status string, n_chars int, published string"


def docs_and_components(spark):
    rows = [
        (1, 1, "1", "ok", 100, "2026-01-03"),
        (2, 1, "1", "ok", 300, "2026-01-01"),
        (3, 2, "2", "ok", 200, None),
        (4, 9, "9", "ok", 50, "2026-01-02"),
        (5, None, None, "empty", 0, None),
    ]
    comps = spark.createDataFrame([(1, 1), (2, 1), (3, 1)], "node long, component long")
    return spark.createDataFrame(rows, DOCS), comps


def test_every_document_gets_one_row_and_its_cluster(spark):
    docs, comps = docs_and_components(spark)
    out = {r[C.ID]: r for r in assign_clusters(docs, comps, representative="min_id").collect()}
    assert sorted(out) == [1, 2, 3, 4, 5]
    assert [
        (out[i][C.CLUSTER_ID], out[i][C.CLUSTER_SIZE], out[i][C.IS_DUPLICATE]) for i in (1, 2, 3, 4, 5)
    ] == [(1, 3, False), (1, 3, True), (1, 3, True), (4, 1, False), (5, 1, False)]


def test_representative_policies(spark):
    docs, comps = docs_and_components(spark)
    for policy, rep in (("longest_text", 2), ("min:published", 2), ("max:published", 1), ("min_id", 1)):
        out = assign_clusters(docs, comps, representative=policy, extra=("published",)).collect()
        assert {r[C.CLUSTER_ID] for r in out if r[C.ID] in (1, 2, 3)} == {rep}, policy


def test_cluster_table_and_deduplicated_rows(spark):
    docs, comps = docs_and_components(spark)
    documents = assign_clusters(docs, comps, representative="min_id")
    (cluster,) = cluster_table(documents).collect()
    assert (cluster[C.CLUSTER_ID], cluster[C.SIZE], cluster[C.MEMBER_IDS]) == (1, 3, [1, 2, 3])
    raw = spark.createDataFrame([(i, f"t{i}") for i in range(1, 6)], "doc long, body string")
    kept = drop_duplicates(raw, duplicate_ids_of(documents), id_column="doc")
    assert sorted(r["doc"] for r in kept.collect()) == [1, 4, 5]
