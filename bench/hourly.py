"""A small batch against an index of a few days' history (an hourly Airflow run): whole process, Spark jobs
and stage times, peers interleaved in one run, each a separate process from the same batch file:

- ``job``: ``python -m simhash_spark dedup --index ...`` with the default configuration (a batch this small
  is fingerprinted, looked up in the index, linked, assembled and written to the index on the driver);
- ``job_spark_link``: the same with ``cluster.local_max_documents=0``: the batch is fingerprinted on the
  executors (the same bound decides both), then looked up, linked, assembled and written to the index by
  the Spark steps;
- ``bare``: a bare SparkSession that reads the batch, counts it and writes it as Parquet (Spark's floor).

    .venv/bin/python -m bench.hourly [--days 3] [--per-day 2000] [--batch 20] [--repeat 3]
        [--workdir bench-output/hourly]

Each measured run gets a fresh copy of the history's index and the same run date, so every round does the
same work. Prints one JSON object: per peer the median seconds, each round's, Spark jobs and stage times of
the median round, and each peer's time over the job's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HISTORY_DATES = ["2026-11-01", "2026-11-02", "2026-11-03", "2026-11-04", "2026-11-05", "2026-11-06"]
RUN_DATE = "2026-11-07"
QUIET = ["--quiet", "--set", "output.write_report=false"]
BARE = """
import sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.config("spark.ui.showConsoleProgress", "false").getOrCreate()
df = spark.read.parquet(sys.argv[1]); df.count(); df.write.parquet(sys.argv[2])
"""


def _job(args: list[str]) -> None:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    subprocess.run(
        [sys.executable, "-m", "simhash_spark", "dedup", *args],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def build_history(workdir: Path, days: int, per_day: int, batch: int) -> Path:
    """The index after ``days`` daily runs of ``per_day`` generated documents; writes the batch file (the
    history's reprints and fresh documents) next to it. Built once per workdir."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from simhash_spark.demo.corpus import generate

    index = workdir / "index"
    if (workdir / "batch.parquet").exists():
        return index
    table = generate(per_day * days, seed=7).to_pandas()
    for d in range(days):
        path = workdir / f"day{d}.parquet"
        part = table.iloc[d::days]
        pq.write_table(pa.Table.from_pandas(part, preserve_index=False), path)
        _job(
            [
                "--input",
                str(path),
                "--output",
                str(workdir / f"out-day{d}"),
                "--index",
                str(index),
                "--run-date",
                HISTORY_DATES[d],
                *QUIET,
            ]
        )
    reprints = table.iloc[: batch // 2]  # documents of the history sent again under new ids
    fresh = generate(batch, seed=2026).to_pandas().iloc[: batch - len(reprints)]
    both = [reprints.assign(id="r-" + reprints["id"]), fresh.assign(id="f-" + fresh["id"])]
    frame = pa.Table.from_pandas(pd.concat(both, ignore_index=True), preserve_index=False)
    pq.write_table(frame, workdir / "batch.parquet")
    return index


def measure(peer: str, workdir: Path, index: Path, round_no: int) -> dict:
    out = workdir / f"out-{peer}-{round_no}"
    shutil.rmtree(out, ignore_errors=True)
    batch = str(workdir / "batch.parquet")
    started = time.perf_counter()
    if peer == "bare":
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
        subprocess.run(
            [sys.executable, "-c", BARE, batch, str(out)],
            check=True,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return {"seconds": round(time.perf_counter() - started, 1)}
    copy = workdir / f"index-{peer}-{round_no}"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(index, copy)
    started = time.perf_counter()
    extra = ["--set", "cluster.local_max_documents=0"] if peer == "job_spark_link" else []
    _job(
        ["--input", batch, "--output", str(out), "--index", str(copy), "--run-date", RUN_DATE, *QUIET, *extra]
    )
    seconds = round(time.perf_counter() - started, 1)
    s = json.loads((out / "summary.json").read_text())
    shutil.rmtree(copy)
    return {
        "seconds": seconds,
        "spark_jobs": s.get("spark_jobs"),
        "stage_jobs": {k: v.get("jobs") for k, v in s.get("stages", {}).items()},
        "timings_s": {k: round(v, 1) for k, v in s["timings_s"].items()},
        "touched_entries": s["index"]["touched_entries"],
        "matched_index": s["index"]["batch_documents_matched"],
        "duplicates": s["duplicates"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--days", type=int, default=3)
    parser.add_argument("--per-day", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--peers", default="job,job_spark_link,bare")
    parser.add_argument("--workdir", default="bench-output/hourly")
    args = parser.parse_args()
    if not 1 <= args.days <= len(HISTORY_DATES):
        parser.error(f"--days: 1..{len(HISTORY_DATES)}")
    workdir = Path(args.workdir) / f"d{args.days}-p{args.per_day}-b{args.batch}"
    workdir.mkdir(parents=True, exist_ok=True)
    index = build_history(workdir, args.days, args.per_day, args.batch)
    peers = args.peers.split(",")
    rounds: dict[str, list[dict]] = {p: [] for p in peers}
    for r in range(args.repeat):
        for p in peers:
            rounds[p].append(measure(p, workdir, index, r))
    result: dict = {"days": args.days, "per_day": args.per_day, "batch": args.batch, "peers": {}}
    for p, runs in rounds.items():
        times = [run["seconds"] for run in runs]
        median = statistics.median(times)
        typical = min(runs, key=lambda run: abs(run["seconds"] - median))
        result["peers"][p] = {**typical, "seconds": median, "rounds": times}
    if "job" in result["peers"]:
        base = result["peers"]["job"]["seconds"]
        for p in result["peers"].values():
            p["over_job"] = round(p["seconds"] / base, 2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
