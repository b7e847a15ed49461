"""Scale of the candidate join and clustering on synthetic fingerprints (no text, no jieba).

    .venv/bin/python -m bench.scale [--sizes 1000000,2000000,4000000] [--schemes 4x16,auto] [--k 3] [--hot 200000]

Input per size N: N uniformly random 64-bit fingerprints, of which 5 % are replaced by planted near
duplicates (1-3 bits from another fingerprint), plus one hot cluster of ``--hot`` documents whose
fingerprints take about 5,000 distinct values within 3 bits of one centre. For each band scheme, in the
same run: wall time of linking (identical groups, design choice, band join, hot buckets, Hamming filter,
connected components; pairs/ not written), candidate pairs examined per distinct fingerprint, and the
numbers from the run's stats. Also a projection of random-collision candidates to 10^8 documents from
the measured count (they grow as N²).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time

import numpy as np

from bench.common import bench_session


def fingerprints(n: int, hot: int, seed: int = 11) -> np.ndarray:
    rng = np.random.default_rng(seed)
    fps = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    planted = rng.choice(n, size=n // 20, replace=False)
    sources = rng.choice(n, size=n // 20)
    flips = rng.integers(1, 4, size=n // 20)
    for i, src, f in zip(planted, sources, flips, strict=True):
        v = int(fps[src])
        for b in rng.choice(64, size=int(f), replace=False):
            v ^= 1 << int(b)
        fps[i] = v
    centre = int(rng.integers(0, 2**64, dtype=np.uint64))
    values = [centre]
    while len(values) < 5000:
        v = centre
        for b in rng.choice(64, size=int(rng.integers(1, 4)), replace=False):
            v ^= 1 << int(b)
        values.append(v)
    hot_fps = np.array(values, dtype=np.uint64)[rng.integers(0, 5000, size=hot)]
    return np.concatenate([fps, hot_fps]).view(np.int64)


def examined_pairs(keyed, stats, limit: int) -> int:
    """Pairs the band join looked at: over the buckets of the chosen design up to the hot-bucket limit
    (larger ones are resolved locally), size·(size−1)/2 distinct fingerprints, per table."""
    from pyspark.sql import functions as F

    from simhash_spark.core.bands import parse_scheme
    from simhash_spark.transforms.candidates import explode_band_keys

    masks = parse_scheme(stats["bands"]["scheme"]).table_masks(stats["bands"]["max_distance"])
    reps = keyed.groupBy("fingerprint").agg(F.min("id").alias("id"))
    sizes = explode_band_keys(reps, masks=masks).groupBy("band", "band_key").count()
    row = sizes.where(F.col("count") <= limit).agg(F.sum(F.col("count") * (F.col("count") - 1) / 2)).first()
    return int(row[0] or 0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000000,2000000,4000000")
    ap.add_argument("--schemes", default="4x16,auto", help='comma-separated, e.g. "auto,lsh:150,16"')
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--hot", type=int, default=200_000)
    ap.add_argument("--workdir", default="/tmp/simhash-scale")
    ap.add_argument(
        "--no-examined", action="store_true", help="skip counting the pairs the join examined (an extra pass)"
    )
    args = ap.parse_args()
    from pyspark.sql import functions as F

    from simhash_spark.config import load_config
    from simhash_spark.context import RunContext
    from simhash_spark.linking import LinkParams, link

    spark, _ = bench_session(conf={"spark.driver.memory": "6g", "spark.sql.shuffle.partitions": "16"})
    results = []
    for n in (int(x) for x in args.sizes.split(",")):
        path = f"{args.workdir}/fps-{n}-{args.hot}.parquet"
        if not os.path.exists(path):
            import pyarrow as pa
            import pyarrow.parquet as pq

            fps = fingerprints(n, args.hot)
            os.makedirs(args.workdir, exist_ok=True)
            pq.write_table(pa.table({"id": np.arange(len(fps), dtype=np.int64), "fingerprint": fps}), path)
        # linking alone: no texts, so no second tier; a constant length keeps one k for every pair
        keyed = spark.read.parquet(path).withColumn("n_chars", F.lit(1000))
        # "lsh:L,r" holds a comma itself
        for scheme in re.findall(r"lsh:\d+,\d+|[^,]+", args.schemes):
            cfg = load_config(
                overrides=[f"bands.scheme={scheme}", f"match.max_distance={args.k}", "verify.measure=none"]
            )
            ctx = RunContext()
            timings = ctx.timings
            start = time.perf_counter()
            linked = link(keyed, LinkParams.from_config(cfg, titled=False), ctx)
            clustered = linked.assignments.count()
            wall = time.perf_counter() - start
            st = linked.stats
            distinct = st["distinct_fingerprints"]
            # outside the timed part: the job itself no longer counts them
            examined = -1 if args.no_examined else examined_pairs(keyed, st, cfg.bands.hot_bucket_limit)
            row = {
                "n": n + args.hot,
                "scheme": scheme,
                "k": args.k,
                "chosen": st["bands"]["scheme"],
                "exact": st["bands"]["exact"],
                "recall_at_k": st["bands"]["recall_at_k"],
                "link_wall_s": round(wall, 1),
                "timings_s": timings,
                "distinct_fingerprints": distinct,
                "candidate_pairs_examined": examined,
                "candidates_per_distinct_fingerprint": round(examined / distinct, 2),
                "candidate_pairs_within_k": st["candidate_pairs_within_k"],
                "hot_buckets": st["hot_buckets"],
                "largest_bucket": st["largest_buckets"][0]["fingerprints"] if st["largest_buckets"] else 0,
                "representative_pairs_accepted": st["representative_pairs_accepted"],
                "clustered_documents": clustered,
                "components_iterations": st["components_iterations"],
                "projected_candidates_at_1e8": round(examined * (1e8 / (n + args.hot)) ** 2),
            }
            results.append(row)
            print(json.dumps(row), flush=True)
            ctx.release()
    spark.stop()


if __name__ == "__main__":
    main()
