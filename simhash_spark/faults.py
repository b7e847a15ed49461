"""Fault-injection hooks for the reliability tests, driven by environment variables (never set in
production; reading an unset variable costs nothing).

- ``SIMHASH_SPARK_FAULT="fingerprint:P:once"`` makes the fingerprint UDF fail on partition P in its
  first attempt only (a retry succeeds); ``...:always`` fails every attempt.
- ``SIMHASH_SPARK_PAUSE="STAGE:PATH"`` makes the driver create PATH when STAGE starts and sleep, so a
  test can kill it at a known point. Besides the job's stages, the commit protocols name their steps:
  ``index-snapshot-written``, ``index-committing`` (the manifest version written to a temporary file, not
  yet linked), ``index-committed``, ``publish-journal``, ``publish-moved-aside``, ``publish-swapped``.
- ``SIMHASH_SPARK_HOLD="STAGE:PATH"`` makes the driver create PATH when STAGE starts and wait until PATH
  is deleted, so a test can line up two concurrent runs.
- ``SIMHASH_SPARK_NO_EXCHANGE=1`` publishes with two renames even where the file system can swap two
  folders in one step (the path HDFS and object stores take).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

FAULT_ENV = "SIMHASH_SPARK_FAULT"
PAUSE_ENV = "SIMHASH_SPARK_PAUSE"
NO_EXCHANGE_ENV = "SIMHASH_SPARK_NO_EXCHANGE"
HOLD_ENV = "SIMHASH_SPARK_HOLD"


class InjectedFault(RuntimeError):
    pass


def maybe_fail(stage: str) -> None:
    """Called inside a Spark task of ``stage``."""
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    want_stage, partition, mode = spec.split(":")
    if want_stage != stage:
        return
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None or ctx.partitionId() != int(partition):
        return
    if mode == "always" or ctx.attemptNumber() == 0:
        raise InjectedFault(
            f"injected fault in stage {stage}, partition {partition}, attempt {ctx.attemptNumber()}"
        )


def maybe_pause(stage: str) -> None:
    """Called on the driver when ``stage`` starts."""
    spec = os.environ.get(PAUSE_ENV)
    if spec:
        want_stage, _, marker = spec.partition(":")
        if want_stage == stage:
            Path(marker).touch()
            time.sleep(3600)
    spec = os.environ.get(HOLD_ENV)
    if spec:
        want_stage, _, marker = spec.partition(":")
        if want_stage == stage:
            Path(marker).touch()
            while Path(marker).exists():
                time.sleep(0.1)


def exchange_disabled() -> bool:
    return os.environ.get(NO_EXCHANGE_ENV) == "1"
