"""The job against MinHash baselines on the labelled benchmark, in one run:

- simhash_spark ``dedup()`` with the default configuration (Spark local[2]),
- datasketch MinHashLSH (threshold 0.8, 128 permutations, character 5-grams), alone and with an exact
  Jaccard check of its candidates,
- Spark MLlib MinHashLSH (5 tables, ``approxSimilarityJoin`` at Jaccard distance 0.2: exact distances).

    .venv/bin/python -m bench.quality.compare [--corpora ../shared/corpora] [--out compare.json]
        [--set section.key=value ...]   # job config overrides, e.g. --set match.max_distance=10

Pair precision / recall / F1 against the exact ground truth (character 5-gram Jaccard >= 0.8), over all
pairs and over pairs of documents of at least 300 characters; wall time of each method from the same
Parquet file to its pairs.
"""

import argparse
import json
import tempfile
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from bench.quality.benchmark import build
from bench.quality.evaluate import DEFAULT_CORPORA, THRESHOLD, prf
from bench.quality.minhash import minhash_pairs
from bench.quality.truth import pairs_at_least, shingle_sets

Pairs = set[tuple[str, str]]


def score(found: Pairs, truth: Pairs, long_ids: set[str]) -> dict:
    def long(ps: Pairs) -> Pairs:
        return {p for p in ps if p[0] in long_ids and p[1] in long_ids}

    def traditional(ps: Pairs) -> Pairs:
        return {p for p in ps if p[0].endswith("~trad") or p[1].endswith("~trad")}

    out = {
        "all": prf(len(found & truth), len(found), len(truth)),
        "docs_300_chars": prf(len(long(found) & long(truth)), len(long(found)), len(long(truth))),
    }
    if traditional(truth):
        t, f = traditional(truth), traditional(found)
        out["traditional_editions"] = prf(len(f & t), len(f), len(t))
    return out


def run_job(spark, path: str, overrides: list[str]) -> tuple[Pairs, float, dict]:
    from simhash_spark.config import load_config
    from simhash_spark.io import read_input
    from simhash_spark.pipeline import dedup

    cfg = load_config(overrides=["output.write_report=false", *overrides])
    start = time.perf_counter()
    res = dedup(spark, read_input(spark, path=path), cfg)
    rows = res.pairs.select("id_a", "id_b").collect()
    res.documents.count()
    secs = time.perf_counter() - start
    keys = ("bands", "verify", "candidate_pairs_within_k", "sketch_bands", "pairs_accepted")
    stats = {k: res.stats[k] for k in keys if k in res.stats}
    stats["timings_s"] = res.timings
    res.unpersist()
    return {(r[0], r[1]) for r in rows}, secs, stats


def run_datasketch(ids: list[str], sets: list[set[str]], truth: Pairs) -> tuple[Pairs, Pairs, float]:
    """Candidates of MinHashLSH, and those passing an exact Jaccard check (the ground truth itself)."""
    found_idx, secs = minhash_pairs(sets)
    found = {(ids[i], ids[j]) if ids[i] < ids[j] else (ids[j], ids[i]) for i, j in found_idx}
    return found, found & truth, secs


def run_mllib(spark, path: str) -> tuple[Pairs, float]:
    from pyspark.ml.feature import HashingTF, MinHashLSH
    from pyspark.sql import functions as F
    from pyspark.sql.functions import pandas_udf

    shingles = pandas_udf(_shingles, "array<string>")  # type: ignore[call-overload]

    start = time.perf_counter()
    docs = spark.read.parquet(path).select("id", shingles("text").alias("sh")).where(F.size("sh") > 0)
    vec = HashingTF(inputCol="sh", outputCol="vec", numFeatures=1 << 22, binary=True).transform(docs)
    model = MinHashLSH(inputCol="vec", outputCol="hashes", numHashTables=5, seed=7).fit(vec)
    joined = model.approxSimilarityJoin(vec, vec, 1 - THRESHOLD, distCol="jd")
    rows = (
        joined.select(F.col("datasetA.id").alias("a"), F.col("datasetB.id").alias("b"))
        .where(F.col("a") < F.col("b"))
        .collect()
    )
    return {(r[0], r[1]) for r in rows}, time.perf_counter() - start


def _shingles(texts: pd.Series) -> pd.Series:
    from simhash_spark.core.normalize import NormalizeOptions, normalize
    from simhash_spark.core.shingles import char_shingles

    opts = NormalizeOptions()
    return pd.Series([sorted(char_shingles(normalize(t or "", opts).text, 5)) for t in texts])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpora", default=str(DEFAULT_CORPORA))
    ap.add_argument("--out", default="")
    ap.add_argument("--set", action="append", default=[], dest="overrides")
    ap.add_argument("--skip-mllib", action="store_true")
    ap.add_argument(
        "--news", type=int, default=1500, help="news stories sampled as bases (scales the benchmark)"
    )
    ap.add_argument("--prose", type=int, default=300, help="modern prose passages sampled as bases")
    ap.add_argument("--abstracts", type=int, default=300, help="paper abstracts sampled as bases")
    ap.add_argument(
        "--traditional",
        type=float,
        default=0.0,
        help="share of bases that also get a traditional edition (zhconv); the truth is then taken after "
        "converting every text to simplified (zhconv), and traditional_editions scores the pairs with one",
    )
    args = ap.parse_args()

    docs = build(
        Path(args.corpora),
        news=args.news,
        prose=args.prose,
        abstracts=args.abstracts,
        traditional=args.traditional,
    )
    ids = [d.id for d in docs]
    sets = shingle_sets([d.text for d in docs])
    truth_sets = sets
    if args.traditional:
        import zhconv

        truth_sets = shingle_sets([zhconv.convert(d.text, "zh-cn") for d in docs])
    truth = {
        (ids[i], ids[j]) if ids[i] < ids[j] else (ids[j], ids[i])
        for i, j, _ in pairs_at_least(truth_sets, THRESHOLD)
    }
    long_ids = {d.id for d in docs if d.length >= 300}
    report: dict = {"documents": len(docs), "true_pairs": len(truth), "config_overrides": args.overrides}

    tmp = tempfile.mkdtemp(prefix="simhash-quality-")
    path = f"{tmp}/benchmark.parquet"
    pq.write_table(pa.table({"id": ids, "text": [d.text for d in docs]}), path)

    from simhash_spark.config import load_config
    from simhash_spark.session import build_session

    spark = build_session(
        load_config(),
        master="local[2]",
        conf={"spark.driver.memory": "4g", "spark.sql.shuffle.partitions": "8"},
    )
    spark.sparkContext.setLogLevel("ERROR")
    run_job(spark, path, args.overrides)  # warm-up: JVM, Python workers, jieba/rjieba loaded
    found, secs, stats = run_job(spark, path, args.overrides)
    report["job"] = {
        "seconds": round(secs, 1),
        "docs_per_s": round(len(docs) / secs, 1),
        **score(found, truth, long_ids),
        "stats": stats,
    }
    print("job", json.dumps(report["job"], ensure_ascii=False))

    ds, ds_checked, ds_secs = run_datasketch(ids, sets, truth)
    report["datasketch"] = {
        "seconds": round(ds_secs, 1),
        "candidates": score(ds, truth, long_ids),
        "with_exact_check": score(ds_checked, truth, long_ids),
    }
    print("datasketch", json.dumps(report["datasketch"]))

    if not args.skip_mllib:
        ml, ml_secs = run_mllib(spark, path)
        report["mllib"] = {
            "seconds": round(ml_secs, 1),
            "docs_per_s": round(len(docs) / ml_secs, 1),
            **score(ml, truth, long_ids),
        }
        report["mllib_over_job_time"] = round(ml_secs / secs, 1)
        print("mllib", json.dumps(report["mllib"]))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1, ensure_ascii=False))
    spark.stop()


if __name__ == "__main__":
    main()
