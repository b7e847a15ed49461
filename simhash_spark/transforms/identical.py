"""Documents with identical fingerprints: join and cluster them once, expand them for pairs/.

``cross_group_pair_count`` runs one aggregation (an action) so the summary can count pairs/ unexpanded.

Boilerplate and reprints often share one fingerprint by the thousand. Joining them row by row makes a
bucket quadratic (300k copies: 45·10⁹ rows). Instead the band join runs over distinct fingerprints, each
represented by its smallest id, and every other member is linked to that representative at distance 0:
the connected components are exactly those of the full "within k bits" graph. With a text check, groups
are of identical fingerprint and identical text: a representative's check then holds for every member
(two texts can share a fingerprint and still differ in how similar they are to a third). ``pairs/`` is expanded back
to every member pair, except for groups larger than a limit, which keep only their representative's
pairs plus a star (member, representative, 0): the run's summary says how many groups were cut that way.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.core.verify import IDENTICAL

REP = "rep"
GROUP_SIZE = "group_size"
MEMBER = "member"


def _group_keys(keyed: DataFrame) -> list[str]:
    return [C.FINGERPRINT, C.TEXT_HASH] if C.TEXT_HASH in keyed.columns else [C.FINGERPRINT]


def grouped_members(keyed: DataFrame) -> DataFrame:
    """Every document with its identical group: the documents of one fingerprint — of one (fingerprint,
    text) when ``text_hash`` is given: with a text check, members stand in for each other only if their
    texts are the same, since identical fingerprints do not mean identical texts.

    In: ``id``, ``fingerprint``, optionally ``text_hash``. Out: ``member`` (the document's id),
    ``fingerprint``, [``text_hash``,] ``rep`` (the group's smallest id), ``group_size``; one row per row
    of ``keyed``. One shuffle: a window over the group's keys, not an aggregation joined back."""
    keys = _group_keys(keyed)
    group = Window.partitionBy(*keys)
    return keyed.select(
        F.col(C.ID).alias(MEMBER),
        *keys,
        F.min(C.ID).over(group).alias(REP),
        F.count(F.lit(1)).over(group).alias(GROUP_SIZE),
    )


def fingerprint_groups(grouped: DataFrame) -> DataFrame:
    """In: ``grouped_members``' rows. Out: ``id`` (the group's representative: its smallest id),
    ``fingerprint``, [``text_hash``,] ``group_size``; one row per group."""
    return grouped.where(F.col(MEMBER) == F.col(REP)).select(
        F.col(MEMBER).alias(C.ID), *_group_keys(grouped), GROUP_SIZE
    )


def group_members(grouped: DataFrame) -> DataFrame:
    """In: ``grouped_members``' rows. Out: ``member``, ``rep``, ``group_size``."""
    return grouped.select(MEMBER, REP, GROUP_SIZE)


def star_edges(members: DataFrame) -> DataFrame:
    """Every member linked to its group's representative. Out: ``src``, ``dst``."""
    return members.where(F.col(MEMBER) != F.col(REP)).select(
        F.col(REP).alias(C.SRC), F.col(MEMBER).alias(C.DST)
    )


def expand_pairs(rep_pairs: DataFrame, members: DataFrame, *, max_group: int) -> DataFrame:
    """Pairs between documents from pairs between representatives.

    In: ``rep_pairs`` (``id_a``, ``id_b``, ``distance``, ``similarity``, ``reason``, between
    representatives of distinct fingerprints), ``members``. Out: ``id_a`` < ``id_b``, ``distance``,
    ``similarity``, ``reason``: every member pair of groups of at most ``max_group`` documents; a larger
    group stands in through its representative alone, and its own members appear once each, paired with
    the representative at distance 0. Member pairs inherit their representatives' similarity and reason;
    pairs inside a group have reason "identical_fingerprint".
    """
    small = F.col(GROUP_SIZE) <= max_group
    # most documents are alone in their group and stand for themselves: only the others are joined (a
    # representative without rows here is its own stand-in), so the joins shuffle the groups, not the input
    shared = members.where(F.col(GROUP_SIZE) > 1)
    # who stands for a group in cross-group pairs: all members of a small group, the representative of a big one
    stand_in = shared.where(small | (F.col(MEMBER) == F.col(REP))).select(REP, MEMBER)
    xa = stand_in.select(F.col(REP).alias("ra"), F.col(MEMBER).alias("ma"))
    xb = stand_in.select(F.col(REP).alias("rb"), F.col(MEMBER).alias("mb"))
    ma, mb = F.coalesce("ma", C.ID_A), F.coalesce("mb", C.ID_B)
    cross = (
        rep_pairs.join(xa, on=F.col(C.ID_A) == F.col("ra"), how="left")
        .join(xb, on=F.col(C.ID_B) == F.col("rb"), how="left")
        .select(
            F.least(ma, mb).alias(C.ID_A),
            F.greatest(ma, mb).alias(C.ID_B),
            F.col(C.DISTANCE),
            F.col(C.SIMILARITY),
            F.col(C.REASON),
        )
    )
    same = [
        F.lit(0).alias(C.DISTANCE),
        F.lit(None).cast("double").alias(C.SIMILARITY),
        F.lit(IDENTICAL).alias(C.REASON),
    ]
    a = shared.where(small).select(F.col(REP).alias("r1"), F.col(MEMBER).alias("m1"))
    b = shared.where(small).select(F.col(REP).alias("r2"), F.col(MEMBER).alias("m2"))
    within_small = a.join(
        b, on=(F.col("r1") == F.col("r2")) & (F.col("m1") < F.col("m2")), how="inner"
    ).select(F.col("m1").alias(C.ID_A), F.col("m2").alias(C.ID_B), *same)
    within_big = shared.where(~small & (F.col(MEMBER) != F.col(REP))).select(
        F.least(REP, MEMBER).alias(C.ID_A), F.greatest(REP, MEMBER).alias(C.ID_B), *same
    )
    return cross.unionByName(within_small).unionByName(within_big)


def _stand_in_count(size: Column, max_group: int) -> Column:
    return F.when(size <= max_group, size).otherwise(F.lit(1))


def within_group_pairs(size: Column, max_group: int) -> Column:
    """Rows ``expand_pairs`` writes inside one group of ``size`` identical fingerprints."""
    return F.when(size <= max_group, size * (size - 1) / 2).otherwise(size - 1).cast("long")


def cross_group_pair_count(rep_pairs: DataFrame, groups: DataFrame, *, max_group: int) -> int:
    """Rows ``expand_pairs`` writes between groups, without expanding them (one aggregation)."""
    ga = groups.select(F.col(C.ID).alias("ga"), _stand_in_count(F.col(GROUP_SIZE), max_group).alias("sa"))
    gb = groups.select(F.col(C.ID).alias("gb"), _stand_in_count(F.col(GROUP_SIZE), max_group).alias("sb"))
    row = (
        rep_pairs.join(ga, on=F.col(C.ID_A) == F.col("ga"), how="inner")
        .join(gb, on=F.col(C.ID_B) == F.col("gb"), how="inner")
        .agg(F.coalesce(F.sum(F.col("sa") * F.col("sb")), F.lit(0)).alias("n"))
        .first()
    )
    return int(row["n"]) if row is not None else 0
