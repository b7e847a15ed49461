"""The verify stage: candidate pairs within the largest k become accepted pairs under the pair rule.

The rule's Spark twin (``pair_k_column``, ``titles_agree_column``, ``needs_check_column``,
``reason_column``) mirrors ``simhash_spark.core.rules.PairRule``; tests/test_rules.py checks that both give
the same answer on random inputs. Texts are joined only to the pairs that need the text check.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.functions import pandas_udf

from simhash_spark import columns as C
from simhash_spark.core.check_filter import CheckFilter
from simhash_spark.core.rules import PairRule
from simhash_spark.core.sketch_bands import stored_share_band
from simhash_spark.core.verify import FINGERPRINT, IDENTICAL, VERIFIED, ThresholdPolicy, similarities

_SHORTER = "_shorter_chars"
_TITLE_DISTANCE = "_title_distance"
_WITHIN_K = "_within_k"


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


def needs_check_column(rule: PairRule, distance: Column, within_k: Column | None = None) -> Column:
    """``PairRule.needs_text_check``; ``within_k`` None: the distance is within the pair's k."""
    if not rule.verify.enabled:
        return F.lit(False)
    beyond = distance > rule.verify.accept_distance
    return beyond if within_k is None else beyond | ~within_k


def reason_column(
    rule: PairRule,
    distance: Column,
    shorter_chars: Column,
    *,
    same_text: Column,
    similarity: Column,
    title_distance: Column,
    shares_band: Column | None = None,
) -> Column:
    """``PairRule.reason`` as a column (null: not a duplicate)."""
    within_k = distance <= pair_k_column(rule.policy, shorter_chars)
    candidate = within_k if shares_band is None else within_k | shares_band
    accepted = candidate & titles_agree_column(rule, title_distance)
    identical = (distance == 0) & (same_text | F.lit(not rule.verify.enabled))
    direct = within_k & ~needs_check_column(rule, distance)
    return (
        F.when(~accepted, F.lit(None).cast("string"))
        .when(identical, F.lit(IDENTICAL))
        .when(direct, F.lit(FINGERPRINT))
        .when(F.lit(rule.verify.enabled) & (similarity >= rule.verify.min_similarity), F.lit(VERIFIED))
    )


def _values(column: pd.Series) -> list[Any]:
    return column.where(column.notna(), None).tolist()


def _once(udf: Any) -> Any:
    """``udf`` evaluated once per row even where a filter reads what it returns: Spark pushes a filter below
    the projection that computes a deterministic expression by copying the expression into the filter, so
    a Python UDF would run twice over the same rows (its inputs shipped to Python twice). Its results do
    not vary; only the optimizer is told they might."""
    return udf.asNondeterministic()


def _similarity_udf(rule: PairRule) -> Any:
    """``core.verify.similarities`` of two text columns."""

    @pandas_udf("double")  # type: ignore[call-overload]
    def similarity(batches: Iterator[tuple[pd.Series, pd.Series]]) -> Iterator[pd.Series]:
        for a, b in batches:
            yield pd.Series(similarities(_values(a), _values(b), rule.verify, rule.norm, rule.short))

    return _once(similarity)


def _judged_udf(check: CheckFilter, sketch_bands: bool) -> Any:
    """``CheckFilter.may_pass`` (and with ``sketch_bands``, ``core.sketch_bands.stored_share_band``) of
    two binary columns, as a struct (built when used, in the session's flavour: classic or Spark
    Connect)."""

    @pandas_udf("may_pass boolean, shares_band boolean")  # type: ignore[call-overload]
    def judged(batches: Iterator[tuple[pd.Series, pd.Series]]) -> Iterator[pd.DataFrame]:
        for a, b in batches:
            va, vb = _values(a), _values(b)
            shares = stored_share_band(va, vb) if sketch_bands else np.zeros(len(va), dtype=bool)
            yield pd.DataFrame({"may_pass": check.may_pass(va, vb), "shares_band": shares})

    return _once(judged)


def drop_unreachable(
    candidates: DataFrame,
    *,
    rule: PairRule,
    check: CheckFilter,
    summaries: DataFrame,
    few: bool = False,
    sketch_bands: bool = False,
) -> DataFrame:
    """The candidates but those the text check would test that ``check`` drops: prefixes that do not meet
    (they cannot pass, ``core.prefix_filter``) or sketches that barely agree (``core.sketch_filter``), so
    their texts need not be joined at all. Pairs the rule accepts without the check, and pairs with a
    document without a summary, are kept.

    In: ``candidates`` (``id_a``, ``id_b``, ``distance``), ``summaries`` (``id``, ``check_summary``: what
    the fingerprint pass emitted for ``check``); ``few``: the candidates are few enough for their ids
    to be broadcast (``rows_of_pairs``: only their summaries are shuffled). Out: ``id_a``, ``id_b``,
    ``distance``, and with ``sketch_bands`` ``shares_band`` (the two sketches share a band: the rule
    takes such a pair beyond its k)."""
    pairs = candidates.select(C.ID_A, C.ID_B, C.DISTANCE)
    if not rule.verify.enabled:
        return pairs
    rows = rows_of_pairs(pairs, summaries) if few else summaries
    with_summaries = _by_pair(pairs, rows, C.CHECK_SUMMARY, "summary")
    verdict = _judged_udf(check, sketch_bands)(F.col("_asummary"), F.col("_bsummary"))
    judged = with_summaries.withColumn("_judged", verdict).select(
        C.ID_A, C.ID_B, C.DISTANCE, F.col("_judged.may_pass").alias(C.MAY_PASS), "_judged.shares_band"
    )
    return keep_reachable(judged, rule=rule, sketch_bands=sketch_bands)


def unreachable_column(rule: PairRule) -> Column:
    """A judged candidate the text check would test (``needs_check_column``) that its filter says cannot
    pass (``may_pass`` false): one whose texts need not be read."""
    return needs_check_column(rule, F.col(C.DISTANCE)) & ~F.col(C.MAY_PASS)


def keep_reachable(judged: DataFrame, *, rule: PairRule, sketch_bands: bool) -> DataFrame:
    """``drop_unreachable`` of candidates already judged (``id_a``, ``id_b``, ``distance``, ``may_pass``,
    ``shares_band``; e.g. where the band join found them, ``transforms.candidates.in_task_band_join``).
    Out: as ``drop_unreachable``."""
    out: list[str | Column] = [C.ID_A, C.ID_B, C.DISTANCE]
    if sketch_bands:
        out.append(C.SHARES_BAND)
    return judged.where(~unreachable_column(rule)).select(*out)


def _by_pair(pairs: DataFrame, side: DataFrame, column: str, suffix: str) -> DataFrame:
    """``pairs`` with ``column`` of both documents as ``_a<suffix>``, ``_b<suffix>`` (left joins)."""
    for end, id_col in (("a", C.ID_A), ("b", C.ID_B)):
        one = side.select(F.col(C.ID).alias(f"_{end}{suffix}_id"), F.col(column).alias(f"_{end}{suffix}"))
        pairs = pairs.join(one, on=F.col(id_col) == F.col(f"_{end}{suffix}_id"), how="left")
    return pairs


def rows_of_pairs(pairs: DataFrame, side: DataFrame, *, partitions: int | None = None) -> DataFrame:
    """``side``'s rows of the documents in ``pairs`` only: their ids are broadcast, so the scan drops every
    other row (text, check summary) before the joins shuffle and sort what is left. With ``partitions``
    (``spark.sql.shuffle.partitions``), hash-partitioned into that many by id and sorted within them, as
    the joins to each end of a pair want them: persisted so, the rows are shuffled and sorted once, not
    once per end."""
    ids = pairs.select(F.col(C.ID_A).alias(C.ID)).unionByName(pairs.select(F.col(C.ID_B).alias(C.ID)))
    rows = side.join(F.broadcast(ids), on=C.ID, how="left_semi")
    if partitions is None:
        return rows
    return rows.repartition(partitions, C.ID).sortWithinPartitions(C.ID)


def _hamming(a: Column, b: Column) -> Column:
    return F.bit_count(a.bitwiseXOR(b))


def _within_pair_k(
    candidates: DataFrame, *, rule: PairRule, lengths: DataFrame, titles: DataFrame | None
) -> DataFrame:
    """The candidates within their pair's k whose titles agree, with ``_shorter_chars`` and
    ``_title_distance`` for the rule."""
    pairs = candidates.select(C.ID_A, C.ID_B, C.DISTANCE, _shares_band(candidates).alias(C.SHARES_BAND))
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
    within_k = F.col(C.DISTANCE) <= pair_k_column(rule.policy, F.col(_SHORTER))
    return pairs.withColumn(_WITHIN_K, within_k).where(
        (within_k | F.col(C.SHARES_BAND)) & titles_agree_column(rule, F.col(_TITLE_DISTANCE))
    )


def _shares_band(candidates: DataFrame) -> Column:
    """Whether a candidate's sketches share a band: false unless the candidates say
    (``drop_unreachable`` with sketch bands)."""
    return F.col(C.SHARES_BAND) if C.SHARES_BAND in candidates.columns else F.lit(False)


def accept_pairs(
    candidates: DataFrame,
    *,
    rule: PairRule,
    lengths: DataFrame,
    texts: DataFrame | None = None,
    titles: DataFrame | None = None,
) -> DataFrame:
    """The candidates the rule accepts.

    In: ``candidates`` (``id_a``, ``id_b``, ``distance``, optionally ``shares_band``: the rule takes a
    pair whose sketches share a band beyond its k), ``lengths`` (``id``, ``n_chars``), ``texts``
    (``id``, ``text``; needed when the rule checks texts), ``titles`` (``id``, ``title_fingerprint``;
    needed with ``rule.title_max_distance``). ``texts`` is joined to each end of a pair: when the
    candidates are few, give ``rows_of_pairs`` of them, persisted, so the input is read once. Out: ``id_a``,
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
            shares_band=F.col(C.SHARES_BAND),
        )
        return frame.select(
            C.ID_A, C.ID_B, C.DISTANCE, similarity.alias(C.SIMILARITY), reason.alias(C.REASON)
        )

    needs = needs_check_column(rule, distance, F.col(_WITHIN_K))
    # a pair beyond its k that shares a sketch band is only accepted by a check: without one, none is
    direct = accepted(pairs.where(~needs), F.lit(None).cast("double")).where(F.col(C.REASON).isNotNull())
    if not rule.verify.enabled:
        return direct
    if texts is None:
        raise ValueError(f"verify.measure={rule.verify.measure!r} needs the documents' texts")
    checked_pairs = pairs.where(needs)
    to_check = _by_pair(checked_pairs, texts, C.TEXT, "text")
    similarity = _similarity_udf(rule)(F.col("_atext"), F.col("_btext"))
    with_sim = to_check.withColumn(C.SIMILARITY, similarity)
    checked = accepted(with_sim, F.col(C.SIMILARITY)).where(F.col(C.REASON).isNotNull())
    return direct.unionByName(checked)
