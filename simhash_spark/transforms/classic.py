"""What a classic session (a SparkContext, a JVM beside this process) offers and a Spark Connect session
does not: the one place that tells them apart."""

from __future__ import annotations

from pyspark import SparkContext
from pyspark.sql import SparkSession


def spark_context(spark: SparkSession) -> SparkContext | None:
    """The session's SparkContext, or None on Spark Connect (which has none: its ``sparkContext`` raises)."""
    try:
        return spark.sparkContext
    except Exception:
        return None
