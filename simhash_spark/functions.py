"""Column functions, for users who want fingerprints of their own DataFrames without running the job::

    from simhash_spark.functions import simhash, simhash_hex

    df.select("id", simhash("body").alias("fp"), simhash_hex("body").alias("fp_hex"))

Fingerprints equal the job's (same model: normalization, features, hash), so they can be compared with
a job's ``documents/`` and with an index built with the same configuration. A text that gets no
fingerprint (null, empty, too short, no features) gives null.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.config import Config, load_config
from simhash_spark.transforms.fingerprint import _fingerprint_udf, fingerprint_hex, valid_text


def _column(col: Column | str) -> Column:
    return F.col(col) if isinstance(col, str) else col


def _string(col: Column | str) -> Column:
    """``col``, failing the query with a message naming it and its type unless it is a string column (a
    number or bytes would reach the fingerprinting worker and fail there without saying which column).
    ``typeof`` depends on the type only: Spark folds the test away for a string column."""
    column = _column(col)
    shown = col if isinstance(col, str) else str(column)
    message = F.concat(
        F.lit(f"simhash: column {shown!r} has type "), F.typeof(column), F.lit("; expected a string column")
    )
    return F.when(F.typeof(column) != F.lit("string"), F.raise_error(message)).otherwise(
        column.cast("string")
    )


def simhash(col: Column | str, config: Config | None = None) -> Column:
    """The 64-bit SimHash of a string column as a signed LONG (the two's-complement view of the unsigned
    value), under ``config`` (default: the packaged default configuration). Another type fails the query
    with a message naming the column and its type."""
    model = (config or load_config()).model
    return _fingerprint_udf(model)(valid_text(_string(col)))[C.FINGERPRINT]


def simhash_hex(col: Column | str, config: Config | None = None) -> Column:
    """``simhash`` as 16 lowercase hex digits of the unsigned value."""
    return fingerprint_hex(simhash(col, config))
