"""The one place a SparkSession is built. Library code receives the session; it never sets a master."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from simhash_spark.config import Config


def launched_by_spark_submit() -> bool:
    """spark-submit starts the Python driver with a gateway already running."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def build_session(
    cfg: Config, *, master: str | None = None, remote: str | None = None, conf: dict[str, str] | None = None
) -> SparkSession:
    """Local runs (plain ``python -m simhash_spark``) get Spark's default local master unless ``master``
    is given; under spark-submit the master and resources come from spark-submit."""
    if not launched_by_spark_submit():
        # Workers must import the same interpreter (and packages) as the driver in local mode.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(cfg.spark.app_name)
    if remote:
        builder = builder.remote(remote)
    elif master:
        builder = builder.master(master)
    if not launched_by_spark_submit() and not remote:
        # Local development: no progress bars over the log, and shuffle partitions sized to the machine
        # instead of Spark's 200 (which makes every small local shuffle pay 200 tasks).
        builder = builder.config("spark.ui.showConsoleProgress", "false")
        builder = builder.config("spark.sql.shuffle.partitions", str(2 * (os.cpu_count() or 2)))
    builder = builder.config("spark.sql.execution.arrow.maxRecordsPerBatch", str(cfg.spark.arrow_batch_size))
    builder = builder.config("spark.sql.execution.arrow.pyspark.enabled", "true")
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(cfg.spark.arrow_batch_size))
    return spark
