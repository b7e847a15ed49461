"""Fingerprinting as an Arrow pandas UDF around :class:`simhash_spark.core.fingerprint.Fingerprinter`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.functions import pandas_udf

from simhash_spark import columns as C
from simhash_spark.core.fingerprint import FINGERPRINTED, INVALID_UTF8, Fingerprinter, ModelOptions
from simhash_spark.faults import maybe_fail

_RESULT_SCHEMA = f"{C.FINGERPRINT} long, {C.STATUS} string, {C.N_CHARS} int"


def model_files(model: ModelOptions) -> list[str]:
    """Files the workers read: user dictionary, IDF table, stop words."""
    paths = [model.tokenizer.user_dict_path, model.features.idf_path, model.features.stop_words_path]
    return [p for p in paths if p]


def _localized(model: ModelOptions) -> ModelOptions:
    """The model with its file paths as this executor sees them: the path itself where it exists (local
    mode, shared file systems), else the copy the driver shipped with ``SparkContext.addFile``."""

    def local(path: str) -> str:
        if not path or os.path.exists(path):
            return path
        from pyspark import SparkFiles

        shipped = SparkFiles.get(os.path.basename(path))
        return shipped if os.path.exists(shipped) else path

    return replace(
        model,
        tokenizer=replace(model.tokenizer, user_dict_path=local(model.tokenizer.user_dict_path)),
        features=replace(
            model.features,
            idf_path=local(model.features.idf_path),
            stop_words_path=local(model.features.stop_words_path),
        ),
    )


def _fingerprint_udf(model: ModelOptions) -> Any:
    @pandas_udf(_RESULT_SCHEMA)  # type: ignore[call-overload]
    def fingerprint(batches: Iterator[pd.Series]) -> Iterator[pd.DataFrame]:
        fp = Fingerprinter(_localized(model))  # per task; the heavy state inside is cached per worker process
        maybe_fail("fingerprint")
        for texts in batches:
            res = fp.batch(texts.where(texts.notna(), None).tolist())
            yield pd.DataFrame(
                {
                    C.FINGERPRINT: pd.arrays.IntegerArray(res.fingerprint, ~res.has_fingerprint),
                    C.STATUS: res.status,
                    C.N_CHARS: res.n_chars.astype("int32"),
                }
            )

    return fingerprint


def fingerprint_hex(fingerprint: Column) -> Column:
    """16 lowercase hex digits of the unsigned fingerprint (Spark's ``hex`` of a LONG is unsigned)."""
    return F.lower(F.lpad(F.hex(fingerprint), 16, "0"))


def is_fingerprinted(status: Column) -> Column:
    return status.isin(*FINGERPRINTED)


def _made_valid(text: Column) -> Column:
    if hasattr(F, "make_valid_utf8"):  # Spark 4
        return F.make_valid_utf8(text)
    # Spark 3.5: decoding the bytes replaces each malformed sequence with U+FFFD
    return F.decode(text.cast("binary"), "UTF-8")


def _is_invalid_utf8(text: Column) -> Column:
    if hasattr(F, "is_valid_utf8"):  # Spark 4
        return F.coalesce(~F.is_valid_utf8(text), F.lit(False))
    return F.coalesce(_made_valid(text) != text, F.lit(False))


def valid_text(text: Column) -> Column:
    """The text with invalid UTF-8 sequences replaced by U+FFFD (Arrow cannot hand them to Python)."""
    return F.when(_is_invalid_utf8(text), _made_valid(text)).otherwise(text)


def add_title_fingerprints(fps: DataFrame, *, model: ModelOptions) -> DataFrame:
    """In: any columns with ``title_text``. Out: the same columns, ``title_text`` replaced by
    ``title_fingerprint`` (LONG; null for a missing, too short or featureless title)."""
    title = F.col(C.TITLE)
    res = fps.select("*", _fingerprint_udf(model)(valid_text(title)).alias("_tfp"))
    return res.select(
        *[F.col(c) for c in fps.columns if c != C.TITLE],
        F.when(is_fingerprinted(F.col(f"_tfp.{C.STATUS}")), F.col(f"_tfp.{C.FINGERPRINT}")).alias(
            C.TITLE_FINGERPRINT
        ),
    )


def add_fingerprints(docs: DataFrame, *, model: ModelOptions, extra: tuple[str, ...] = ()) -> DataFrame:
    """Fingerprint every document.

    In: ``id``, ``text`` (nullable string) and the ``extra`` columns.
    Out: ``id``, ``fingerprint`` (LONG, null unless the status is fingerprinted), ``fingerprint_hex``,
    ``status``, ``n_chars``, then the ``extra`` columns unchanged. One row per input row.
    Invalid UTF-8 (which Arrow cannot hand to Python) is repaired on the JVM side first and the row's
    status says so.
    """
    text = F.col(C.TEXT)
    invalid = _is_invalid_utf8(text)
    res = docs.select(
        "*",
        _fingerprint_udf(model)(valid_text(text)).alias("_fp"),
        invalid.alias("_invalid"),
    )
    status = F.col(f"_fp.{C.STATUS}")
    return res.select(
        F.col(C.ID),
        F.col(f"_fp.{C.FINGERPRINT}").alias(C.FINGERPRINT),
        fingerprint_hex(F.col(f"_fp.{C.FINGERPRINT}")).alias(C.FINGERPRINT_HEX),
        F.when(F.col("_invalid") & is_fingerprinted(status), F.lit(INVALID_UTF8))
        .otherwise(status)
        .alias(C.STATUS),
        F.col(f"_fp.{C.N_CHARS}").alias(C.N_CHARS),
        *[F.col(c) for c in extra],
    )
