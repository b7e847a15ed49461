"""What a run carries through its stages: wall time per stage, and the frames it persisted (released when
the run is done). Failures name the stage they happened in (exit code 1)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from simhash_spark.errors import (
    IndexDamaged,
    InputError,
    SimhashSparkError,
    essence,
    is_unreadable_input,
    unreadable_index_file,
)
from simhash_spark.faults import maybe_pause
from simhash_spark.progress import Progress

log = logging.getLogger("simhash_spark.pipeline")


def shuffle_partitions(spark: SparkSession) -> int | None:
    """``spark.sql.shuffle.partitions`` as a number; None where it is unset or a platform sets it to
    something else (e.g. "auto"): callers then leave the partitioning to Spark."""
    value = spark.conf.get("spark.sql.shuffle.partitions", None)
    try:
        return int(value) if value else None
    except ValueError:
        return None


class StageFailed(RuntimeError):
    """A runtime failure, labelled with the stage it happened in (exit code 1)."""


class RunContext:
    def __init__(self, progress: Progress | None = None) -> None:
        self.timings: dict[str, float] = {}
        self.progress = progress
        self._persisted: list[DataFrame] = []

    @property
    def stages(self) -> dict[str, dict[str, float | int]]:
        """Per stage: seconds, and (with Spark's status) tasks run and rows read."""
        if self.progress is not None:
            return dict(self.progress.finished)
        return {name: {"seconds": secs} for name, secs in self.timings.items()}

    @property
    def spark_jobs(self) -> int | None:
        """Spark jobs this run has started so far (``None`` when not counted)."""
        return self.progress.jobs_started() if self.progress is not None else None

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the stage ``name`` (summary.json's ``timings_s``) and label its failures."""
        start = time.perf_counter()
        log.info("stage %s: start", name)
        if self.progress is not None:
            self.progress.begin(name)
        maybe_pause(name)
        try:
            yield
        except SimhashSparkError:
            raise
        except Exception as e:
            if is_unreadable_input(e):
                index_file = unreadable_index_file(e)
                if index_file is not None:
                    raise IndexDamaged(
                        f"index file {index_file} cannot be read ({essence(e)}): the index is damaged; "
                        "`simhash-spark index verify INDEX` lists every damaged file"
                    ) from e
                raise InputError(f"cannot read input: {essence(e)}") from e
            raise StageFailed(f"stage '{name}' failed: {type(e).__name__}: {essence(e)}") from e
        finally:
            seconds = round(time.perf_counter() - start, 3)
            record = self.progress.end(name, seconds) if self.progress is not None else {}
        self.timings[name] = seconds
        if record.get("tasks"):
            log.info(
                "stage %s: %.1f s (%d tasks, %s rows read)",
                name,
                seconds,
                record["tasks"],
                f"{record['rows']:,}",
            )
        else:
            log.info("stage %s: %.1f s", name, seconds)

    def untimed(self) -> RunContext:
        """A context for work inside a stage: its own timings (not reported), this run's persisted frames."""
        child = RunContext()
        child._persisted = self._persisted
        return child

    def persist(self, df: DataFrame) -> DataFrame:
        """``df`` persisted (memory, spilling to disk) until ``release``."""
        df = df.persist(StorageLevel.MEMORY_AND_DISK)
        self._persisted.append(df)
        return df

    def materialize(self, df: DataFrame) -> DataFrame:
        """``df`` computed now and kept on the executors as a leaf of every later plan (a local checkpoint),
        for frames that later stages read many times. A persisted frame's plan is printed inside every plan
        that reads it, and persisted frames read persisted frames: the plans of a run's later stages nest
        them level upon level, and the driver walks that text at every action. The blocks live as long as
        the frame; an executor lost with them fails the run instead of recomputing them."""
        return df.localCheckpoint(eager=True)

    def release(self) -> None:
        """Unpersist every frame this run persisted and stop reporting progress."""
        for df in self._persisted:
            df.unpersist()
        self._persisted.clear()
        if self.progress is not None:
            self.progress.close()
