"""What every benchmark starts from: the shared corpora's folder, the job's own local session, a generated
corpus. Run the benchmarks as modules from the checkout (``.venv/bin/python -m bench.NAME``)."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from simhash_spark.config import Config

# the real corpora beside the checkout (never copied into it): ../shared/corpora
DEFAULT_CORPORA = Path(__file__).resolve().parents[2] / "shared" / "corpora"


def bench_session(
    overrides: Sequence[str] = (), *, master: str | None = "local[2]", conf: dict[str, str] | None = None
) -> tuple[SparkSession, Config]:
    """The job's configuration with ``overrides`` and the session the job builds for it (its driver heap,
    compiler and class archive), quiet: no progress bars, errors only in the log."""
    from simhash_spark.config import load_config
    from simhash_spark.session import build_session

    cfg = load_config(overrides=list(overrides))
    spark = build_session(cfg, master=master, conf={"spark.ui.showConsoleProgress": "false", **(conf or {})})
    spark.sparkContext.setLogLevel("ERROR")
    return spark, cfg


def generated_corpus(folder: Path, docs: int, seed: int = 11) -> tuple[Path, int]:
    """The demo's generated corpus of ``docs`` documents in ``folder``: (its path, its rows)."""
    from simhash_spark.demo.corpus import write_corpus

    path = folder / "corpus.parquet"
    return path, write_corpus(path, docs, seed=seed).num_rows


@dataclass(frozen=True)
class ProcessRun:
    returncode: int
    seconds: float  # whole process, wall clock
    peak_rss_mib: int  # the largest sum of resident memory over the process tree (driver, JVM, workers)
    stderr: str


def run_measured(cmd: Sequence[str], env: dict[str, str] | None = None) -> ProcessRun:
    """Run ``cmd`` in a session of its own, timing it whole and sampling its process tree's memory."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        list(cmd),
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    stop, peak = threading.Event(), list[int]()
    watcher = threading.Thread(target=_peak_rss, args=(proc.pid, stop, peak))
    watcher.start()
    _, err = proc.communicate()
    stop.set()
    watcher.join()
    seconds = time.perf_counter() - start
    return ProcessRun(proc.returncode, seconds, round(peak[0] / 2**20) if peak else 0, err)


def _peak_rss(pid: int, stop: threading.Event, out: list[int]) -> None:
    """Sum of RSS over the process group ``pid`` leads (driver, JVM, Python workers), sampled every 0.5 s."""
    peak = 0
    while not stop.is_set():
        total = 0
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
                if int(proc.name) == pid or os.getpgid(int(proc.name)) == pid:
                    total += int(stat[21]) * os.sysconf("SC_PAGE_SIZE")
            except (OSError, ValueError, IndexError):
                continue
        peak = max(peak, total)
        stop.wait(0.5)
    out.append(peak)
