"""The band join: candidate pairs whose fingerprints agree on a table key, within k bits."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.core.bucket_pairs import bucket_pairs

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
