"""Airflow operators for the daily job (``dags/simhash_dedup_daily.py`` uses them): imported by DAG files in
an Airflow environment, never by the job. Needs ``apache-airflow`` and its Spark provider; PySpark is not
imported here.

- ``SimhashInputSensor`` waits (rescheduled, holding no worker slot) until a day's input partition exists;
- ``SimhashSparkSubmitOperator`` submits the job and fails at once, without its retries, on the job's
  deterministic exit codes: 2 (bad input or configuration) and 3 (monitor alarm, ``SimhashMonitorAlarm``);
  exit 1 (a runtime failure) keeps the retries;
- ``on_failure``: where an alarm is told apart from other failures, for your alerting.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any
from urllib.parse import urlparse

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

try:  # Airflow 3
    from airflow.sdk import BaseSensorOperator
    from airflow.sdk.exceptions import AirflowException, AirflowFailException
except ImportError:  # Airflow 2
    from airflow.exceptions import AirflowException, AirflowFailException
    from airflow.sensors.base import BaseSensorOperator

log = logging.getLogger(__name__)

# What the job's exit codes mean (docs/deploy.md); 1 is a runtime failure worth retrying.
NO_RETRY = {
    2: "bad input or configuration (the message above names the file, column or key)",
    3: "monitor alarm: the day's dedup rate left its band; nothing was published",
}
ALARM = "SIMHASH_MONITOR_ALARM"


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


def _unset(required: dict[str, str]) -> None:
    unset = sorted(name for name, value in required.items() if not str(value).strip())
    if unset:
        raise AirflowFailException(
            f"simhash_spark: {', '.join(unset)} not set: set the Airflow Variable (or the environment "
            "variable of that name where the DAG is parsed); nothing was submitted"
        )


class SimhashSparkSubmitOperator(SparkSubmitOperator):
    """``SparkSubmitOperator`` that fails without retries on the job's deterministic exit codes, and before
    submitting when a required setting rendered empty (``required``: setting name → its template)."""

    template_fields = (*SparkSubmitOperator.template_fields, "required")

    def __init__(self, *, required: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.required = dict(required or {})

    def execute(self, context: Any) -> Any:
        _unset(self.required)
        try:
            return super().execute(context)
        except AirflowException as e:
            code = exit_code(e)
            if code == 3:
                raise SimhashMonitorAlarm(f"{ALARM} exit 3: {NO_RETRY[3]}") from e
            if code in NO_RETRY:
                raise AirflowFailException(f"simhash_spark exit {code}: {NO_RETRY[code]}") from e
            raise


def path_exists(path: str) -> bool:
    """Whether ``path`` (a local path, ``file:``, or a URI pyarrow's file systems open: ``hdfs://``,
    ``s3://``, ``gs://``, ...) exists."""
    parsed = urlparse(path)
    if parsed.scheme in ("", "file"):
        return os.path.exists(parsed.path if parsed.scheme else path)
    from pyarrow import fs as pafs

    filesystem, inner = pafs.FileSystem.from_uri(path)
    return bool(filesystem.get_file_info(inner).type != pafs.FileType.NotFound)


class SimhashInputSensor(BaseSensorOperator):
    """Waits until the day's input exists: ``path`` (templated), and ``marker`` inside it when given (e.g.
    ``_SUCCESS``, which a crawl writes last). Runs in reschedule mode by default, so a day whose partition
    has not arrived waits without holding a worker slot, and fails only after ``timeout`` seconds. A day
    that arrived empty (the folder, no files) is the job's to accept (``--allow-empty-input``)."""

    template_fields = ("path", "marker", "required")

    def __init__(
        self, *, path: str, marker: str = "", required: dict[str, str] | None = None, **kwargs: Any
    ) -> None:
        kwargs.setdefault("mode", "reschedule")
        super().__init__(**kwargs)
        self.path = path
        self.marker = marker
        self.required = dict(required or {})

    def poke(self, context: Any) -> bool:
        _unset(self.required)
        target = f"{self.path.rstrip('/')}/{self.marker}" if self.marker.strip() else self.path
        if path_exists(target):
            return True
        log.info(
            "simhash_spark: input %s is not there yet; waiting (poke every %s s)", target, self.poke_interval
        )
        return False


def on_failure(context: Any) -> None:
    """Where to hook your alerting: an alarm is told apart from other failures by its exception type."""
    error = context.get("exception")
    if isinstance(error, SimhashMonitorAlarm):
        log.error("%s %s", ALARM, context.get("ds"))  # e.g. page the on-call here
    else:
        log.error("simhash_spark task failed: %s", error)
