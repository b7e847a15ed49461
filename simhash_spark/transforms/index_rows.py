"""Rows of the persistent index, and the lookup of a batch against them."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.core.index_model import ENTRY_COLUMNS, SKETCH_KEY_BITS, IndexLayout
from simhash_spark.core.sketch_bands import NO_KEY
from simhash_spark.transforms.candidates import hamming_distance, sketch_keys_column


def _signed_bit(pos: int) -> int:
    return -(1 << 63) if pos == 63 else 1 << pos


def _tables(layout: IndexLayout) -> Column:
    """Per table: its mask and the single-bit masks of its partition prefix, as one array literal."""
    return F.array(
        *[
            F.struct(
                F.lit(m).cast("bigint").alias("m"),
                F.array(
                    *[F.lit(_signed_bit(p)).cast("bigint") for p in pos] or [F.lit(0).cast("bigint")]
                ).alias("p"),
            )
            for m, pos in zip(layout.masks(), layout.prefix_positions(), strict=True)
        ]
    )


def _prefix(fingerprint: Column, bit_masks: Column, bits: int) -> Column:
    """The fingerprint's bits under ``bit_masks`` read as an integer (``core.index_model.key_part``)."""
    if bits == 0:
        return F.lit(0).cast("bigint")
    return F.aggregate(
        bit_masks,
        F.lit(0).cast("bigint"),
        lambda acc, bit: F.shiftleft(acc, 1).bitwiseOR(
            F.when(fingerprint.bitwiseAND(bit) != 0, F.lit(1).cast("bigint")).otherwise(
                F.lit(0).cast("bigint")
            )
        ),
    )


def index_keys(fps: DataFrame, *, layout: IndexLayout) -> DataFrame:
    """One row per (document, index table); with ``layout.sketch_bands``, also one per sketch band in
    which the document has a key (``core.index_model.sketch_key_part``).

    In: ``id``, ``fingerprint`` (non-null), ``n_chars``, ``run_date`` (and with sketch bands
    ``check_summary``, null for a document without a sketch).
    Out: ``part``, ``band``, ``band_key``, ``id``, ``fingerprint``, ``n_chars``, ``run_date``.
    """
    fp = F.col(C.FINGERPRINT)
    exploded = fps.select(
        C.ID, C.FINGERPRINT, C.N_CHARS, C.RUN_DATE, F.posexplode(_tables(layout)).alias("_t", "_x")
    )
    keys = exploded.select(
        (
            F.shiftleft(F.col("_t").cast("bigint"), layout.prefix_bits)
            + _prefix(fp, F.col("_x.p"), layout.prefix_bits)
        )
        .cast("int")
        .alias(C.PART),
        F.col("_t").cast("int").alias(C.BAND),
        fp.bitwiseAND(F.col("_x.m")).alias(C.KEY),
        C.ID,
        C.FINGERPRINT,
        C.N_CHARS,
        C.RUN_DATE,
    )
    return keys.unionByName(_sketch_keys(fps, layout)) if layout.sketch_bands else keys


def _sketch_keys(fps: DataFrame, layout: IndexLayout) -> DataFrame:
    """``index_keys``' rows of the sketch tables (table ``first_sketch_table + b`` for sketch band b)."""
    with_sketch = fps.where(F.col(C.CHECK_SUMMARY).isNotNull())
    exploded = with_sketch.select(
        C.ID,
        C.FINGERPRINT,
        C.N_CHARS,
        C.RUN_DATE,
        F.posexplode(sketch_keys_column(F.col(C.CHECK_SUMMARY))).alias("_b", C.KEY),
    ).where(F.col(C.KEY) != NO_KEY)
    table = F.col("_b") + layout.first_sketch_table
    bits = min(layout.prefix_bits, SKETCH_KEY_BITS)
    prefix = F.shiftright(F.col(C.KEY), SKETCH_KEY_BITS - bits) if bits else F.lit(0).cast("bigint")
    return exploded.select(
        (F.shiftleft(table.cast("bigint"), layout.prefix_bits) + prefix).cast("int").alias(C.PART),
        table.cast("int").alias(C.BAND),
        C.KEY,
        C.ID,
        C.FINGERPRINT,
        C.N_CHARS,
        C.RUN_DATE,
    )


def doc_bucket(fingerprint: Column, doc_bits: int) -> Column:
    """``core.index_model.doc_bucket``: the fingerprint's top ``doc_bits`` bits."""
    if doc_bits == 0:
        return F.lit(0)
    return F.shiftrightunsigned(fingerprint, 64 - doc_bits).cast("int")


def touched_entries(
    batch_keys: DataFrame, index_keys: DataFrame, *, max_distance: int, first_sketch_table: int | None = None
) -> DataFrame:
    """Index entries within ``max_distance`` bits of some batch document on a shared table key: with an
    exact design, every index entry that can pair with the batch; with ``first_sketch_table``, also every
    entry sharing a sketch band key (tables from it on) with one, whatever its distance.

    In: ``batch_keys`` and ``index_keys`` as ``index_keys`` makes them.
    Out: ``id``, ``fingerprint``, ``n_chars``, ``run_date`` (distinct index entries).
    """
    b = batch_keys.select(C.BAND, C.KEY, F.col(C.FINGERPRINT).alias("_bfp"))
    i = index_keys.select(C.BAND, C.KEY, C.ID, C.FINGERPRINT, C.N_CHARS, C.RUN_DATE)
    near = hamming_distance(F.col(C.FINGERPRINT), F.col("_bfp")) <= max_distance
    if first_sketch_table is not None:
        near = near | (F.col(C.BAND) >= first_sketch_table)
    joined = i.join(b, on=[C.BAND, C.KEY], how="inner").where(near)
    return joined.select(C.ID, C.FINGERPRINT, C.N_CHARS, C.RUN_DATE).dropDuplicates([C.ID])


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
