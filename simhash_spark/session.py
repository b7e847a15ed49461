"""The one place a SparkSession is built. Library code receives the session; it never sets a master."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from simhash_spark.config import Config


def launched_by_spark_submit() -> bool:
    """spark-submit starts the Python driver with a gateway already running."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _submitted_keys() -> set[str]:
    """The Spark properties spark-submit set (``--name``, ``--conf``, properties files): the JVM it
    started holds them as system properties, which a new SparkConf reads."""
    if not launched_by_spark_submit():
        return set()
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # connects to spark-submit's gateway: SparkConf then reads the JVM's
    return {key for key, _ in SparkConf().getAll()}


def _defaults(cfg: Config, local: bool) -> dict[str, str]:
    """What the job sets unless the launcher did."""
    out = {
        "spark.app.name": cfg.spark.app_name,
        "spark.sql.execution.arrow.maxRecordsPerBatch": str(cfg.spark.arrow_batch_size),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # The job persists shuffled frames it reads several times. Spark's default (false) keeps adaptive
        # execution from coalescing the partitions of a persisted plan, so with the default 200 shuffle
        # partitions every stage downstream ran 200 mostly empty tasks and every output came out as up
        # to 200 files. true lets adaptive execution size them from the data, whoever launched the job.
        "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "true",
    }
    if local:
        # Local development: no progress bars over the job's own progress line, and shuffle partitions
        # sized to the machine instead of Spark's 200 (which makes every small local shuffle pay 200 tasks).
        out["spark.ui.showConsoleProgress"] = "false"
        out["spark.sql.shuffle.partitions"] = str(2 * (os.cpu_count() or 2))
    return out


def build_session(
    cfg: Config, *, master: str | None = None, remote: str | None = None, conf: dict[str, str] | None = None
) -> SparkSession:
    """Local runs (plain ``python -m simhash_spark``) get Spark's default local master unless ``master``
    is given; under spark-submit the master, resources and every property spark-submit set win: the
    configuration fills in only what it left unset. ``conf`` (``--spark-conf``) wins over both."""
    submitted = launched_by_spark_submit()
    if not submitted:
        # Workers must import the same interpreter (and packages) as the driver in local mode.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder
    if remote:
        builder = builder.remote(remote)
    elif master:
        builder = builder.master(master)
    taken = _submitted_keys()
    settings = {k: v for k, v in _defaults(cfg, local=not submitted and not remote).items() if k not in taken}
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    batch = "spark.sql.execution.arrow.maxRecordsPerBatch"
    if batch in settings:  # an existing session (tests, notebooks) keeps its own otherwise
        spark.conf.set(batch, settings[batch])
    return spark
