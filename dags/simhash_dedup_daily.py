"""Daily near-duplicate detection with simhash_spark.

Each day's partition of the corpus (``{SIMHASH_INPUT_ROOT}/dt=YYYY-MM-DD``) is deduplicated against
itself and against everything earlier through the fingerprint index, then added to the index; the
results land in ``{SIMHASH_OUTPUT_ROOT}/dt=YYYY-MM-DD``. Afterwards older index snapshots are merged.

Every day runs, in order: the index is a history, so a day skipped would never be indexed. ``catchup``
runs the days missed while the DAG was paused (or before it was deployed, from SIMHASH_START_DATE), one
at a time (``max_active_runs=1``: the index has one writer), and ``depends_on_past`` keeps a day from
starting before the day before it succeeded. A day's partition that has not arrived yet is waited for
(``wait_for_input``, rescheduled: no worker slot held; it fails after SIMHASH_INPUT_TIMEOUT_HOURS); a day
that arrived empty (no crawl) succeeds with empty outputs and is recorded in the index
(``--allow-empty-input``).

Retries and manual reruns are safe: ``--run-date`` makes a rerun replace that day's index entries and
``--overwrite`` its output. A jump of the day's dedup rate beyond the ``[monitor]`` band fails the task
(exit code 3) before anything is published, so the day is alerted on instead of published.

Failures: exit 2 (bad input or configuration) and exit 3 (monitor alarm) are deterministic, so the task
fails at once without its retries; exit 1 (a runtime failure: lost executors, a full disk) keeps the
retries. An alarm raises ``SimhashMonitorAlarm`` and its message starts with ``SIMHASH_MONITOR_ALARM``:
``on_failure`` (``simhash_spark.airflow``) is where to route it to an alert. The operators live in the
package (``simhash_spark.airflow``): the Airflow environment needs simhash_spark installed (without
PySpark: ``pip install --no-deps simhash_spark-*.whl``, plus pyarrow for inputs on HDFS or object stores).

Settings are read when a task runs, never while the file is parsed: the templated fields use the Airflow
Variables SIMHASH_INPUT_ROOT, SIMHASH_OUTPUT_ROOT, SIMHASH_INDEX (required), SIMHASH_JOBS (folder with
``dedup.py`` and ``index_compact.py``; default: the repository's ``jobs/`` next to this file),
SIMHASH_CONFIG (a TOML file or a preset's name; default: ``default``) and SIMHASH_INPUT_MARKER (a file the
input partition must hold before the day runs, e.g. ``_SUCCESS``; default: none, the folder suffices). A
Variable that is not set falls back to the environment variable of the same name (read from the parsing
process's environment, no database access). What shapes the DAG itself is read from the environment only:
SIMHASH_SPARK_CONN (default ``spark_default``), SIMHASH_SPARK_CONF (a JSON object of Spark properties),
SIMHASH_START_DATE (the first day, YYYY-MM-DD; default 2026-11-01), SIMHASH_TASK_TIMEOUT_HOURS (a Spark
task's ``execution_timeout``, default 6) and SIMHASH_INPUT_TIMEOUT_HOURS (how long a day's input is waited
for, default 24).
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from pathlib import Path

from simhash_spark.airflow import SimhashInputSensor, SimhashSparkSubmitOperator, on_failure

try:  # Airflow 3
    from airflow.sdk import DAG
except ImportError:  # Airflow 2
    from airflow import DAG  # type: ignore[no-redef]


def var(name: str, default: str = "") -> str:
    """A template that reads the Airflow Variable ``name`` when the task runs, defaulting to the
    environment variable of that name."""
    fallback = os.environ.get(name, default)
    return "{{ var.value.get(" + repr(name) + ", " + repr(fallback) + ") }}"


JOBS = var("SIMHASH_JOBS", str(Path(__file__).resolve().parent.parent / "jobs"))
INPUT_ROOT = var("SIMHASH_INPUT_ROOT")
OUTPUT_ROOT = var("SIMHASH_OUTPUT_ROOT")
INDEX = var("SIMHASH_INDEX")
CONFIG = var("SIMHASH_CONFIG", "default")
SPARK_CONF = json.loads(os.environ.get("SIMHASH_SPARK_CONF", "{}"))
CONN = os.environ.get("SIMHASH_SPARK_CONN", "spark_default")
MARKER = var("SIMHASH_INPUT_MARKER")
START = datetime.fromisoformat(os.environ.get("SIMHASH_START_DATE", "2026-11-01"))
TASK_TIMEOUT = timedelta(hours=float(os.environ.get("SIMHASH_TASK_TIMEOUT_HOURS", "6")))
INPUT_TIMEOUT = timedelta(hours=float(os.environ.get("SIMHASH_INPUT_TIMEOUT_HOURS", "24")))
DAY = "{{ ds }}"

with DAG(
    dag_id="simhash_dedup_daily",
    description="near-duplicate detection of each day's documents against everything seen before",
    schedule="@daily",
    start_date=START,
    catchup=True,  # a day missed while paused runs when the DAG resumes, in order
    max_active_runs=1,
    default_args={
        "retries": 2,
        "retry_delay": timedelta(minutes=10),
        "depends_on_past": True,
        "execution_timeout": TASK_TIMEOUT,
        "on_failure_callback": on_failure,
    },
    tags=["simhash_spark", "dedup"],
) as dag:
    wait = SimhashInputSensor(
        task_id="wait_for_input",
        path=INPUT_ROOT + f"/dt={DAY}",
        marker=MARKER,
        required={"SIMHASH_INPUT_ROOT": INPUT_ROOT},
        poke_interval=300,
        timeout=INPUT_TIMEOUT.total_seconds(),
        execution_timeout=None,  # bounded by its own timeout
        retries=0,
    )
    dedup = SimhashSparkSubmitOperator(
        task_id="dedup",
        conn_id=CONN,
        application=f"{JOBS}/dedup.py",
        name="simhash_dedup_{{ ds_nodash }}",
        conf=SPARK_CONF,
        required={
            "SIMHASH_INPUT_ROOT": INPUT_ROOT,
            "SIMHASH_OUTPUT_ROOT": OUTPUT_ROOT,
            "SIMHASH_INDEX": INDEX,
        },
        application_args=[
            "--input",
            INPUT_ROOT + f"/dt={DAY}",
            "--output",
            OUTPUT_ROOT + f"/dt={DAY}",
            "--index",
            INDEX,
            "--run-date",
            DAY,
            "--overwrite",
            "--allow-empty-input",
            "--config",
            CONFIG,
        ],
    )
    compact = SimhashSparkSubmitOperator(
        task_id="compact_index",
        conn_id=CONN,
        application=f"{JOBS}/index_compact.py",
        name="simhash_compact_{{ ds_nodash }}",
        conf=SPARK_CONF,
        required={"SIMHASH_INDEX": INDEX},
        # size-tiered: 7 days merge into a week, 7 weeks into a quarter (each entry rewritten about once a
        # tier, a few dozen snapshots after a year); the last 7 days stay rerunnable
        application_args=[
            INDEX,
            "--keep-recent",
            "7",
            "--min-snapshots",
            "7",
            "--tier-ratio",
            "4",
            "--config",
            CONFIG,
        ],
    )
    wait >> dedup >> compact
