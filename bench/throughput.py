"""Whole-job throughput on generated corpora (bench/generate_corpus.py): time per stage, and recall on the
planted near-duplicates.

    .venv/bin/python -m bench.throughput --docs 250000,500000,1000000 [--workdir /tmp/simhash-throughput]
        [--driver-memory 6g] [--set section.key=value ...]

For each size: the corpus is generated once into the work folder (kept for reruns), then the job runs as
users run it — ``python -m simhash_spark dedup`` in its own process, local mode, defaults (the driver heap
the job sizes unless ``--driver-memory``) — and the whole process is timed while its process tree's resident
memory is sampled. Reported: seconds whole process and per stage (summary.json), documents per hour, the
peak memory of the driver JVM and Python workers together, the driver heap, the band
design, and recall on the planted near-duplicate pairs whose character 5-gram Jaccard is at least 0.8 (a
pair counts as found when pairs/ lists it, and also reported: when both documents share a cluster).
``--distances`` adds how many of those pairs lie at each Hamming distance between their fingerprints, how
many of them the run missed, and the recall an exact join at each k would bound the job to.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from itertools import accumulate
from pathlib import Path

import pyarrow.parquet as pq

from bench.common import ProcessRun, run_measured
from bench.generate_corpus import generate
from bench.quality.evaluate import DEFAULT_CORPORA
from simhash_spark.core.normalize import NormalizeOptions, normalize
from simhash_spark.core.shingles import shingle_jaccard


def planted_truth(corpus: Path) -> set[tuple[str, str]]:
    """Planted (source, copy) pairs at 5-gram Jaccard >= 0.8, ids ordered."""
    planted = pq.read_table(f"{corpus}.planted.parquet").to_pylist()
    wanted = {r["id"] for r in planted} | {r["source_id"] for r in planted}
    texts = {}
    for batch in pq.ParquetFile(corpus).iter_batches(batch_size=100_000, columns=["id", "text"]):
        for doc_id, text in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True):
            if doc_id in wanted:
                texts[doc_id] = normalize(text, NormalizeOptions()).text
    out = set()
    for r in planted:
        if shingle_jaccard(texts[r["id"]], texts[r["source_id"]], 5) >= 0.8:
            out.add((min(r["id"], r["source_id"]), max(r["id"], r["source_id"])))
    return out


def run_job(corpus: Path, output: Path, driver_memory: str, overrides: list[str]) -> ProcessRun:
    """The job as a user runs it; ``driver_memory`` "" leaves the heap to the job (its local sizing)."""
    args = [sys.executable, "-m", "simhash_spark", "dedup", "--input", str(corpus), "--output", str(output)]
    args += ["--overwrite", "--quiet"]
    if driver_memory:
        args += ["--spark-conf", f"spark.driver.memory={driver_memory}"]
    for item in overrides:
        args += ["--set", item]
    run = run_measured(args, {**os.environ, "PYSPARK_PYTHON": sys.executable})
    if run.returncode:
        sys.exit(f"the job exited {run.returncode}: {run.stderr.strip().splitlines()[-3:]}")
    return run


def found_pairs(output: Path) -> set[tuple[str, str]]:
    """The pairs the run wrote to pairs/ (ids ordered, as the planted truth's)."""
    pairs = pq.read_table(output / "pairs", columns=["id_a", "id_b"]).to_pylist()
    return {(r["id_a"], r["id_b"]) for r in pairs}


def recall(output: Path, truth: set[tuple[str, str]], found: set[tuple[str, str]]) -> dict:
    wanted = {i for p in truth for i in p}
    docs = pq.read_table(output / "documents", columns=["id", "cluster_id"]).to_pylist()
    cluster = {r["id"]: r["cluster_id"] for r in docs if r["id"] in wanted}
    same = sum(1 for a, b in truth if cluster[a] == cluster[b])
    return {
        "planted_pairs": len(truth),
        "recall_pairs": round(len(found & truth) / len(truth), 4),
        "recall_clusters": round(same / len(truth), 4),
    }


def distances(
    output: Path, truth: set[tuple[str, str]], found: set[tuple[str, str]]
) -> dict[str, list[int | float]]:
    """Per Hamming distance d between the planted pairs' fingerprints: the pairs at d, those of them that
    pairs/ does not list, and the share of all planted pairs within d (what any join at k = d can find)."""
    wanted = {i for p in truth for i in p}
    docs = pq.read_table(output / "documents", columns=["id", "fingerprint"]).to_pylist()
    fingerprint = {r["id"]: r["fingerprint"] for r in docs if r["id"] in wanted}
    at = [0] * 65
    missed = [0] * 65
    for a, b in truth:
        if fingerprint[a] is None or fingerprint[b] is None:
            continue  # not fingerprinted (too short): no distance, and counted as beyond every k
        d = ((fingerprint[a] ^ fingerprint[b]) & 0xFFFF_FFFF_FFFF_FFFF).bit_count()
        at[d] += 1
        missed[d] += (a, b) not in found
    top = max(d for d in range(65) if at[d])
    within = [n / len(truth) for n in accumulate(at[: top + 1])]
    return {"pairs_at": at[: top + 1], "missed_at": missed[: top + 1], "recall_bound_at_k": within}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", default="250000")
    ap.add_argument("--workdir", default="/tmp/simhash-throughput")
    ap.add_argument("--corpora", default=str(DEFAULT_CORPORA))
    ap.add_argument(
        "--driver-memory", default="", help='spark.driver.memory; "" (default): what the job sizes'
    )
    ap.add_argument("--set", action="append", default=[], dest="overrides")
    ap.add_argument("--out", default="")
    ap.add_argument("--distances", action="store_true", help="the planted pairs by Hamming distance")
    args = ap.parse_args()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    report = []
    for n in (int(x) for x in args.docs.split(",")):
        corpus = work / f"gen{n}.parquet"
        if not corpus.exists():
            generate(n, corpus, Path(args.corpora))
        output = work / f"out{n}"
        run = run_job(corpus, output, args.driver_memory, args.overrides)
        summary = json.loads((output / "summary.json").read_text("utf-8"))
        truth, found = planted_truth(corpus), found_pairs(output)
        row = {
            "documents": n,
            "seconds": round(run.seconds, 1),
            "documents_per_hour": round(n / run.seconds * 3600),
            "peak_rss_process_tree_mib": run.peak_rss_mib,
            "driver_memory": summary.get("spark", {}).get("driver_memory"),
            "stages_s": summary["timings_s"],
            "bands": summary["bands"]["scheme"],
            "candidate_pairs_within_k": summary.get("candidate_pairs_within_k"),
            "sketch_bands": summary.get("sketch_bands"),  # with match.sketch_bands: the pairs they added
            "verify": summary.get("verify"),  # passed, and what a check filter dropped
            "spark_jobs": summary.get("spark_jobs"),
            **recall(output, truth, found),
            **(distances(output, truth, found) if args.distances else {}),
        }
        report.append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
