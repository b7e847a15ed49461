"""Fingerprint-stage throughput on the same documents, in one run: the core fingerprinter in a plain
single-process loop, and the Spark stage (``add_fingerprints``, Arrow pandas UDF) in local[N], per core.

    .venv/bin/python bench/fingerprint_throughput.py [--corpus ../shared/corpora/news_xwlb.parquet] [--limit 20000]
    .venv/bin/python bench/fingerprint_throughput.py --set tokenizer.backend=jieba --set features.mode=keywords

Prints one JSON object (documents and characters per second). Both measurements run one after the other
in one process, so their ratio is comparable even on a shared machine whose absolute speed drifts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "news_xwlb.parquet"


def core_single_process(texts: list[str], overrides: list[str]) -> float:
    from simhash_spark.config import load_config
    from simhash_spark.core.fingerprint import Fingerprinter

    fp = Fingerprinter(load_config(overrides=overrides).model)
    fp.batch(texts[:10])  # load dictionaries outside the timing, as a Spark worker does once
    start = time.perf_counter()
    for i in range(0, len(texts), 1000):
        fp.batch(texts[i : i + 1000])
    return time.perf_counter() - start


def spark_udf(texts: list[str], cores: int, overrides: list[str]) -> float:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from simhash_spark import columns as C
    from simhash_spark.config import load_config
    from simhash_spark.transforms.fingerprint import add_fingerprints

    cfg = load_config(overrides=overrides)
    spark = (
        SparkSession.builder.master(f"local[{cores}]")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(cfg.spark.arrow_batch_size))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    rows = list(enumerate(texts))
    df = spark.createDataFrame(rows, f"{C.ID} long, {C.TEXT} string").repartition(cores * 2, C.ID).cache()
    df.count()

    def once(frame):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        add_fingerprints(frame, model=cfg.model).write.format("noop").mode("overwrite").save()
        return time.perf_counter() - start

    # start every Python worker and load jieba in each before timing (workers are reused across tasks)
    once(df.sample(fraction=0.02, seed=1).repartition(cores * 2, C.ID))
    elapsed = once(df)
    spark.stop()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    ap.add_argument("--limit", type=int, default=20000)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    args = ap.parse_args()
    if not Path(args.corpus).exists():
        sys.exit(f"corpus not found: {args.corpus}")
    texts = [t for t in pq.read_table(args.corpus, columns=["text"]).column("text").to_pylist() if t][
        : args.limit
    ]
    n, chars = len(texts), sum(map(len, texts))
    core_s = core_single_process(texts, args.overrides)
    spark_core_s = spark_udf(texts, args.cores, args.overrides) * args.cores  # core-seconds
    result = {
        "corpus": Path(args.corpus).name,
        "docs": n,
        "mean_chars": round(chars / n),
        "overrides": args.overrides,
        "core_loop_docs_per_s": round(n / core_s, 1),
        "core_loop_mchars_per_s": round(chars / core_s / 1e6, 2),
        f"spark_local{args.cores}_docs_per_s_per_core": round(n / spark_core_s, 1),
        f"spark_local{args.cores}_mchars_per_s_per_core": round(chars / spark_core_s / 1e6, 2),
        "ratio_spark_per_core_vs_core_loop": round(core_s / spark_core_s, 3),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
