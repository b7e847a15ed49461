"""Fingerprint-stage throughput on the same documents, in one run: the core fingerprinter in a plain
single-process loop, and the Spark stage (``add_fingerprints``, Arrow pandas UDF) in local[N] in the job's
own session, per core.

    .venv/bin/python -m bench.fingerprint_throughput [--corpus ../shared/corpora/news_xwlb.parquet] [--limit 20000]
        [--copies 3] [--repeat 3]
    .venv/bin/python -m bench.fingerprint_throughput --set tokenizer.backend=jieba --set features.mode=keywords

Prints one JSON object (documents and characters per second). Both measurements run one after the other
in one process, so their ratio is comparable even on a shared machine whose absolute speed drifts;
``--repeat N`` keeps the fastest of N timings of each (a run of a few seconds is easily disturbed).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

from bench.common import bench_session

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "news_xwlb.parquet"


def copies(texts: list[str], n: int) -> list[str]:
    """Each text ``n`` times, copy j ending in "（第j份）": a corpus ``n`` times as large whose documents are
    all distinct, so no memo of exact duplicates answers a copy, and the Spark stage runs long enough that
    its fixed cost per job does not decide the rate."""
    return [t if j == 0 else f"{t}（第{j}份）" for t in texts for j in range(n)]


def core_single_process(texts: list[str], overrides: list[str]) -> tuple[float, int]:
    """Seconds of the core fingerprinter over ``texts`` in batches of 1,000, and the minor page faults of
    this process meanwhile (memory the C allocator handed back and maps anew)."""
    from simhash_spark.config import load_config
    from simhash_spark.core.fingerprint import Fingerprinter

    try:  # as the fingerprint pass does in Spark's workers (older checkouts, measured side by side, do not)
        from simhash_spark.core.allocator import keep_freed_memory

        keep_freed_memory()
    except ImportError:
        pass
    model = load_config(overrides=overrides).model
    # load dictionaries and tables outside the timing, as a Spark worker does once
    Fingerprinter(model).batch(texts[:10])
    fp = Fingerprinter(model)  # an empty memo, as each Spark task starts with
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start = time.perf_counter()
    for i in range(0, len(texts), 1000):
        fp.batch(texts[i : i + 1000])
    took = time.perf_counter() - start
    return took, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults


def spark_udf(texts: list[str], cores: int, overrides: list[str], repeat: int) -> tuple[float, float | None]:
    """Seconds of the stage over ``texts`` (the fastest of ``repeat`` runs) in the job's own local session
    (``session.build_session``: its driver compiler, class archive and Arrow batch size), and the driver
    JVM's CPU seconds in that run (None off Linux): the JVM's share of the cores is what the Python
    workers do not get."""
    from simhash_spark import columns as C
    from simhash_spark.transforms.fingerprint import add_fingerprints

    spark, cfg = bench_session(overrides, master=f"local[{cores}]")
    jvm = spark.sparkContext._jvm
    jvm_pid = jvm.java.lang.ProcessHandle.current().pid() if jvm is not None else -1
    rows = list(enumerate(texts))
    df = spark.createDataFrame(rows, f"{C.ID} long, {C.TEXT} string").repartition(cores * 2, C.ID).cache()
    df.count()

    def once(frame):
        start = time.perf_counter()
        add_fingerprints(frame, model=cfg.model).write.format("noop").mode("overwrite").save()
        return time.perf_counter() - start

    # start every Python worker and load jieba in each before timing (workers are reused across tasks)
    once(df.sample(fraction=0.02, seed=1).repartition(cores * 2, C.ID))
    runs = []
    for _ in range(repeat):
        cpu_before = _cpu_seconds(jvm_pid)
        elapsed = once(df)
        cpu_after = _cpu_seconds(jvm_pid)
        runs.append((elapsed, None if cpu_before is None or cpu_after is None else cpu_after - cpu_before))
    spark.stop()
    return min(runs, key=lambda run: run[0])


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process so far (Linux /proc), else None."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    ap.add_argument("--limit", type=int, default=20000)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--repeat", type=int, default=1, help="time each side this many times, keep the fastest")
    ap.add_argument(
        "--copies",
        type=int,
        default=1,
        help="each document this many times, each copy marked apart (see copies)",
    )
    args = ap.parse_args()
    if not Path(args.corpus).exists():
        sys.exit(f"corpus not found: {args.corpus}")
    stories = [t for t in pq.read_table(args.corpus, columns=["text"]).column("text").to_pylist() if t]
    texts = copies(stories[: args.limit], args.copies)
    n, chars = len(texts), sum(map(len, texts))
    core_s, core_faults = min(core_single_process(texts, args.overrides) for _ in range(args.repeat))
    spark_s, jvm_cpu_s = spark_udf(texts, args.cores, args.overrides, args.repeat)
    spark_core_s = spark_s * args.cores  # core-seconds
    result = {
        "corpus": Path(args.corpus).name,
        "docs": n,
        "copies": args.copies,
        "mean_chars": round(chars / n),
        "overrides": args.overrides,
        "core_loop_docs_per_s": round(n / core_s, 1),
        "core_loop_mchars_per_s": round(chars / core_s / 1e6, 2),
        "core_loop_minor_page_faults": core_faults,
        f"spark_local{args.cores}_docs_per_s_per_core": round(n / spark_core_s, 1),
        f"spark_local{args.cores}_mchars_per_s_per_core": round(chars / spark_core_s / 1e6, 2),
        "ratio_spark_per_core_vs_core_loop": round(core_s / spark_core_s, 3),
        "spark_seconds": round(spark_s, 2),
        "driver_jvm_cpu_seconds": None if jvm_cpu_s is None else round(jvm_cpu_s, 2),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
