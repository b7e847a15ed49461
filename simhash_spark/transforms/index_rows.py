"""The index's key rows and a batch's probes as DataFrames: the Spark twin of ``core.index_keys`` (tested
to agree in tests/test_index_rows_spark.py)."""

from __future__ import annotations

from functools import reduce

import numpy as np
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.core import index_keys as K
from simhash_spark.core.index_model import ENTRY_COLUMNS
from simhash_spark.core.sketch_bands import NO_KEY
from simhash_spark.transforms.candidates import hamming_distance, sketch_keys_column

_QUERY_FP = "_query_fingerprint"
_QUERY_KEY = "_query_key"
PROBE_PREFIX = "_prefix"


def _rotated(fingerprint: Column, segment: int) -> Column:
    """``core.index_keys.rotate``: the fingerprint rotated left by 16·``segment`` bits."""
    s = K.SEGMENT_BITS * segment
    if s == 0:
        return fingerprint
    return F.shiftleft(fingerprint, s).bitwiseOR(F.shiftrightunsigned(fingerprint, 64 - s))


def _key(table: int, key: Column) -> Column:
    return F.struct(F.lit(table).alias(C.KEY_TABLE), key.cast("bigint").alias(C.INDEX_KEY))


def key_rows(entries: DataFrame, *, sketch_bands: bool) -> DataFrame:
    """Every key row the entries store (``core.index_keys.key_rows``), each (table, key, fingerprint) once.

    In: ``id``, ``fingerprint`` and, with ``sketch_bands``, ``check_summary`` (null: no sketch).
    Out: ``key_table``, ``key``, ``fingerprint``."""
    fp = F.col(C.FINGERPRINT)
    keys = [_key(K.ID_TABLE, F.xxhash64(C.ID))]
    keys += [_key(K.FIRST_SEGMENT_TABLE + s, _rotated(fp, s)) for s in range(K.SEGMENTS)]
    rows = entries.select(fp, F.explode(F.array(*keys)).alias("_k"))
    if sketch_bands:
        banded = entries.where(F.col(C.CHECK_SUMMARY).isNotNull()).select(
            fp, F.posexplode(sketch_keys_column(F.col(C.CHECK_SUMMARY))).alias("_b", "_v")
        )
        sketch = banded.where(F.col("_v") != NO_KEY).select(
            fp, _key(0, F.col("_v")).withField(C.KEY_TABLE, F.col("_b") + K.FIRST_SKETCH_TABLE).alias("_k")
        )
        rows = rows.unionByName(sketch)
    return rows.select(
        F.col(f"_k.{C.KEY_TABLE}").cast("int").alias(C.KEY_TABLE),
        F.col(f"_k.{C.INDEX_KEY}").alias(C.INDEX_KEY),
        fp,
    ).dropDuplicates()


def prefix(table: Column, key: Column, plan: K.SegmentPlan) -> Column:
    """``key >> shift``: what a probe of the table must equal (ids: the key; segments: the plan's window;
    sketch bands: the first three bins)."""
    segment = F.shiftright(key, plan.shift) if plan.shift else key
    return (
        F.when(table == K.ID_TABLE, key)
        .when(table < K.FIRST_SKETCH_TABLE, segment)
        .otherwise(F.shiftright(key, K.SKETCH_PREFIX_SHIFT))
    )


def _signed(value: Column, width: int) -> Column:
    if width == 64:
        return value
    half = 1 << (width - 1)
    return F.when(value >= half, value - (1 << width)).otherwise(value)


def probe_rows(batch: DataFrame, *, plan: K.SegmentPlan, sketch_bands: bool) -> DataFrame:
    """The probes of the batch's documents in the segment tables ``plan`` reads and the sketch tables
    (``core.index_keys``' ``segment_probes`` and ``sketch_probes``).

    In: ``fingerprint`` and, with ``sketch_bands``, ``check_summary``. Out: ``key_table``, ``_prefix``,
    ``_query_fingerprint``, ``_query_key`` (a sketch probe's band key; null for segments)."""
    fp = F.col(C.FINGERPRINT)
    masks = F.lit(K.flip_masks(plan.width, plan.radius).view(np.int64).tolist()).cast("array<bigint>")
    step = plan.width // K.SEGMENT_BITS
    leads = F.array(
        *[
            F.struct(
                F.lit(table).alias(C.KEY_TABLE),
                (F.shiftrightunsigned(_rotated(fp, w * step), plan.shift) if plan.shift else fp).alias(
                    "_lead"
                ),
            )
            for w, table in enumerate(plan.tables())
        ]
    )
    segments = batch.select(fp, F.explode(leads).alias("_l")).select(
        fp,
        F.col("_l._lead").alias("_lead"),
        F.col(f"_l.{C.KEY_TABLE}").alias(C.KEY_TABLE),
        F.explode(masks).alias("_m"),
    )
    probes = segments.select(
        F.col(C.KEY_TABLE).cast("int").alias(C.KEY_TABLE),
        _signed(F.col("_lead").bitwiseXOR(F.col("_m")), plan.width).alias(PROBE_PREFIX),
        fp.alias(_QUERY_FP),
        F.lit(None).cast("bigint").alias(_QUERY_KEY),
    )
    if not sketch_bands:
        return probes
    banded = batch.where(F.col(C.CHECK_SUMMARY).isNotNull()).select(
        fp, F.posexplode(sketch_keys_column(F.col(C.CHECK_SUMMARY))).alias("_b", "_v")
    )
    sketch = banded.where(F.col("_v") != NO_KEY).select(
        (F.col("_b") + K.FIRST_SKETCH_TABLE).cast("int").alias(C.KEY_TABLE),
        F.shiftright(F.col("_v"), K.SKETCH_PREFIX_SHIFT).alias(PROBE_PREFIX),
        fp.alias(_QUERY_FP),
        F.col("_v").cast("bigint").alias(_QUERY_KEY),
    )
    return probes.unionByName(sketch)


def touched_fingerprints(
    probes: DataFrame, stored: DataFrame, *, max_distance: int, plan: K.SegmentPlan
) -> DataFrame:
    """The stored fingerprints the probes touch (``core.index_keys.touched``): within ``max_distance`` bits
    of the probing document, or holding its very sketch band key.

    In: ``probe_rows``' rows; ``stored`` (``key_table``, ``key``, ``fingerprint``) of the segment and sketch
    tables. Out: ``fingerprint``, each once."""
    keyed = stored.select(
        C.KEY_TABLE,
        C.INDEX_KEY,
        C.FINGERPRINT,
        prefix(F.col(C.KEY_TABLE), F.col(C.INDEX_KEY), plan).alias(PROBE_PREFIX),
    )
    met = keyed.join(probes, on=[C.KEY_TABLE, PROBE_PREFIX], how="inner")
    near = hamming_distance(F.col(C.FINGERPRINT), F.col(_QUERY_FP)) <= max_distance
    same_band_key = F.coalesce(F.col(C.INDEX_KEY) == F.col(_QUERY_KEY), F.lit(False))
    return met.where(near | same_band_key).select(C.FINGERPRINT).distinct()


def id_matches(ids: DataFrame, stored: DataFrame) -> DataFrame:
    """The fingerprints of the stored id-table rows whose key is the hash of one of ``ids``.

    In: ``ids`` (``id``); ``stored`` (``key_table``, ``key``, ``fingerprint``) of the id table.
    Out: ``fingerprint``, each once."""
    hashed = ids.select(F.xxhash64(C.ID).alias(C.INDEX_KEY)).distinct()
    return stored.join(hashed, on=C.INDEX_KEY, how="left_semi").select(C.FINGERPRINT).distinct()


def range_filter(column: str, ranges: list[tuple[int, int]]) -> Column | None:
    """``column`` within one of ``ranges`` as a balanced disjunction (a Parquet reader skips the row groups
    it excludes); None for no ranges."""
    terms = [F.col(column).between(lo, hi) for lo, hi in ranges]
    while len(terms) > 1:
        terms = [reduce(lambda a, b: a | b, terms[i : i + 2]) for i in range(0, len(terms), 2)]
    return terms[0] if terms else None


def earliest_entries(entries: DataFrame) -> DataFrame:
    """One row per id: its entry of the earliest run date (an index written before ids were kept once can
    hold an id under two dates; each id must be linked, and paired, once).

    In and out: ``ENTRY_COLUMNS``.
    """
    rest = [c for c in ENTRY_COLUMNS if c not in (C.ID, C.RUN_DATE)]
    first = F.min(F.struct(C.RUN_DATE, *rest)).alias("_e")
    return (
        entries.groupBy(C.ID)
        .agg(first)
        .select(C.ID, *[F.col(f"_e.{c}").alias(c) for c in rest], F.col(f"_e.{C.RUN_DATE}").alias(C.RUN_DATE))
        .select(*ENTRY_COLUMNS)
    )
