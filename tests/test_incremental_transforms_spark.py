"""The incremental stage: already-indexed ids, the batch's components with their earliest index entry,
and pairs among index entries dropped."""

from simhash_spark import columns as C
from simhash_spark.transforms.incremental import batch_components, drop_index_pairs, mark_already_indexed


def test_known_ids_are_marked_and_only_fingerprinted_rows_change(spark):
    fps = spark.createDataFrame([("a", "ok"), ("b", "ok"), ("c", "empty")], "id string, status string")
    known = spark.createDataFrame([("b",), ("c",)], "id string")
    got = {r[C.ID]: r[C.STATUS] for r in mark_already_indexed(fps, known).collect()}
    assert got == {"a": "ok", "b": "already_indexed", "c": "empty"}


def test_components_carry_their_earliest_index_entry(spark):
    # batch b1, b2, b3; index entries i1 (2026-01-02), i0 (2026-01-01); b1-b2-i1-i0 one component, b3 alone
    assignments = spark.createDataFrame(
        [("b1", "b1"), ("b2", "b1"), ("i1", "b1"), ("i0", "b1")], "node string, component string"
    )
    batch = spark.createDataFrame([("b1",), ("b2",), ("b3",)], "id string")
    index = spark.createDataFrame([("i1", "2026-01-02"), ("i0", "2026-01-01")], "id string, run_date string")
    got = {
        r[C.NODE]: (r[C.COMPONENT], r[C.MATCHED_INDEX_ID])
        for r in batch_components(assignments, batch, index).collect()
    }
    assert got == {"b1": ("b1", "i0"), "b2": ("b1", "i0")}


def test_pairs_among_index_entries_only_are_dropped(spark):
    pairs = spark.createDataFrame(
        [("b1", "b2", 1), ("b1", "i0", 2), ("i0", "i1", 3)], "id_a string, id_b string, distance int"
    )
    index = spark.createDataFrame([("i0",), ("i1",)], "id string")
    got = {(r[C.ID_A], r[C.ID_B]) for r in drop_index_pairs(pairs, index).collect()}
    assert got == {("b1", "b2"), ("b1", "i0")}
