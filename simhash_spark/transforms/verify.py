"""The verify stage: candidate pairs within the largest k become accepted pairs under the pair rule.

The rule's Spark twin (``pair_k_column``, ``titles_agree_column``, ``needs_check_column``,
``reason_column``) mirrors ``simhash_spark.core.rules.PairRule``; tests/test_rules.py checks that both give
the same answer on random inputs. Texts are joined only to the pairs that need the text check.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.functions import pandas_udf

from simhash_spark import columns as C
from simhash_spark.core.rules import PairRule
from simhash_spark.core.verify import FINGERPRINT, IDENTICAL, VERIFIED, ThresholdPolicy, similarities

_SHORTER = "_shorter_chars"
_TITLE_DISTANCE = "_title_distance"


def pair_k_column(policy: ThresholdPolicy, shorter_chars: Column) -> Column:
    """k of a pair from the length of its shorter document (a constant without length steps)."""
    expr = F.lit(policy.max_distance)
    for start, k in policy.steps:
        expr = F.when(shorter_chars >= start, F.lit(k)).otherwise(expr)
    return expr


def titles_agree_column(rule: PairRule, title_distance: Column) -> Column:
    if rule.title_max_distance is None:
        return F.lit(True)
    return title_distance.isNull() | (title_distance <= rule.title_max_distance)


def needs_check_column(rule: PairRule, distance: Column) -> Column:
    return F.lit(False) if not rule.verify.enabled else distance > rule.verify.accept_distance


def reason_column(
    rule: PairRule,
    distance: Column,
    shorter_chars: Column,
    *,
    same_text: Column,
    similarity: Column,
    title_distance: Column,
) -> Column:
    """``PairRule.reason`` as a column (null: not a duplicate)."""
    accepted = (distance <= pair_k_column(rule.policy, shorter_chars)) & titles_agree_column(
        rule, title_distance
    )
    identical = (distance == 0) & (same_text | F.lit(not rule.verify.enabled))
    return (
        F.when(~accepted, F.lit(None).cast("string"))
        .when(identical, F.lit(IDENTICAL))
        .when(~needs_check_column(rule, distance), F.lit(FINGERPRINT))
        .when(similarity >= rule.verify.min_similarity, F.lit(VERIFIED))
    )


def _values(column: pd.Series) -> list[Any]:
    return column.where(column.notna(), None).tolist()


def _similarity_udf(rule: PairRule) -> Any:
    """``core.verify.similarities`` of two text columns; with two more, the pair's stored prefixes
    (``core.prefix_filter``), tested before the texts are read."""

    @pandas_udf("double")  # type: ignore[call-overload]
    def similarity(batches: Iterator[tuple[pd.Series, ...]]) -> Iterator[pd.Series]:
        for a, b, *stored in batches:
            prefixes = (_values(stored[0]), _values(stored[1])) if stored else None
            opts = (rule.verify, rule.norm, rule.short)
            yield pd.Series(similarities(_values(a), _values(b), *opts, prefixes=prefixes))

    return similarity


def _by_pair(pairs: DataFrame, side: DataFrame, column: str, suffix: str, *more: str) -> DataFrame:
    """``pairs`` with ``column`` of both documents as ``_a<suffix>``, ``_b<suffix>`` (left joins), and each
    of ``more`` as ``_a<column>``, ``_b<column>`` in the same joins."""
    for end, id_col in (("a", C.ID_A), ("b", C.ID_B)):
        one = side.select(
            F.col(C.ID).alias(f"_{end}{suffix}_id"),
            F.col(column).alias(f"_{end}{suffix}"),
            *[F.col(c).alias(f"_{end}{c}") for c in more],
        )
        pairs = pairs.join(one, on=F.col(id_col) == F.col(f"_{end}{suffix}_id"), how="left")
    return pairs


def _rows_of_pairs(pairs: DataFrame, side: DataFrame) -> DataFrame:
    """``side``'s rows of the documents in ``pairs`` only: their ids are broadcast, so the scan drops every
    other row (text, prefix) before the joins shuffle and sort what is left."""
    ids = pairs.select(F.col(C.ID_A).alias(C.ID)).unionByName(pairs.select(F.col(C.ID_B).alias(C.ID)))
    return side.join(F.broadcast(ids), on=C.ID, how="left_semi")


def _hamming(a: Column, b: Column) -> Column:
    return F.bit_count(a.bitwiseXOR(b))


def _within_pair_k(
    candidates: DataFrame, *, rule: PairRule, lengths: DataFrame, titles: DataFrame | None
) -> DataFrame:
    """The candidates within their pair's k whose titles agree, with ``_shorter_chars`` and
    ``_title_distance`` for the rule."""
    pairs = candidates.select(C.ID_A, C.ID_B, C.DISTANCE)
    if rule.policy.steps:
        pairs = _by_pair(pairs, lengths, C.N_CHARS, "len").withColumn(_SHORTER, F.least("_alen", "_blen"))
    else:
        pairs = pairs.withColumn(_SHORTER, F.lit(0))
    if rule.title_max_distance is not None:
        if titles is None:
            raise ValueError("the title rule needs the documents' title fingerprints")
        pairs = _by_pair(pairs, titles, C.TITLE_FINGERPRINT, "tfp")
        pairs = pairs.withColumn(_TITLE_DISTANCE, _hamming(F.col("_atfp"), F.col("_btfp")))
    else:
        pairs = pairs.withColumn(_TITLE_DISTANCE, F.lit(None).cast("int"))
    distance = F.col(C.DISTANCE)
    return pairs.where(
        (distance <= pair_k_column(rule.policy, F.col(_SHORTER)))
        & titles_agree_column(rule, F.col(_TITLE_DISTANCE))
    )


def accept_pairs(
    candidates: DataFrame,
    *,
    rule: PairRule,
    lengths: DataFrame,
    texts: DataFrame | None = None,
    titles: DataFrame | None = None,
    prefixes: DataFrame | None = None,
    few: bool = False,
) -> DataFrame:
    """The candidates the rule accepts.

    In: ``candidates`` (``id_a``, ``id_b``, ``distance``), ``lengths`` (``id``, ``n_chars``), ``texts``
    (``id``, ``text``; needed when the rule checks texts), ``titles`` (``id``, ``title_fingerprint``;
    needed with ``rule.title_max_distance``), ``prefixes`` (``id``, ``check_prefix``: the prefixes the
    fingerprint pass emitted for this rule's check, ``core.prefix_filter``: a pair whose prefixes do not
    meet is rejected without normalizing or comparing its texts); ``few``: the candidates are few enough
    for their ids to be broadcast (only the texts the check reads are then shuffled). Out: ``id_a``,
    ``id_b``, ``distance``, ``similarity`` (null where not checked), ``reason``.
    """
    pairs = _within_pair_k(candidates, rule=rule, lengths=lengths, titles=titles)
    distance = F.col(C.DISTANCE)

    def accepted(frame: DataFrame, similarity: Column) -> DataFrame:
        reason = reason_column(
            rule,
            distance,
            F.col(_SHORTER),
            same_text=F.lit(False),  # representatives: equal fingerprints have different texts here
            similarity=similarity,
            title_distance=F.col(_TITLE_DISTANCE),
        )
        return frame.select(
            C.ID_A, C.ID_B, C.DISTANCE, similarity.alias(C.SIMILARITY), reason.alias(C.REASON)
        )

    needs = needs_check_column(rule, distance)
    direct = accepted(pairs.where(~needs), F.lit(None).cast("double"))
    if not rule.verify.enabled:
        return direct
    if texts is None:
        raise ValueError(f"verify.measure={rule.verify.measure!r} needs the documents' texts")
    checked_pairs = pairs.where(needs)
    if few:
        texts = _rows_of_pairs(checked_pairs, texts)
        prefixes = None if prefixes is None else _rows_of_pairs(checked_pairs, prefixes)
    if prefixes is None:
        to_check = _by_pair(checked_pairs, texts, C.TEXT, "text")
        similarity = _similarity_udf(rule)(F.col("_atext"), F.col("_btext"))
    else:
        # the prefixes ride along with the texts, in the same joins
        with_prefixes = texts.join(prefixes, on=C.ID, how="left")
        to_check = _by_pair(checked_pairs, with_prefixes, C.TEXT, "text", C.PREFIX)
        ends = [F.col(f"_{end}{c}") for c in ("text", C.PREFIX) for end in "ab"]
        similarity = _similarity_udf(rule)(*ends)
    with_sim = to_check.withColumn(C.SIMILARITY, similarity)
    checked = accepted(with_sim, F.col(C.SIMILARITY)).where(F.col(C.REASON).isNotNull())
    return direct.unionByName(checked)
