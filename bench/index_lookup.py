"""A daily batch against a large index beside the same batch against a small one: what the lookup reads,
how long the run takes, and whether light edits of indexed documents are matched to their originals; and
what building the large index costs.

    .venv/bin/python -m bench.index_lookup [--corpus /tmp/simhash-throughput/gen1000000.parquet]
        [--batch 2000] [--rounds 2] [--workdir /tmp/simhash-index-lookup] [--set section.key=value ...]

1. With the job and its defaults (``dedup --index``, one run date), builds an index of the whole corpus
   (bench/generate_corpus.py writes one: ``--docs 1000000``) and one of ``--batch`` of its documents; each
   build is timed whole, and the index's bytes and files are set against the input's Parquet bytes.
2. The batch: ``--batch`` documents, half light edits (1-2 % of the characters changed in short spans) of
   documents both indexes hold, half new documents (another seed of the same generator).
3. Runs the batch against each index as a rerun of one later date, alternating, ``--rounds`` times, each
   run a whole ``python -m simhash_spark dedup`` process. Reports each run's wall clock and lookup stage,
   what it read (key rows read of the key rows the index holds, entry rows read), and the share of the light
   edits whose ``matched_index_id`` lies in their original's cluster.

Everything it writes stays in ``--workdir`` (indexes kept for reruns of step 3).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bench.common import run_measured
from bench.generate_corpus import base_document, sentences
from bench.quality.evaluate import DEFAULT_CORPORA

DAY = "2026-01-01"
BATCH_DAY = "2026-01-02"


def tree_bytes(path: Path) -> tuple[int, int]:
    """(bytes, files) of the data under ``path`` (checksum files left out)."""
    files = [p for p in path.rglob("*") if p.is_file() and not p.name.endswith(".crc")]
    return sum(p.stat().st_size for p in files), len(files)


def job(args: list[str], overrides: list[str]) -> dict:
    cmd = [sys.executable, "-m", "simhash_spark", "dedup", "--quiet", "--overwrite", *args]
    cmd += [
        a for o in ["monitor.max_factor=0", "output.write_report=false", *overrides] for a in ("--set", o)
    ]
    run = run_measured(cmd, {**os.environ, "PYSPARK_PYTHON": sys.executable})
    if run.returncode:
        sys.exit(f"the job exited {run.returncode}: {run.stderr.strip().splitlines()[-3:]}")
    return {"seconds": round(run.seconds, 1), "peak_rss_mib": run.peak_rss_mib}


def light_edit(rng: random.Random, text: str, pool: list[str]) -> str:
    chars = list(text)
    budget = max(1, int(len(chars) * rng.choice((0.01, 0.02))))
    while budget > 0:
        n = rng.randint(1, 3)
        i = rng.randrange(max(1, len(chars) - n))
        donor = list(rng.choice(pool)[:n])
        if rng.random() < 0.5:
            chars[i : i + n] = donor
        else:
            chars[i:i] = donor
        budget -= n
    return "".join(chars)


def make_inputs(corpus: Path, work: Path, batch: int, seed: int) -> tuple[Path, Path, dict[str, str]]:
    """(the small index's input, the batch, edit id → original id)."""
    rng = random.Random(seed)
    n = pq.ParquetFile(corpus).metadata.num_rows
    picked = set(rng.sample(range(n), batch))
    rows, start = [], 0
    for part in pq.ParquetFile(corpus).iter_batches(batch_size=50_000, columns=["id", "text"]):
        rows += [r for i, r in enumerate(part.to_pylist(), start) if i in picked]
        start += part.num_rows
    pq.write_table(pa.Table.from_pylist(rows), work / "small_input.parquet")
    originals = rows[: batch // 2]
    pool = sentences(DEFAULT_CORPORA, limit=50_000)
    edits = [(f"edit-{r['id']}", light_edit(rng, r["text"], pool)) for r in originals]
    fresh = [(f"new-{i:06d}", base_document(rng, pool)) for i in range(batch - len(edits))]
    rows = edits + fresh
    pq.write_table(
        pa.table({"id": [i for i, _ in rows], "text": [t for _, t in rows]}), work / "batch.parquet"
    )
    return (
        work / "small_input.parquet",
        work / "batch.parquet",
        {e: r["id"] for (e, _), r in zip(edits, originals, strict=True)},
    )


def build(name: str, data: Path, work: Path, overrides: list[str]) -> dict:
    index, out = work / f"index-{name}", work / f"build-{name}"
    marker = work / f"built-{name}.json"
    if marker.exists() and index.exists():
        return json.loads(marker.read_text())
    shutil.rmtree(index, ignore_errors=True)
    run = job(
        ["--input", str(data), "--output", str(out), "--index", str(index), "--run-date", DAY], overrides
    )
    index_bytes, files = tree_bytes(index)
    report = {**run, "input_bytes": data.stat().st_size, "index_bytes": index_bytes, "index_files": files}
    report["bytes_to_input"] = round(index_bytes / report["input_bytes"], 3)
    summary = json.loads((out / "summary.json").read_text())
    report["entries"] = summary["index"]["entries_after"]
    report["index_write_s"] = summary["timings_s"].get("index_write")
    marker.write_text(json.dumps(report))
    return report


def matched_share(out: Path, build_out: Path, edits: dict[str, str]) -> float:
    docs = pq.read_table(out / "documents", columns=["id", "matched_index_id"]).to_pylist()
    matched = {r["id"]: r["matched_index_id"] for r in docs if r["id"] in edits}
    wanted = set(edits.values()) | {m for m in matched.values() if m is not None}
    cluster = {
        r["id"]: r["cluster_id"]
        for r in pq.read_table(build_out / "documents", columns=["id", "cluster_id"]).to_pylist()
        if r["id"] in wanted
    }
    hits = sum(
        1
        for e, original in edits.items()
        if matched.get(e) is not None and cluster.get(matched[e]) == cluster.get(original)
    )
    return hits / len(edits)


def lookup_round(name: str, batch: Path, work: Path, edits: dict[str, str], overrides: list[str]) -> dict:
    out = work / f"out-{name}"
    run = job(
        [
            "--input",
            str(batch),
            "--output",
            str(out),
            "--index",
            str(work / f"index-{name}"),
            "--run-date",
            BATCH_DAY,
        ],
        overrides,
    )
    s = json.loads((out / "summary.json").read_text())
    ix = s["index"]
    keys = (
        "entries_before",
        "key_rows_total",
        "key_rows_read",
        "entry_rows_read",
        "touched_entries",
        "looked_up_on",
        "probe_radius",
        "exact_to_bits",
        "fingerprint_recall_at_k",
    )
    return {
        **run,
        "index_lookup_s": s["timings_s"].get("index_lookup"),
        **{k: ix.get(k) for k in keys},
        "edits_matched": round(matched_share(out, work / f"build-{name}", edits), 4),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default="/tmp/simhash-throughput/gen1000000.parquet")
    ap.add_argument("--batch", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--workdir", default="/tmp/simhash-index-lookup")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    args = ap.parse_args()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    corpus = Path(args.corpus)
    small_input, batch, edits = make_inputs(corpus, work, args.batch, args.seed)
    result: dict = {
        "corpus": str(corpus),
        "config": args.overrides,
        "build": {
            "large": build("large", corpus, work, args.overrides),
            "small": build("small", small_input, work, args.overrides),
        },
    }
    rounds: dict[str, list[dict]] = {"small": [], "large": []}
    for _ in range(args.rounds):
        for name in ("small", "large"):
            rounds[name].append(lookup_round(name, batch, work, edits, args.overrides))
    result["rounds"] = rounds
    med = {name: statistics.median(r["seconds"] for r in runs) for name, runs in rounds.items()}
    result["median_seconds"] = med
    result["large_to_small"] = round(med["large"] / med["small"], 2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
