"""The band join: candidate pairs whose fingerprints agree on a table key, within k bits.

Two ways, same pairs: ``in_task_band_join`` ships the distinct fingerprints to every task and sorts whole
tables in numpy (no exploded rows); ``partitioned_band_keys`` + ``band_join`` explode one row per
(fingerprint, table) and shuffle them, for runs too large to ship."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.functions import pandas_udf
from pyspark.sql.pandas.types import to_arrow_schema, to_arrow_type
from pyspark.sql.types import DataType

from simhash_spark import columns as C
from simhash_spark.core.bucket_pairs import TableJoin, band_join_finds, bucket_pairs, join_tables
from simhash_spark.core.check_filter import SKETCH, CheckFilter
from simhash_spark.core.simhash import popcount, to_unsigned
from simhash_spark.core.sketch_bands import (
    BANDS,
    NO_KEY,
    arrow_sketch_matrix,
    band_pairs,
    rows_share_band,
    sketch_keys,
    stored_keys,
)
from simhash_spark.core.sketch_filter import rows_may_pass
from simhash_spark.transforms.classic import spark_context

SKETCH_PAIR = -1  # the band of a pair row only the sketch bands gave (in_task_band_join)
_MIN_ROWS = 1 << 16  # rows gathered before comparing: numpy calls per Arrow batch (1,000 rows) would dominate


def hamming_distance(a: Column, b: Column) -> Column:
    """Differing bits of two LONG fingerprints; correct for negative values (two's complement)."""
    return F.bit_count(a.bitwiseXOR(b))


def _masks(masks: list[int]) -> Column:
    """The table masks as one array literal: the plan stays the same size whatever the number of tables
    (hundreds for LSH designs), instead of one expression per table."""
    return F.lit(masks).cast("array<bigint>")


def explode_band_keys(fps: DataFrame, *, masks: list[int]) -> DataFrame:
    """One row per (document, table).

    In: ``id``, ``fingerprint`` (non-null). Out: ``band``, ``band_key``, ``id``, ``fingerprint``.
    """
    return fps.select(C.ID, C.FINGERPRINT, F.posexplode(_masks(masks)).alias("_t", "_m")).select(
        F.col("_t").alias(C.BAND),
        F.col(C.FINGERPRINT).bitwiseAND(F.col("_m")).alias(C.KEY),
        F.col(C.ID),
        F.col(C.FINGERPRINT),
    )


def partitioned_band_keys(fps: DataFrame, *, masks: list[int], skip: DataFrame | None = None) -> DataFrame:
    """The band keys, hash-partitioned on (``band``, ``band_key``) and sorted within partitions, so that
    every bucket is one run of rows in one partition (what ``band_join`` compares).

    In: ``id``, ``fingerprint``; optionally ``skip`` (``band``, ``band_key``: hot buckets resolved
    elsewhere, small enough to broadcast). Out: ``band``, ``band_key``, ``id``, ``fingerprint``.
    """
    keyed = explode_band_keys(fps, masks=masks)
    if skip is not None:
        keyed = keyed.join(F.broadcast(skip.select(C.BAND, C.KEY)), on=[C.BAND, C.KEY], how="left_anti")
    return keyed.repartition(C.BAND, C.KEY).sortWithinPartitions(C.BAND, C.KEY)


def band_join(
    keys: DataFrame, *, masks: list[int], max_distance: int, min_rows: int = _MIN_ROWS
) -> DataFrame:
    """Every pair sharing a table key within ``max_distance`` bits, once.

    In: ``partitioned_band_keys``. Out: ``id_a`` < ``id_b``, ``distance``.
    Each partition arrives sorted by (table, key), so its buckets are runs of rows: they are compared in
    place with vectorized popcounts (``core.bucket_pairs``) and only pairs within k leave the task. A
    pair colliding in several tables is kept from the first of them, so no distinct is needed.
    ``min_rows``: rows gathered before comparing (a bucket spanning Arrow batches is held back whole).
    """
    id_type = keys.schema[C.ID].dataType.simpleString()
    table_masks = np.array(masks, dtype=np.int64)

    def pairs(tbl: pa.Table) -> pa.RecordBatch:
        i, j, d = bucket_pairs(
            tbl.column(C.BAND).to_numpy(),
            tbl.column(C.KEY).to_numpy(),
            tbl.column(C.FINGERPRINT).to_numpy(),
            k=max_distance,
            masks=table_masks,
        )
        ids = tbl.column(C.ID).combine_chunks()
        a, b = ids.take(pa.array(i)), ids.take(pa.array(j))
        first = pc.less(a, b)
        return pa.RecordBatch.from_arrays(
            [pc.if_else(first, a, b), pc.if_else(first, b, a), pa.array(d, pa.int32())],
            names=[C.ID_A, C.ID_B, C.DISTANCE],
        )

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        pending: list[pa.RecordBatch] = []
        rows = 0
        for batch in batches:
            pending.append(batch)
            rows += batch.num_rows
            if rows < min_rows:
                continue
            tbl = pa.Table.from_batches(pending).combine_chunks()
            t, key = tbl.column(C.BAND).to_numpy(), tbl.column(C.KEY).to_numpy()
            # the last bucket may continue in the next batch: keep it back
            earlier = np.flatnonzero((t != t[-1]) | (key != key[-1]))
            cut = int(earlier[-1]) + 1 if len(earlier) else 0
            if cut == 0:
                continue
            yield pairs(tbl.slice(0, cut))
            rest = tbl.slice(cut)
            pending, rows = rest.to_batches(), rest.num_rows
        if rows:
            yield pairs(pa.Table.from_batches(pending).combine_chunks())

    return keys.select(C.BAND, C.KEY, C.ID, C.FINGERPRINT).mapInArrow(
        run, schema=f"{C.ID_A} {id_type}, {C.ID_B} {id_type}, {C.DISTANCE} int"
    )


# driver heap per collected (id, fingerprint) while the Arrow batches are gathered: 8 bytes of fingerprint
# and an id (a string id of ~20 characters), doubled for the JVM's own overhead
COLLECT_BYTES = 64


def in_task_parallelism(spark: SparkSession, n_fingerprints: int, *, sketches: bool = False) -> int | None:
    """Tasks for ``in_task_band_join`` (the default parallelism), or None where it must not run: Spark
    Connect has no SparkContext to broadcast with, and the driver collects every fingerprint (with
    ``sketches``, every sketch too: as much again) first, so they must fit a quarter of its heap (a 1 GB
    driver: ~4 M)."""
    per_row = COLLECT_BYTES * (2 if sketches else 1)
    sc = spark_context(spark)
    if sc is None or sc._jvm is None:
        return None
    tasks = int(sc.defaultParallelism)
    heap = int(sc._jvm.java.lang.Runtime.getRuntime().maxMemory())
    return tasks if n_fingerprints * per_row <= heap // 4 else None


@dataclass(frozen=True)
class Collected:
    """(id, fingerprint) of every representative, on the driver: what the band join inside tasks ships,
    and what the design choice counts; with sketch bands, each one's band keys too; with the sketch
    filter judged in the tasks, each one's sketch."""

    ids: pa.Array  # of the id column's Arrow type
    fingerprints: np.ndarray  # int64
    id_type: DataType
    sketch_keys: np.ndarray | None = None  # (n, BANDS) uint32, core.sketch_bands.sketch_keys
    sketches: np.ndarray | None = None  # (n, 32) uint8, core.sketch_bands.arrow_sketch_matrix
    has_sketch: np.ndarray | None = None  # (n,) bool: which rows have a sketch


def _arrow_of(frame: DataFrame) -> pa.Table:
    """``frame`` collected as an Arrow table (no pandas conversion, no Python object per value)."""
    if hasattr(frame, "toArrow"):  # Spark 4.0+
        return frame.toArrow()
    schema = to_arrow_schema(frame.schema)
    batches = frame._collect_as_arrow()  # type: ignore[operator]  # Spark 3.5: toArrow is 4.0+
    return pa.Table.from_batches(batches, schema=schema)


def collect_fingerprints(
    reps: DataFrame, summaries: DataFrame | None = None, *, keys: bool = True, sketches: bool = False
) -> Collected:
    """In: ``reps`` (``id``, ``fingerprint``); ``summaries`` (``id``, ``check_summary``: the sketches), from
    which the sketch bands' ``keys`` and, with ``sketches``, the sketches themselves are kept. One action
    each."""
    id_type = reps.schema[C.ID].dataType
    table = _arrow_of(reps.select(C.ID, C.FINGERPRINT))
    ids = table.column(C.ID).combine_chunks().cast(to_arrow_type(id_type))
    fingerprints = table.column(C.FINGERPRINT).to_numpy().astype(np.int64, copy=False)
    if summaries is None or not (keys or sketches):
        return Collected(ids, fingerprints, id_type)
    stored = _arrow_of(summaries.select(C.ID, C.CHECK_SUMMARY))
    # a representative without a sketch (a short text) has none here, so no key in any band
    at = pc.index_in(ids, value_set=stored.column(C.ID).combine_chunks().cast(ids.type))
    found = at.is_valid().to_numpy(zero_copy_only=False)
    held, present = arrow_sketch_matrix(stored.column(C.CHECK_SUMMARY))
    matrix = np.zeros((len(ids), held.shape[1]), dtype=np.uint8)
    has_sketch = np.zeros(len(ids), dtype=bool)
    rows = at.drop_null().to_numpy()
    matrix[found], has_sketch[found] = held[rows], present[rows]
    return Collected(
        ids,
        fingerprints,
        id_type,
        sketch_keys=sketch_keys(matrix) if keys else None,
        sketches=matrix if sketches else None,
        has_sketch=has_sketch if sketches else None,
    )


def in_task_band_join(
    spark: SparkSession,
    reps: Collected,
    *,
    masks: list[int],
    max_distance: int,
    hot_bucket_limit: int,
    tasks: int,
    check: CheckFilter | None = None,
    flood: np.ndarray | None = None,
) -> DataFrame:
    """The band join with every table sorted inside a task: ``reps`` is broadcast, and each of ``tasks``
    tasks joins every ``tasks``-th table (``core.bucket_pairs.join_tables``: each pair once over all
    tables, buckets over ``hot_bucket_limit`` left to ``core.flood``, and so the pairs among the ``flood``
    fingerprints, ``core.bucket_pairs.flood_rows``).

    With ``reps.sketch_keys`` (hot keys already dropped, ``core.sketch_bands.drop_hot``), each task also
    joins every ``tasks``-th sketch band: the pairs sharing a band that the band join does not give, as
    pair rows with ``band`` = ``SKETCH_PAIR``.

    With ``check`` (the sketch filter) and ``reps.sketches``, each pair is judged where it is found, as
    ``transforms.verify.drop_unreachable`` would judge it from the stored sketches: ``may_pass``
    (``CheckFilter.may_pass``) and ``shares_band`` (``core.sketch_bands.stored_share_band``); without,
    both are null.

    Out: pair rows (``id_a`` < ``id_b``, ``distance``, ``may_pass``, ``shares_band``; bucket columns null)
    and bucket rows (``band``, ``band_key``, ``bucket_size`` of every hot bucket and each table's ten
    largest; pair columns null).
    """
    table_masks = np.array(masks, dtype=np.int64)
    shipped = spark.sparkContext.broadcast(
        (reps.ids, reps.fingerprints, reps.sketch_keys, _judge(reps, check), flood)
    )
    n_tasks = max(1, min(tasks, max(len(masks), BANDS if reps.sketch_keys is not None else 0)))

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ids, fps, keys, judged_by, flooded = shipped.value
        for batch in batches:
            for group in batch.column(0).to_pylist():
                joined = join_tables(
                    fps,
                    table_masks,
                    range(group, len(masks), n_tasks),
                    k=max_distance,
                    limit=hot_bucket_limit,
                    flood=flooded,
                )
                yield _joined_batch(ids, joined, judged=_judged(judged_by, joined))
                if keys is not None:
                    finds = band_join_finds(fps, table_masks, max_distance, flooded)
                    i, j = band_pairs(keys, range(group, BANDS, n_tasks), skip=finds)
                    d = popcount(to_unsigned(fps[i]) ^ to_unsigned(fps[j])).astype(np.int32)
                    marked = TableJoin(i, j, d, [])
                    yield _joined_batch(ids, marked, band=SKETCH_PAIR, judged=_judged(judged_by, marked))

    id_type = reps.id_type.simpleString()
    schema = (
        f"{C.ID_A} {id_type}, {C.ID_B} {id_type}, {C.DISTANCE} int, {C.MAY_PASS} boolean, "
        f"{C.SHARES_BAND} boolean, {C.BAND} int, {C.KEY} bigint, {C.BUCKET_SIZE} bigint"
    )
    return spark.range(0, n_tasks, 1, n_tasks).mapInArrow(run, schema=schema)


def _judge(reps: Collected, check: CheckFilter | None) -> tuple[np.ndarray, np.ndarray, float] | None:
    """What the tasks judge pairs with: the sketches, which rows have one, and the check's threshold."""
    if check is None or reps.sketches is None or reps.has_sketch is None:
        return None
    if check.kind != SKETCH:
        raise ValueError(f"pairs are judged in the band join's tasks by sketches, not by a {check.kind}")
    return reps.sketches, reps.has_sketch, check.min_similarity


def _judged(
    judge: tuple[np.ndarray, np.ndarray, float] | None, joined: TableJoin
) -> tuple[np.ndarray, np.ndarray] | None:
    """(may pass the sketch filter, the sketches share a band) of each of a task's pairs."""
    if judge is None:
        return None
    sketches, present, min_similarity = judge
    i, j = joined.i, joined.j
    # band keys from the sketches, not the shipped ones: those lack the hot keys, and a pair sharing a hot
    # key shares a band all the same (as ``core.sketch_bands.stored_share_band`` says of stored sketches)
    return rows_may_pass(sketches, present, i, j, min_similarity), rows_share_band(sketches, i, j)


def _joined_batch(
    id_values: pa.Array,
    joined: TableJoin,
    band: int | None = None,
    judged: tuple[np.ndarray, np.ndarray] | None = None,
) -> pa.RecordBatch:
    """A task's pairs (as ids, their ``band`` null or the given mark, judged or not) and notable buckets,
    in ``in_task_band_join``'s one schema."""
    n_pairs, n_buckets = len(joined.i), len(joined.buckets)
    pair_bands = pa.nulls(n_pairs, pa.int32()) if band is None else pa.array([band] * n_pairs, pa.int32())
    a, b = id_values.take(pa.array(joined.i)), id_values.take(pa.array(joined.j))
    first = pc.less(a, b)  # positions follow the collected order, not the ids' order
    no_ids = pa.nulls(n_buckets, id_values.type)
    size, bands, key = zip(*joined.buckets, strict=True) if n_buckets else ((), (), ())
    flags = [pa.nulls(n_pairs, pa.bool_())] * 2 if judged is None else [pa.array(f) for f in judged]
    no_flags = pa.nulls(n_buckets, pa.bool_())
    return pa.RecordBatch.from_arrays(
        [
            pa.concat_arrays([pc.if_else(first, a, b), no_ids]),
            pa.concat_arrays([pc.if_else(first, b, a), no_ids]),
            pa.concat_arrays([pa.array(joined.distance, pa.int32()), pa.nulls(n_buckets, pa.int32())]),
            pa.concat_arrays([flags[0], no_flags]),
            pa.concat_arrays([flags[1], no_flags]),
            pa.concat_arrays([pair_bands, pa.array(bands, pa.int32())]),
            pa.concat_arrays([pa.nulls(n_pairs, pa.int64()), pa.array(key, pa.int64())]),
            pa.concat_arrays([pa.nulls(n_pairs, pa.int64()), pa.array(size, pa.int64())]),
        ],
        names=[C.ID_A, C.ID_B, C.DISTANCE, C.MAY_PASS, C.SHARES_BAND, C.BAND, C.KEY, C.BUCKET_SIZE],
    )


def _sketch_keys_udf() -> Any:
    """``core.sketch_bands.stored_keys`` of a binary column of sketches, as arrays of LONG."""

    @pandas_udf("array<bigint>")  # type: ignore[call-overload]
    def keys(batches: Iterator[pd.Series]) -> Iterator[pd.Series]:
        for sketches in batches:
            values = [bytes(v) if isinstance(v, bytes | bytearray) else None for v in sketches.tolist()]
            yield pd.Series(list(stored_keys(values).astype(np.int64)))

    return keys


def sketch_keys_column(sketches: Column) -> Column:
    """Per document, its key per sketch band (``core.sketch_bands.stored_keys``; ``NO_KEY`` where it has
    none), as an array of LONG."""
    return _sketch_keys_udf()(sketches)


def sketch_key_rows(reps: DataFrame, summaries: DataFrame) -> DataFrame:
    """One row per (representative, sketch band in which it has a key).

    In: ``reps`` (``id``, ``fingerprint``), ``summaries`` (``id``, ``check_summary``: the sketches).
    Out: ``band``, ``band_key``, ``id``, ``fingerprint``."""
    keyed = reps.select(C.ID, C.FINGERPRINT).join(summaries.select(C.ID, C.CHECK_SUMMARY), on=C.ID)
    exploded = keyed.select(
        C.ID, C.FINGERPRINT, F.posexplode(sketch_keys_column(F.col(C.CHECK_SUMMARY))).alias(C.BAND, C.KEY)
    )
    return exploded.where(F.col(C.KEY) != NO_KEY).select(C.BAND, C.KEY, C.ID, C.FINGERPRINT)


def shuffled_sketch_join(
    key_rows: DataFrame, *, masks: list[int], max_distance: int, hot_bucket_limit: int
) -> tuple[DataFrame, DataFrame]:
    """``in_task_band_join``'s sketch pairs over shuffled rows: the pairs sharing a sketch band key held
    by at most ``hot_bucket_limit`` representatives that the band join over ``masks`` does not give
    (``core.bucket_pairs.band_join_finds``), once each, and the keys over the limit.

    In: ``sketch_key_rows``. Out: (``id_a`` < ``id_b``, ``distance``), (``band``, ``band_key``,
    ``bucket_size``)."""
    sizes = key_rows.groupBy(C.BAND, C.KEY).agg(F.count(F.lit(1)).alias(C.BUCKET_SIZE))
    hot = sizes.where(F.col(C.BUCKET_SIZE) > hot_bucket_limit)
    shared = sizes.where(F.col(C.BUCKET_SIZE).between(2, hot_bucket_limit)).select(C.BAND, C.KEY)
    usable = key_rows.join(shared, on=[C.BAND, C.KEY], how="left_semi")
    a = usable.select(C.BAND, C.KEY, F.col(C.ID).alias(C.ID_A), F.col(C.FINGERPRINT).alias("_fa"))
    b = usable.select(C.BAND, C.KEY, F.col(C.ID).alias(C.ID_B), F.col(C.FINGERPRINT).alias("_fb"))
    joined = a.join(b, on=[C.BAND, C.KEY]).where(F.col(C.ID_A) < F.col(C.ID_B))
    diff = F.col("_fa").bitwiseXOR(F.col("_fb"))
    distance = F.bit_count(diff)
    given = (distance <= max_distance) & F.exists(_masks(masks), lambda m: diff.bitwiseAND(m) == 0)
    pairs = joined.where(~given).select(C.ID_A, C.ID_B, distance.cast("int").alias(C.DISTANCE))
    return pairs.dropDuplicates([C.ID_A, C.ID_B]), hot
