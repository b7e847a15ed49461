"""The demo: generate the sample corpus, run the job in local mode, show what it found."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from simhash_spark.config import Config
from simhash_spark.demo.corpus import write_corpus


def run_demo(
    cfg: Config,
    *,
    workdir: Path,
    n_docs: int,
    seed: int,
    master: str | None,
    conf: dict[str, str] | None = None,
    show_progress: bool = True,
) -> dict:
    from simhash_spark.pipeline import run
    from simhash_spark.session import build_session

    corpus = workdir / "corpus.parquet"
    table = write_corpus(corpus, n_docs, seed)
    print(f"generated {table.num_rows} documents ({n_docs} base articles + planted variants) in {corpus}")
    cfg = cfg.replace(input=replace(cfg.input, passthrough_columns=("family", "variant")))
    result_dir = workdir / "result"
    if result_dir.exists() and not (result_dir / "_SUCCESS").exists():
        shutil.rmtree(result_dir)
    spark = build_session(cfg, master=master, conf=conf)
    summ = run(spark, cfg, output=str(result_dir), input_path=str(corpus), show_progress=show_progress)
    keys = (
        "input_rows",
        "fingerprinted",
        "status",
        "candidate_pairs_within_k",
        "pairs_accepted",
        "clusters",
        "duplicates",
        "dedup_rate",
        "timings_s",
    )
    print("summary:", json.dumps({k: summ[k] for k in keys}, ensure_ascii=False, indent=2))
    docs = spark.read.parquet(str(result_dir / "documents"))
    _print_found(docs, cfg)
    _print_examples(docs, spark.read.parquet(str(corpus)).select("id", "text"))
    print(f"\noutputs: {result_dir}/(documents|pairs|clusters|deduplicated)/ and summary.json")
    return summ


def _print_found(docs: DataFrame, cfg: Config) -> None:
    """How many planted variants landed in their base article's cluster, per kind of change."""
    base = docs.where(F.col("variant") == "base").select("family", F.col("cluster_id").alias("base_cluster"))
    found = (
        docs.where(F.col("variant") != "base")
        .join(base, "family", "inner")
        .groupBy("variant")
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.sum((F.col("cluster_id") == F.col("base_cluster")).cast("int")).alias("found"),
        )
        .orderBy("variant")
        .collect()
    )
    mixed = (
        docs.where(F.col("cluster_size") > 1)
        .groupBy("cluster_id")
        .agg(F.count_distinct("family").alias("families"))
        .where(F.col("families") > 1)
        .count()
    )
    print(
        "planted variants clustered with their base article: "
        + ", ".join(f"{r['variant']} {r['found']}/{r['n']}" for r in found)
        + f"; clusters mixing unrelated articles: {mixed}"
    )
    print(f"({_recipe(cfg)})")


def _recipe(cfg: Config) -> str:
    """What this run called a duplicate, in a sentence (the closing hint follows the configuration)."""
    f = cfg.features
    features = f"character {f.ngram_size}-grams" if f.mode == "char_ngram" else f"{f.mode} features"
    k = cfg.policy.largest
    if not cfg.verify.enabled:
        return f"this run: {features}, every pair within {k} bits is a duplicate"
    check = f"{cfg.verify.measure} of character {cfg.verify.ngram_size}-grams >= {cfg.verify.min_similarity}"
    return (
        f"this run: {features}, pairs within {k} bits kept when their {check}; a planted variant is "
        "missed mostly when its edits took it under that similarity (it is then no near-duplicate by the "
        f"configured measure), rarely when its fingerprint landed more than {k} bits away"
    )


def _print_examples(docs: DataFrame, texts: DataFrame) -> None:
    """The first three clusters of more than two documents, with the start of each text."""
    examples = (
        docs.where(F.col("cluster_size") > 2)
        .join(texts, "id", "inner")
        .select("cluster_id", "id", "variant", "is_duplicate", F.substring("text", 1, 60).alias("text"))
        .orderBy("cluster_id", "id")
    )
    first = [
        r["cluster_id"]
        for r in examples.select("cluster_id").distinct().orderBy("cluster_id").limit(3).collect()
    ]
    for cid in first:
        print(f"\ncluster {cid}:")
        for r in examples.where(F.col("cluster_id") == cid).collect():
            flag = "duplicate" if r["is_duplicate"] else "kept     "
            print(f"  {r['id']} [{flag}] {r['variant']:<11} {r['text']!r}")
