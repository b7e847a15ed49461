import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
# PySpark 3.5's pyspark.testing imports pandas-on-Spark, which warns (an error here) unless this is set
os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
# the jobs the tests start as processes keep their JVM class archive (spark.class_archive = "auto") here,
# not in the user's cache; removed with the test run
CACHE = tempfile.mkdtemp(prefix="simhash_spark-tests-cache-")
os.environ["XDG_CACHE_HOME"] = CACHE
atexit.register(shutil.rmtree, CACHE, ignore_errors=True)

CORPORA = Path(os.environ.get("SIMHASH_CORPORA", Path(__file__).resolve().parents[2] / "shared" / "corpora"))


@pytest.fixture(scope="session")
def spark():
    """The one SparkSession of the test run (local[2], small shuffles)."""
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("simhash_spark-tests")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
        .config("spark.driver.memory", "3g")
        .config("spark.sql.optimizer.canChangeCachedPlanOutputPartitioning", "true")  # as build_session
        # one session serves hundreds of runs: keep the history the driver retains for its (disabled)
        # UI small, or its plans and metrics fill the heap late in the suite
        .config("spark.sql.ui.retainedExecutions", "20")
        .config("spark.ui.retainedJobs", "50")
        .config("spark.ui.retainedStages", "50")
        .config("spark.ui.retainedTasks", "1000")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def corpora() -> Path:
    if not CORPORA.is_dir():
        pytest.skip(f"shared corpora not found at {CORPORA} (set SIMHASH_CORPORA)")
    return CORPORA


@pytest.fixture(autouse=True)
def _job_logger_restored():
    """``cli.main`` gives the job's logger its own stderr handler (and stops propagation); put it back so
    the next test's ``caplog`` sees the job's log records."""
    import logging

    yield
    job = logging.getLogger("simhash_spark")
    job.handlers.clear()
    job.propagate = True
    job.setLevel(logging.NOTSET)
