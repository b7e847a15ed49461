"""Progress of a run, per job stage, from what Spark already knows: tasks done of total and rows read
(input and shuffle records) of the Spark stages the job stage started, the rate, the time elapsed and an
estimate of the time left. Nothing here starts a Spark job: it reads the status tracker and the status
store, and tags each job stage's Spark jobs with a job group.

On a terminal the progress is one line on stderr, rewritten in place; elsewhere (spark-submit, Airflow) a
log line every ``log_every`` seconds and one at each stage's end. The same numbers per stage land in
summary.json (``stages``).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

log = logging.getLogger("simhash_spark.progress")

GROUP_PREFIX = "simhash_spark:"


@dataclass(frozen=True)
class SparkCounts:
    """The Spark stages one job stage has started so far (skipped stages left out)."""

    tasks_done: int = 0
    tasks_total: int = 0
    rows: int = 0
    jobs: int = 0


@dataclass(frozen=True)
class StageProgress:
    """Where a stage stands at one moment: its Spark counts so far and the time it has run."""

    stage: str
    counts: SparkCounts
    elapsed: float

    @property
    def rate(self) -> float | None:
        return self.counts.rows / self.elapsed if self.counts.rows and self.elapsed > 0 else None

    @property
    def left(self) -> float | None:
        """Seconds left at the pace so far, for the tasks known so far (later Spark jobs may add more)."""
        done, total = self.counts.tasks_done, self.counts.tasks_total
        if not done or done >= total:
            return None
        return self.elapsed * (total - done) / done


def _clock(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def format_line(snap: StageProgress) -> str:
    """``fingerprint: tasks 12/40, rows 12,000, 1,200 rows/s, elapsed 0:10, left ~0:23``."""
    c = snap.counts
    parts = [f"tasks {c.tasks_done}/{c.tasks_total}" if c.tasks_total else "no Spark tasks yet"]
    if c.rows:
        parts.append(f"rows {c.rows:,}")
    if snap.rate is not None:
        parts.append(f"{snap.rate:,.0f} rows/s")
    parts.append(f"elapsed {_clock(snap.elapsed)}")
    if snap.left is not None:
        parts.append(f"left ~{_clock(snap.left)}")
    return f"{snap.stage}: " + ", ".join(parts)


class SparkProbe:
    """Reads a classic session's status tracker and status store; ``None`` counts without a JVM (Spark
    Connect)."""

    def __init__(self, spark: Any) -> None:
        # job groups are per run: a session that runs the job again must not count the earlier runs' jobs
        self._group = f"{GROUP_PREFIX}{uuid.uuid4().hex[:12]}:"
        try:
            self._sc = spark.sparkContext
            self._tracker = self._sc.statusTracker()
            self._store = self._sc._jsc.sc().statusStore()
        except Exception:  # Spark Connect: no SparkContext
            self._sc = None

    @property
    def available(self) -> bool:
        return self._sc is not None

    def tag(self, stage: str | None) -> None:
        """Spark jobs started from now on (by this thread) belong to ``stage``."""
        if self._sc is not None:
            if stage is None:
                self._sc.setLocalProperty("spark.jobGroup.id", None)
            else:
                self._sc.setJobGroup(self._group + stage, stage, False)

    def jobs_so_far(self) -> int:
        """How many Spark jobs this session has started (0 without a JVM). The scheduler's job counter is
        exact at once; the status store (the fallback) learns of jobs asynchronously."""
        if self._sc is None:
            return 0
        try:
            counter = self._sc._jsc.sc().dagScheduler().nextJobId()
            return int(counter if isinstance(counter, int) else counter.get())
        except Exception:  # an internal API: fall back to the public status store
            jobs = self._store.jobsList(None)  # newest first
            return 0 if jobs.isEmpty() else int(jobs.head().jobId()) + 1

    def counts(self, stage: str) -> SparkCounts:
        if self._sc is None:
            return SparkCounts()
        job_ids = self._tracker.getJobIdsForGroup(self._group + stage)
        stage_ids = {
            sid
            for job in job_ids
            if (info := self._tracker.getJobInfo(job)) is not None
            for sid in info.stageIds
        }
        done = total = rows = 0
        for sid in stage_ids:
            try:
                data = self._store.lastStageAttempt(sid)
            except Exception:  # not submitted yet, or no longer retained
                continue
            if str(data.status().toString()) == "SKIPPED":
                continue
            done += int(data.numCompleteTasks())
            total += int(data.numTasks())
            rows += int(data.inputRecords()) + int(data.shuffleReadRecords())
        return SparkCounts(done, total, rows, len(job_ids))


class Progress:
    """Reports the running stage while it runs (a daemon thread) and records each stage's final counts."""

    def __init__(
        self,
        probe: SparkProbe,
        *,
        show: bool = True,
        stream: TextIO | None = None,
        tty: bool | None = None,
        interval: float = 1.0,
        log_every: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.probe = probe
        self.show = show and probe.available
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.interval = interval if self.tty else min(interval * 5, log_every)
        self.log_every = log_every
        self.clock = clock
        self.finished: dict[str, dict[str, float | int]] = {}
        self._jobs_before = probe.jobs_so_far()
        self._stage: str | None = None
        self._started = 0.0
        self._last_log = 0.0
        self._lock = threading.RLock()
        self._drawn = False
        self._filter = _ClearBeforeLogging(self)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def begin(self, stage: str) -> None:
        with self._lock:
            self._stage, self._started = stage, self.clock()
            self._last_log = self._started
        self.probe.tag(stage)
        if self.show and self._thread is None:
            if self.tty:
                for handler in logging.getLogger().handlers:
                    handler.addFilter(self._filter)
            self._thread = threading.Thread(target=self._run, name="simhash-progress", daemon=True)
            self._thread.start()

    def end(self, stage: str, seconds: float) -> dict[str, float | int]:
        """The stage's final counts (also kept in ``finished``); the caller logs them."""
        with self._lock:
            self._stage = None
            self.clear_line()
        self.probe.tag(None)
        counts = self.probe.counts(stage)
        record = {"seconds": seconds, "tasks": counts.tasks_done, "rows": counts.rows, "jobs": counts.jobs}
        self.finished[stage] = record
        return record

    def jobs_started(self) -> int | None:
        """Spark jobs started since this run began, inside its stages or not (``None`` without a JVM)."""
        if not self.probe.available:
            return None
        return self.probe.jobs_so_far() - self._jobs_before

    def clear_line(self) -> None:
        """Erase the progress line on a terminal (before a log line, at a stage's end)."""
        if self.show and self.tty and self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False

    def tick(self) -> None:
        """One look at the running stage: rewrite the line, or log it when ``log_every`` has passed."""
        with self._lock:
            stage, started = self._stage, self._started
        if stage is None:
            return
        now = self.clock()
        snap = StageProgress(stage, self.probe.counts(stage), now - started)
        if self.tty:
            with self._lock:
                if self._stage == stage:
                    self.stream.write("\r" + format_line(snap) + "\x1b[K")
                    self.stream.flush()
                    self._drawn = True
        elif now - self._last_log >= self.log_every:
            self._last_log = now
            log.info("progress %s", format_line(snap))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.tick()
            except Exception as e:  # a status read failing must never fail the run
                log.debug("progress: %s", e)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self._lock:
            self.clear_line()
        for handler in logging.getLogger().handlers:
            handler.removeFilter(self._filter)


class _ClearBeforeLogging(logging.Filter):
    """On a terminal, a log line must not start at the end of the progress line."""

    def __init__(self, progress: Progress) -> None:
        super().__init__()
        self.progress = progress

    def filter(self, record: logging.LogRecord) -> bool:
        with self.progress._lock:
            self.progress.clear_line()
        return True
