"""Daily near-duplicate detection with simhash_spark.

Each day's partition of the corpus (``{SIMHASH_INPUT_ROOT}/dt=YYYY-MM-DD``) is deduplicated against
itself and against everything earlier through the fingerprint index, then added to the index; the
results land in ``{SIMHASH_OUTPUT_ROOT}/dt=YYYY-MM-DD``. Afterwards older index snapshots are merged.

Retries and manual reruns are safe: ``--run-date`` makes a rerun replace that day's index entries and
``--overwrite`` its output. One run at a time (``max_active_runs=1``): the index has one writer. A jump of
the day's dedup rate beyond the ``[monitor]`` band fails the task (exit code 3) before anything is
published, so the day is alerted on instead of published.

Settings (environment of the scheduler and workers, or Airflow Variables of the same names):
SIMHASH_INPUT_ROOT, SIMHASH_OUTPUT_ROOT, SIMHASH_INDEX (required); SIMHASH_JOBS (folder with
``dedup.py`` and ``index_compact.py``; default: the repository's ``jobs/`` next to this file),
SIMHASH_CONFIG (a TOML file; default: the package's conf/default.toml), SIMHASH_SPARK_CONN
(default ``spark_default``), SIMHASH_SPARK_CONF (JSON object of Spark properties).
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from pathlib import Path

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

try:  # Airflow 3
    from airflow.sdk import DAG, Variable
except ImportError:  # Airflow 2
    from airflow import DAG  # type: ignore[no-redef]
    from airflow.models import Variable  # type: ignore[no-redef]


def setting(name: str, default: str | None = None) -> str:
    value = os.environ.get(name)
    if value is None:
        try:
            value = Variable.get(name, default=None)
        except Exception:  # no metadata database reachable while parsing
            value = None
    if value is None:
        if default is None:
            raise KeyError(f"set {name} in the environment or as an Airflow Variable")
        return default
    return value


JOBS = setting("SIMHASH_JOBS", str(Path(__file__).resolve().parent.parent / "jobs"))
INDEX = setting("SIMHASH_INDEX", "")
CONFIG = setting("SIMHASH_CONFIG", "")
SPARK_CONF = json.loads(setting("SIMHASH_SPARK_CONF", "{}"))
CONN = setting("SIMHASH_SPARK_CONN", "spark_default")
DAY = "{{ ds }}"

config_args = ["--config", CONFIG] if CONFIG else []

with DAG(
    dag_id="simhash_dedup_daily",
    description="near-duplicate detection of each day's documents against everything seen before",
    schedule="@daily",
    start_date=datetime(2026, 11, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=10)},
    tags=["simhash_spark", "dedup"],
) as dag:
    dedup = SparkSubmitOperator(
        task_id="dedup",
        conn_id=CONN,
        application=f"{JOBS}/dedup.py",
        name="simhash_dedup_{{ ds_nodash }}",
        conf=SPARK_CONF,
        application_args=[
            "--input",
            setting("SIMHASH_INPUT_ROOT", "") + f"/dt={DAY}",
            "--output",
            setting("SIMHASH_OUTPUT_ROOT", "") + f"/dt={DAY}",
            "--index",
            INDEX,
            "--run-date",
            DAY,
            "--overwrite",
            *config_args,
        ],
    )
    compact = SparkSubmitOperator(
        task_id="compact_index",
        conn_id=CONN,
        application=f"{JOBS}/index_compact.py",
        name="simhash_compact_{{ ds_nodash }}",
        conf=SPARK_CONF,
        # merges once at least 7 older snapshots piled up; the last 7 days stay rerunnable
        application_args=[INDEX, "--keep-recent", "7", "--min-snapshots", "7", *config_args],
    )
    dedup >> compact
