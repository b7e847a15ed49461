"""Daily near-duplicate detection with simhash_spark.

Each day's partition of the corpus (``{SIMHASH_INPUT_ROOT}/dt=YYYY-MM-DD``) is deduplicated against
itself and against everything earlier through the fingerprint index, then added to the index; the
results land in ``{SIMHASH_OUTPUT_ROOT}/dt=YYYY-MM-DD``. Afterwards older index snapshots are merged.

Retries and manual reruns are safe: ``--run-date`` makes a rerun replace that day's index entries and
``--overwrite`` its output. One run at a time (``max_active_runs=1``): the index has one writer. A jump of
the day's dedup rate beyond the ``[monitor]`` band fails the task (exit code 3) before anything is
published, so the day is alerted on instead of published.

Failures: exit 2 (bad input or configuration) and exit 3 (monitor alarm) are deterministic, so the task
fails at once without its retries (``AirflowFailException``); exit 1 (a runtime failure: lost executors,
a full disk) keeps the retries. An alarm raises ``SimhashMonitorAlarm`` and its message starts with
``SIMHASH_MONITOR_ALARM``: an ``on_failure_callback`` (see ``on_failure`` below) can route it to an alert.

Settings are read when a task runs, never while the file is parsed: the templated fields use the Airflow
Variables SIMHASH_INPUT_ROOT, SIMHASH_OUTPUT_ROOT, SIMHASH_INDEX (required), SIMHASH_JOBS (folder with
``dedup.py`` and ``index_compact.py``; default: the repository's ``jobs/`` next to this file) and
SIMHASH_CONFIG (a TOML file or a preset's name; default: ``default``). A Variable that is not set
falls back to the environment variable of the same name (read from the parsing process's environment,
no database access). SIMHASH_SPARK_CONN (default ``spark_default``) and SIMHASH_SPARK_CONF (a JSON object
of Spark properties) are read from the environment only: they shape the operator itself.
"""

from __future__ import annotations

import json
import logging
import os
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

try:  # Airflow 3
    from airflow.sdk import DAG
    from airflow.sdk.exceptions import AirflowException, AirflowFailException
except ImportError:  # Airflow 2
    from airflow import DAG  # type: ignore[no-redef]
    from airflow.exceptions import AirflowException, AirflowFailException  # type: ignore[no-redef]

log = logging.getLogger(__name__)

# What the job's exit codes mean (docs/deploy.md); 1 is a runtime failure worth retrying.
NO_RETRY = {
    2: "bad input or configuration (the message above names the file, column or key)",
    3: "monitor alarm: the day's dedup rate left its band; nothing was published",
}


class SimhashMonitorAlarm(AirflowFailException):
    """Exit 3: the run stopped before publishing because the dedup rate jumped."""


def exit_code(error: BaseException) -> int | None:
    """spark-submit's exit code from the Spark provider's error message (client mode; on Kubernetes the
    driver's code, which the provider reports separately)."""
    text = str(error)
    found = re.search(r"Kubernetes spark exit code is: (-?\d+)", text) or re.search(
        r"Error code is: (-?\d+)", text
    )
    return int(found.group(1)) if found else None


class SimhashSparkSubmitOperator(SparkSubmitOperator):
    """``SparkSubmitOperator`` that fails without retries on the job's deterministic exit codes, and before
    submitting when a required setting rendered empty (``required``: setting name → its template)."""

    template_fields = (*SparkSubmitOperator.template_fields, "required")

    def __init__(self, *, required: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.required = dict(required or {})

    def execute(self, context: Any) -> Any:
        unset = sorted(name for name, value in self.required.items() if not str(value).strip())
        if unset:
            raise AirflowFailException(
                f"simhash_spark: {', '.join(unset)} not set: set the Airflow Variable (or the environment "
                "variable of that name where the DAG is parsed); nothing was submitted"
            )
        try:
            return super().execute(context)
        except AirflowException as e:
            code = exit_code(e)
            if code == 3:
                raise SimhashMonitorAlarm(f"SIMHASH_MONITOR_ALARM exit 3: {NO_RETRY[3]}") from e
            if code in NO_RETRY:
                raise AirflowFailException(f"simhash_spark exit {code}: {NO_RETRY[code]}") from e
            raise


def on_failure(context: Any) -> None:
    """Where to hook your alerting: an alarm is told apart from other failures by its exception type."""
    error = context.get("exception")
    if isinstance(error, SimhashMonitorAlarm):
        log.error("SIMHASH_MONITOR_ALARM %s", context.get("ds"))  # e.g. page the on-call here
    else:
        log.error("simhash_spark task failed: %s", error)


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
DAY = "{{ ds }}"

with DAG(
    dag_id="simhash_dedup_daily",
    description="near-duplicate detection of each day's documents against everything seen before",
    schedule="@daily",
    start_date=datetime(2026, 11, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=10), "on_failure_callback": on_failure},
    tags=["simhash_spark", "dedup"],
) as dag:
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
        # merges once at least 7 older snapshots piled up; the last 7 days stay rerunnable
        application_args=[INDEX, "--keep-recent", "7", "--min-snapshots", "7", "--config", CONFIG],
    )
    dedup >> compact
