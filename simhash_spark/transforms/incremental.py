"""Incremental runs: a batch linked together with the index entries it touches, and the batch's view of
the result."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.core.fingerprint import ALREADY_INDEXED
from simhash_spark.transforms.fingerprint import is_fingerprinted


def mark_already_indexed(fps: DataFrame, known_ids: DataFrame) -> DataFrame:
    """Documents whose id the index already holds (from an earlier run date) get status
    ``already_indexed``: ids are identities, so such a row is the indexed document seen again. They are
    not linked and not appended again.

    In: ``fps`` (``id``, ``status``, any columns), ``known_ids`` (``id``). Out: ``fps``'s columns.
    """
    flagged = known_ids.select(C.ID, F.lit(True).alias("_known"))
    joined = fps.join(flagged, on=C.ID, how="left")
    status = F.when(F.col("_known") & is_fingerprinted(F.col(C.STATUS)), F.lit(ALREADY_INDEXED)).otherwise(
        F.col(C.STATUS)
    )
    return joined.select(*[status.alias(C.STATUS) if c == C.STATUS else F.col(c) for c in fps.columns])


def batch_components(assignments: DataFrame, batch_ids: DataFrame, index_entries: DataFrame) -> DataFrame:
    """The components of the batch's documents, labelled by their smallest batch id, with the earliest
    index entry (by run date, then id) of each component.

    In: ``assignments`` (``node``, ``component``) over batch and index nodes; ``batch_ids`` (``id``);
    ``index_entries`` (``id``, ``run_date``). Out: ``node``, ``component``, ``matched_index_id`` (null when
    the component holds no index entry); batch nodes only.
    """
    idx = index_entries.select(F.col(C.ID).alias(C.NODE), C.RUN_DATE)
    matched = (
        assignments.join(idx, on=C.NODE, how="inner")
        .groupBy(C.COMPONENT)
        .agg(F.min(F.struct(C.RUN_DATE, C.NODE)).getField(C.NODE).alias(C.MATCHED_INDEX_ID))
    )
    batch = assignments.join(batch_ids.select(F.col(C.ID).alias(C.NODE)), on=C.NODE, how="left_semi")
    labels = batch.groupBy(C.COMPONENT).agg(F.min(C.NODE).alias("_label"))
    return (
        batch.join(labels, on=C.COMPONENT, how="inner")
        .join(matched, on=C.COMPONENT, how="left")
        .select(C.NODE, F.col("_label").alias(C.COMPONENT), C.MATCHED_INDEX_ID)
    )


def with_index_matches(documents: DataFrame, components: DataFrame, *, extra: tuple[str, ...]) -> DataFrame:
    """documents/ of an incremental run: ``matched_index_id`` added after ``is_duplicate``, and a document
    that matched the index (or was already indexed, matching itself) is a duplicate.

    In: ``assign_clusters`` output, ``batch_components`` output. Out: the documents columns with
    ``matched_index_id``, then ``extra``.
    """
    m = components.select(F.col(C.NODE).alias(C.ID), C.MATCHED_INDEX_ID)
    joined = documents.join(m, on=C.ID, how="left")
    matched = F.when(F.col(C.STATUS) == ALREADY_INDEXED, F.col(C.ID)).otherwise(F.col(C.MATCHED_INDEX_ID))
    return joined.select(
        C.ID,
        C.FINGERPRINT,
        C.FINGERPRINT_HEX,
        C.STATUS,
        C.CLUSTER_ID,
        C.CLUSTER_SIZE,
        (F.col(C.IS_DUPLICATE) | matched.isNotNull()).alias(C.IS_DUPLICATE),
        matched.alias(C.MATCHED_INDEX_ID),
        *[F.col(c) for c in extra],
    )


def drop_index_pairs(pairs: DataFrame, index_ids: DataFrame) -> DataFrame:
    """Pairs with at least one batch document (pairs between two index entries are history).

    In: pairs/ rows, ``index_ids`` (``id``). Out: the same columns.
    """
    ia = index_ids.select(F.col(C.ID).alias("_ia"), F.lit(True).alias("_a_idx"))
    ib = index_ids.select(F.col(C.ID).alias("_ib"), F.lit(True).alias("_b_idx"))
    return (
        pairs.join(ia, on=F.col(C.ID_A) == F.col("_ia"), how="left")
        .join(ib, on=F.col(C.ID_B) == F.col("_ib"), how="left")
        .where(F.col("_a_idx").isNull() | F.col("_b_idx").isNull())
        .select(*pairs.columns)
    )
