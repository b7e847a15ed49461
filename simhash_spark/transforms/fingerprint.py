"""Fingerprinting as an Arrow pandas UDF around :class:`simhash_spark.core.fingerprint.Fingerprinter`."""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.functions import pandas_udf

from simhash_spark import columns as C
from simhash_spark.core.allocator import keep_freed_memory
from simhash_spark.core.check_filter import CheckFilter
from simhash_spark.core.fingerprint import (
    FINGERPRINTED,
    INVALID_UTF8,
    FingerprintBatch,
    Fingerprinter,
    ModelOptions,
)
from simhash_spark.core.spark_hash import xxhash64
from simhash_spark.core.utf8 import repaired_texts
from simhash_spark.faults import maybe_fail
from simhash_spark.transforms.driver_frames import driver_frame

_RESULT_SCHEMA = f"{C.FINGERPRINT} long, {C.STATUS} string, {C.N_CHARS} int"
_INVALID = "_invalid"
_REPAIRED_HASH = "_repaired_hash"
# Spark 4.1 and later: UDFs over Arrow arrays, which take any bytes
_ARROW_UDFS = hasattr(F, "arrow_udf")


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


def _fingerprint_udf(model: ModelOptions, check: CheckFilter | None = None) -> Any:
    """The fingerprint UDF: Arrow arrays in and out where Spark has Arrow UDFs (4.1 and later; no pandas
    conversion on either side), else a pandas UDF. Both return ``_RESULT_SCHEMA`` (and the check summaries).

    The Arrow UDF takes texts as Spark read them, invalid UTF-8 included (``core.utf8.repaired_texts``):
    ``_REPAIRED_HASH`` holds the text hash of a repaired row's text (null for the other rows). The pandas
    UDF needs valid UTF-8 (``valid_text``)."""
    schema = _RESULT_SCHEMA + (f", {C.CHECK_SUMMARY} binary" if check is not None else "")
    if _ARROW_UDFS:

        @F.arrow_udf(f"{schema}, {_REPAIRED_HASH} long")  # type: ignore[call-overload]
        def fingerprint_arrow(batches: Iterator[pa.Array]) -> Iterator[pa.Array]:
            fp = _task_fingerprinter(model, check)
            for texts in batches:
                values, repaired = repaired_texts(texts)
                yield _result_struct(fp.batch(values), _repairs(values, repaired))

        return fingerprint_arrow

    @pandas_udf(schema)  # type: ignore[call-overload]
    def fingerprint(batches: Iterator[pd.Series]) -> Iterator[pd.DataFrame]:
        fp = _task_fingerprinter(model, check)
        for texts in batches:
            yield _result_frame(fp.batch(texts.where(texts.notna(), None).tolist()))

    return fingerprint


def _repairs(texts: list[str | None], repaired: np.ndarray | None) -> list[int | None] | None:
    """``_REPAIRED_HASH`` of a batch: Spark's ``xxhash64`` of each repaired text, null for the others
    (``None`` for a batch without repairs)."""
    if repaired is None:
        return None
    return [
        xxhash64((t,), "string") if bad else None for t, bad in zip(texts, repaired.tolist(), strict=True)
    ]


def _task_fingerprinter(model: ModelOptions, check: CheckFilter | None) -> Fingerprinter:
    """What each fingerprint task starts with, in the Python worker that runs it: the worker keeps the
    memory its batches free (``keep_freed_memory``), and a fresh fingerprinter (the heavy state inside is
    cached per worker process)."""
    keep_freed_memory()
    fp = Fingerprinter(_localized(model), check)
    maybe_fail("fingerprint")
    return fp


def _result_struct(res: FingerprintBatch, repaired_hashes: list[int | None] | None) -> pa.StructArray:
    """``_result_frame`` as one Arrow struct array, with ``_REPAIRED_HASH`` (``_repairs``)."""
    hashes = pa.nulls(len(res.status), pa.int64())
    if repaired_hashes is not None:  # rare: a batch holding invalid UTF-8
        hashes = pa.array(repaired_hashes, type=pa.int64())
    arrays = [
        pa.array(res.fingerprint, type=pa.int64(), mask=~res.has_fingerprint),
        pa.array(res.status, type=pa.string()),
        pa.array(res.n_chars.astype(np.int32), type=pa.int32()),
    ]
    names = [C.FINGERPRINT, C.STATUS, C.N_CHARS]
    if res.check_summary is not None:
        arrays.append(pa.array(res.check_summary, type=pa.binary()))
        names.append(C.CHECK_SUMMARY)
    arrays.append(hashes)
    names.append(_REPAIRED_HASH)
    return pa.StructArray.from_arrays(arrays, names=names)


def _result_frame(res: FingerprintBatch) -> pd.DataFrame:
    """The UDF's result columns (fingerprint nullable; the check summaries when the batch has them)."""
    out = pd.DataFrame(
        {
            C.FINGERPRINT: pd.arrays.IntegerArray(res.fingerprint, ~res.has_fingerprint),
            C.STATUS: res.status,
            C.N_CHARS: res.n_chars.astype("int32"),
        }
    )
    if res.check_summary is not None:
        out[C.CHECK_SUMMARY] = pd.Series(res.check_summary, dtype=object)
    return out


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


def add_fingerprints(
    docs: DataFrame,
    *,
    model: ModelOptions,
    extra: tuple[str, ...] = (),
    check: CheckFilter | None = None,
    text_hash: bool = False,
) -> DataFrame:
    """Fingerprint every document.

    In: ``id``, ``text`` (nullable string) and the ``extra`` columns.
    Out: ``id``, ``fingerprint`` (LONG, null unless the status is fingerprinted), ``fingerprint_hex``,
    ``status``, ``n_chars``, then the ``extra`` columns unchanged, then with ``text_hash`` ``text_hash``
    (``xxhash64`` of the text as ``valid_text`` gives it), then with ``check``
    (``core.fingerprint.check_filter``) ``check_summary`` (binary, ``CheckFilter.summary``; null for a
    short text or a row without features). One row per input row.
    Invalid UTF-8 is fingerprinted repaired (as ``valid_text`` repairs it) and the row's status says so.
    """
    text = F.col(C.TEXT)
    if _ARROW_UDFS:
        # the UDF repairs what needs it: checking every byte on the JVM first would cost more than the
        # Python side's decoding, which checks them anyway
        res = docs.select("*", _fingerprint_udf(model, check)(text).alias("_fp"))
        invalid = F.col(f"_fp.{_REPAIRED_HASH}").isNotNull()
        hashed = F.coalesce(F.col(f"_fp.{_REPAIRED_HASH}"), F.xxhash64(text))
    else:
        # checked once: the check scans every byte, and the optimizer keeps a column used twice computed once
        checked = docs.select("*", _is_invalid_utf8(text).alias(_INVALID))
        repaired = F.when(F.col(_INVALID), _made_valid(text)).otherwise(text)
        res = checked.select("*", _fingerprint_udf(model, check)(repaired).alias("_fp"))
        invalid, hashed = F.col(_INVALID), F.xxhash64(repaired)
    fp_status = F.col(f"_fp.{C.STATUS}")
    status = F.when(invalid & is_fingerprinted(fp_status), F.lit(INVALID_UTF8)).otherwise(fp_status)
    summary = [F.col(f"_fp.{C.CHECK_SUMMARY}").alias(C.CHECK_SUMMARY)] if check is not None else []
    return res.select(
        F.col(C.ID),
        F.col(f"_fp.{C.FINGERPRINT}").alias(C.FINGERPRINT),
        fingerprint_hex(F.col(f"_fp.{C.FINGERPRINT}")).alias(C.FINGERPRINT_HEX),
        status.alias(C.STATUS),
        F.col(f"_fp.{C.N_CHARS}").alias(C.N_CHARS),
        *[F.col(c) for c in extra],
        *([hashed.alias(C.TEXT_HASH)] if text_hash else []),
        *summary,
    )


# --- the same on the driver, for small inputs ----------------------------------------------------------

# An input is probed for the driver only when Spark plans it at most this many bytes per allowed character
# (UTF-8 Chinese takes 3 bytes a character before compression): the planned size costs no job, the probe one.
_PLANNED_BYTES_PER_CHAR = 4
_LOCAL_BATCH = 1000  # documents per Fingerprinter.batch call, like an Arrow batch of the UDF


def _planned_bytes(df: DataFrame) -> int | None:
    """Spark's size estimate of ``df`` (file sizes for files, statistics for tables; no job), or ``None``
    where there is none (Spark Connect)."""
    try:
        return int(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes())
    except Exception:
        return None


def is_small_input(docs: DataFrame, *, max_documents: int, max_characters: int) -> bool:
    """Whether ``docs`` (``id``, ``text``, optionally ``title_text``) can be fingerprinted on the driver: at
    most ``max_documents`` rows holding at most ``max_characters`` characters of text and titles, string
    ids valid UTF-8 (Arrow cannot hand others to Python). False when Spark cannot say how large the
    input is (it is then not read here), else one aggregation decides."""
    planned = _planned_bytes(docs)
    if max_documents <= 0 or max_characters <= 0 or planned is None:
        return False
    if planned > max_characters * _PLANNED_BYTES_PER_CHAR:
        return False
    chars = F.coalesce(F.length(C.TEXT), F.lit(0))
    if C.TITLE in docs.columns:
        chars = chars + F.coalesce(F.length(C.TITLE), F.lit(0))
    string_ids = isinstance(docs.schema[C.ID].dataType, T.StringType)
    bad_id = _is_invalid_utf8(F.col(C.ID)) if string_ids else F.lit(False)
    probe = docs.agg(
        F.count(F.lit(1)).alias("rows"),
        F.coalesce(F.sum(chars), F.lit(0)).alias("chars"),
        F.coalesce(F.sum(bad_id.cast("long")), F.lit(0)).alias("bad_ids"),
    ).first()
    assert probe is not None
    return probe["rows"] <= max_documents and probe["chars"] <= max_characters and not probe["bad_ids"]


def collect_documents(docs: DataFrame) -> pd.DataFrame:
    """``docs`` on the driver, ready for ``local_fingerprints``.

    In: ``id``, ``text``, optionally ``title_text``. Out: ``id``, ``text`` and ``title_text`` (invalid
    UTF-8 repaired as ``valid_text`` does), ``_invalid`` (the text needed repair), ``text_hash``
    (xxhash64 of the repaired text, as the Spark path computes it)."""
    text = valid_text(F.col(C.TEXT))
    titles = [valid_text(F.col(C.TITLE)).alias(C.TITLE)] if C.TITLE in docs.columns else []
    return docs.select(
        C.ID,
        text.alias(C.TEXT),
        *titles,
        _is_invalid_utf8(F.col(C.TEXT)).alias(_INVALID),
        F.xxhash64(text).alias(C.TEXT_HASH),
    ).toPandas()


def _fingerprint_texts(
    texts: pd.Series, model: ModelOptions, *, processes: int = 1, check: CheckFilter | None = None
) -> pd.DataFrame:
    """``fingerprint``, ``status``, ``n_chars`` (and with ``check``, ``check_summary``) of ``texts`` in
    this process (what the UDF returns), or with ``processes`` > 1 in that many forked copies of it, a
    batch of documents at a time."""
    keep_freed_memory()  # forked copies inherit it
    fp = Fingerprinter(model, check)
    values = texts.where(texts.notna(), None).tolist()
    starts = range(0, len(values), _LOCAL_BATCH)
    if processes > 1 and len(starts) > 1 and "fork" in mp.get_all_start_methods():
        parts = _forked_batches(fp, values, list(starts), processes)
    else:
        parts = [_result_frame(fp.batch(values[i : i + _LOCAL_BATCH])) for i in starts]
    out = pd.concat(parts, ignore_index=True) if parts else _result_frame(fp.batch([]))
    return out.set_axis(texts.index)


# what forked workers fingerprint: set before the fork, inherited, never pickled
_FORKED: tuple[Fingerprinter, list[Any]] | None = None


def _forked_batch(start: int) -> pd.DataFrame:
    assert _FORKED is not None
    fp, values = _FORKED
    return _result_frame(fp.batch(values[start : start + _LOCAL_BATCH]))


def _forked_batches(
    fp: Fingerprinter, values: list[Any], starts: list[int], processes: int
) -> list[pd.DataFrame]:
    """The batches starting at ``starts`` fingerprinted by ``processes`` forked workers. Forked, not
    spawned: the workers share the collected texts and the warmed fingerprinter without copying or
    importing anything, and run pure Python (never the parent's Spark gateway)."""
    global _FORKED
    fp.batch(values[:1])  # builds the per-process tables once, before the fork, for every worker
    _FORKED = (fp, values)
    try:
        with mp.get_context("fork").Pool(min(processes, len(starts))) as pool:
            return pool.map(_forked_batch, starts, chunksize=1)
    finally:
        _FORKED = None


def _hex(fingerprints: pd.Series) -> pd.Series:
    """``fingerprint_hex`` of nullable signed fingerprints (Spark's ``hex`` of a LONG is unsigned)."""
    return pd.Series(
        [None if pd.isna(v) else format(int(v) & 0xFFFFFFFFFFFFFFFF, "016x") for v in fingerprints],
        index=fingerprints.index,
        dtype=object,
    )


def local_fingerprints(
    local: pd.DataFrame,
    *,
    model: ModelOptions,
    title_model: ModelOptions | None,
    processes: int = 1,
    check: CheckFilter | None = None,
) -> pd.DataFrame:
    """``add_fingerprints`` (and with ``title_model``, ``add_title_fingerprints``) of documents collected by
    ``collect_documents``, computed in this process: no Python worker to start, no shuffle.

    Out: ``id``, ``fingerprint``, ``fingerprint_hex``, ``status``, ``n_chars``, ``text_hash``, then
    ``title_fingerprint`` with a title model: the values the Spark path gives (``local_fingerprint_frame``
    turns them into a DataFrame). ``processes``: how many of the driver's cores to use. With ``check``,
    a last column ``check_summary`` (for the linking only: ``local_fingerprint_frame`` leaves it out)."""
    res = _fingerprint_texts(local[C.TEXT], model, processes=processes, check=check)
    fingerprinted = res[C.STATUS].isin(FINGERPRINTED)
    out = pd.DataFrame(
        {
            C.ID: local[C.ID],
            C.FINGERPRINT: res[C.FINGERPRINT],
            C.FINGERPRINT_HEX: _hex(res[C.FINGERPRINT]),
            C.STATUS: res[C.STATUS].where(~(local[_INVALID].astype(bool) & fingerprinted), INVALID_UTF8),
            C.N_CHARS: res[C.N_CHARS],
            C.TEXT_HASH: local[C.TEXT_HASH].astype(np.int64),
        }
    )
    if title_model is not None:
        titled = _fingerprint_texts(local[C.TITLE], title_model, processes=processes)
        out[C.TITLE_FINGERPRINT] = titled[C.FINGERPRINT].where(titled[C.STATUS].isin(FINGERPRINTED), pd.NA)
    if C.CHECK_SUMMARY in res.columns:
        out[C.CHECK_SUMMARY] = res[C.CHECK_SUMMARY]
    return out


def local_fingerprint_frame(
    spark: SparkSession, fingerprints: pd.DataFrame, id_type: T.DataType
) -> DataFrame:
    """``local_fingerprints`` as a DataFrame with the Spark path's types."""
    types: dict[str, T.DataType] = {
        C.ID: id_type,
        C.FINGERPRINT: T.LongType(),
        C.FINGERPRINT_HEX: T.StringType(),
        C.STATUS: T.StringType(),
        C.N_CHARS: T.IntegerType(),
        C.TEXT_HASH: T.LongType(),
        C.TITLE_FINGERPRINT: T.LongType(),
    }
    plain = fingerprints.drop(columns=[C.CHECK_SUMMARY], errors="ignore")
    schema = T.StructType([T.StructField(c, types[c]) for c in plain.columns])
    # nullable integers as Python ints and None: PySpark 3.5 does not take pandas' Int64 through Arrow
    for c in (C.FINGERPRINT, C.TITLE_FINGERPRINT):
        if c in plain.columns:
            values = plain[c]
            plain[c] = pd.Series(
                [None if pd.isna(v) else int(v) for v in values], index=values.index, dtype=object
            )
    return driver_frame(spark, plain, schema)


def local_text_frame(spark: SparkSession, local: pd.DataFrame, id_type: T.DataType) -> DataFrame:
    """The collected ``id``, ``text`` (and ``title_text``) as a DataFrame: later steps read the texts from
    here instead of the input."""
    cols = [c for c in (C.ID, C.TEXT, C.TITLE) if c in local.columns]
    fields = [T.StructField(c, id_type if c == C.ID else T.StringType()) for c in cols]
    return driver_frame(spark, local[cols], T.StructType(fields))
