"""DataFrames of rows the driver computed (small runs): sent to Spark through Arrow, never through a
Python worker (starting one costs a run about a second)."""

from __future__ import annotations

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T


def driver_frame(spark: SparkSession, rows: pd.DataFrame, schema: str | T.StructType) -> DataFrame:
    """``rows`` as a DataFrame of ``schema`` (a DDL string or a StructType)."""
    if len(rows):
        return spark.createDataFrame(rows, schema)
    # PySpark makes an empty pandas frame a Python RDD, which a Python worker must read: an empty range
    # with typed nulls holds the same nothing without one (the schema is only analyzed, no job runs)
    fields = spark.createDataFrame([], schema).schema.fields
    return spark.range(0).select(*[F.lit(None).cast(f.dataType).alias(f.name) for f in fields])
