"""From connected components to documents/, clusters/ and deduplicated/ rows."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from simhash_spark import columns as C


def representative_order(policy: str) -> list[Column]:
    """Sort order inside a cluster whose first row is the representative; ties fall back to the smallest id.

    ``min_id`` | ``longest_text`` (most characters after normalization) | ``min:COL`` | ``max:COL``
    (nulls never win).
    """
    if policy == "min_id":
        return [F.col(C.ID).asc()]
    if policy == "longest_text":
        return [F.col(C.N_CHARS).desc(), F.col(C.ID).asc()]
    kind, _, col = policy.partition(":")
    key = F.col(col).asc_nulls_last() if kind == "min" else F.col(col).desc_nulls_last()
    return [key, F.col(C.ID).asc()]


def policy_column(policy: str) -> str | None:
    """The input column a ``min:COL`` / ``max:COL`` policy needs carried along, if any."""
    kind, _, col = policy.partition(":")
    return col if kind in ("min", "max") and col else None


def assign_clusters(
    docs: DataFrame, components: DataFrame, *, representative: str, extra: tuple[str, ...] = ()
) -> DataFrame:
    """Attach each document's cluster.

    In: ``docs`` with ``id``, ``fingerprint``, ``fingerprint_hex``, ``status``, ``n_chars`` and the
    ``extra`` columns (plus the policy's column); ``components`` with ``node``, ``component``.
    Out: ``id``, ``fingerprint``, ``fingerprint_hex``, ``status``, ``cluster_id``, ``cluster_size``,
    ``is_duplicate``, then ``extra``. One row per row of ``docs``; a document in no pair is its own
    cluster of size 1.
    """
    members = cluster_members(docs, components, representative=representative)
    return attach_clusters(docs, members, extra=extra)


def cluster_members(docs: DataFrame, components: DataFrame, *, representative: str) -> DataFrame:
    """The clusters of the documents in a component (``core.assemble_local.cluster_members`` on the
    driver).

    In: ``docs`` as ``assign_clusters``; ``components`` with ``node``, ``component`` (labelled by their
    smallest node). Out: ``id``, ``cluster_id`` (the representative's id), ``cluster_size``."""
    policy_col = policy_column(representative)
    keys = [C.ID, C.N_CHARS] + ([policy_col] if policy_col and policy_col not in (C.ID, C.N_CHARS) else [])
    members = docs.select(*keys).join(
        components.select(F.col(C.NODE).alias(C.ID), C.COMPONENT), on=C.ID, how="inner"
    )
    by_component = Window.partitionBy(C.COMPONENT)
    if representative == "min_id":
        rep = F.col(C.COMPONENT)  # components are labelled by their smallest node already
    else:
        rep = F.first(C.ID).over(by_component.orderBy(*representative_order(representative)))
    return members.select(
        F.col(C.ID),
        rep.alias(C.CLUSTER_ID),
        F.count(F.lit(1)).over(by_component).alias(C.CLUSTER_SIZE),
    )


def attach_clusters(docs: DataFrame, members: DataFrame, *, extra: tuple[str, ...] = ()) -> DataFrame:
    """``assign_clusters``'s rows from ``cluster_members``' (``id``, ``cluster_id``, ``cluster_size``)."""
    joined = docs.join(members, on=C.ID, how="left")
    cluster_id = F.coalesce(F.col(C.CLUSTER_ID), F.col(C.ID))
    return joined.select(
        F.col(C.ID),
        F.col(C.FINGERPRINT),
        F.col(C.FINGERPRINT_HEX),
        F.col(C.STATUS),
        cluster_id.alias(C.CLUSTER_ID),
        F.coalesce(F.col(C.CLUSTER_SIZE), F.lit(1)).cast("long").alias(C.CLUSTER_SIZE),
        (cluster_id != F.col(C.ID)).alias(C.IS_DUPLICATE),
        *[F.col(c) for c in extra],
    )


def cluster_table(documents: DataFrame) -> DataFrame:
    """Clusters with at least two members.

    In: documents (``id``, ``cluster_id``, ``cluster_size``). Out: ``cluster_id``, ``size``,
    ``member_ids`` (sorted).
    """
    return (
        documents.where(F.col(C.CLUSTER_SIZE) > 1)
        .groupBy(C.CLUSTER_ID)
        .agg(F.count(F.lit(1)).alias(C.SIZE), F.sort_array(F.collect_list(C.ID)).alias(C.MEMBER_IDS))
        .select(C.CLUSTER_ID, F.col(C.SIZE).cast("long").alias(C.SIZE), C.MEMBER_IDS)
    )


def drop_duplicates(raw: DataFrame, duplicate_ids: DataFrame, *, id_column: str) -> DataFrame:
    """The input rows (all columns, unchanged) of documents that are not duplicates.

    In: ``duplicate_ids`` with ``id``: the documents that are duplicates (``duplicate_ids_of``)."""
    dup_ids = duplicate_ids.select(F.col(C.ID).alias("_dup_id"))
    return raw.join(dup_ids, on=raw[id_column] == dup_ids["_dup_id"], how="left_anti").select(*raw.columns)


def duplicate_ids_of(documents: DataFrame) -> DataFrame:
    return documents.where(F.col(C.IS_DUPLICATE)).select(C.ID)
