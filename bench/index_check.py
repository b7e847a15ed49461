"""Latency of the online check (``simhash_spark check``) against a large index.

    .venv/bin/python -m bench.index_check [--entries 1000000] [--workdir bench-output/index_check] [--set k=v ...]

Builds an index (once per workdir and configuration) of ``--entries`` synthetic entries (random 64-bit
fingerprints: the collision load of a real index of that size) plus the base articles of a generated
corpus, fingerprinted for real with their texts. Queries: the corpus's edited and reprinted variants of
those articles (true near-duplicates) and unrelated generated articles. Reports, in one run: the wall time
of a whole ``simhash_spark check`` process for one text (interpreter, imports and model start included),
and the in-process latency of ``check`` for 1, 10 and 100 texts per call, with what was read.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path


def real_entries(cfg, run_date: str):
    """The base articles of the generated corpus (seed 99), fingerprinted for real, as index entries
    (``ENTRY_COLUMNS``, pandas): what the benchmarks' queries are near-duplicates of."""
    import pandas as pd

    from simhash_spark import columns as C
    from simhash_spark.core.fingerprint import FINGERPRINTED, Fingerprinter, check_filter
    from simhash_spark.demo.corpus import generate

    corpus = generate(3000, seed=99).to_pandas()
    base = corpus[corpus["variant"] == "base"]
    sketches = check_filter(cfg.model, cfg.verify) if cfg.sketch_bands else None
    batch = Fingerprinter(cfg.model, sketches).batch(base["text"].tolist())
    keep = [s in FINGERPRINTED for s in batch.status]
    summaries = batch.check_summary or [None] * len(keep)
    real = pd.DataFrame(
        {
            C.ID: base["id"][keep].tolist(),
            C.FINGERPRINT: batch.fingerprint[keep].tolist(),
            C.N_CHARS: batch.n_chars[keep].astype("int32").tolist(),
            C.TITLE_FINGERPRINT: [None] * sum(keep),
            C.TEXT: base["text"][keep].tolist(),
            C.TITLE: [None] * sum(keep),
            C.RUN_DATE: [run_date] * sum(keep),
            C.CHECK_SUMMARY: [v for v, k in zip(summaries, keep, strict=True) if k],
        }
    )
    return real


def random_sketch(column):
    """32 bytes of a hash of ``column``: a synthetic entry's sketch (its bands' keys as random as a real
    index's unrelated entries')."""
    from pyspark.sql import functions as F

    parts = [F.lpad(F.hex(F.xxhash64(column, F.lit(i))), 16, "0") for i in range(4)]
    return F.unhex(F.concat(*parts))


def build(workdir: Path, cfg, entries: int) -> dict:
    from pyspark.sql import functions as F

    from simhash_spark import columns as C
    from simhash_spark.core.index_model import ENTRY_COLUMNS, Manifest, RunRecord, model_signature
    from simhash_spark.index.session import new_layout
    from simhash_spark.index.snapshots import write_snapshot
    from simhash_spark.index.store import now, open_store
    from simhash_spark.session import build_session

    spark = build_session(cfg, conf={"spark.driver.memory": "8g"})
    index = str(workdir / "index")
    store = open_store(spark, index)
    if store.manifest() is not None:
        return {"built": False}
    started = time.perf_counter()
    real = real_entries(cfg, "2026-01-01")
    synthetic = spark.range(entries).select(
        F.format_string("s%09d", F.col("id")).alias(C.ID),
        F.xxhash64(F.col("id")).alias(C.FINGERPRINT),
        F.lit(1000).alias(C.N_CHARS),
        F.lit(None).cast("bigint").alias(C.TITLE_FINGERPRINT),
        F.format_string("synthetic entry %d", F.col("id")).alias(C.TEXT),
        F.lit(None).cast("string").alias(C.TITLE),
        F.lit("2026-01-01").alias(C.RUN_DATE),
        (random_sketch(F.col("id")) if cfg.sketch_bands else F.lit(None).cast("binary")).alias(
            C.CHECK_SUMMARY
        ),
    )
    schema = synthetic.schema
    all_entries = synthetic.unionByName(spark.createDataFrame(real, schema=schema)).select(*ENTRY_COLUMNS)
    layout = new_layout(cfg)
    snap = write_snapshot(store, layout, all_entries, store.new_snapshot("bench", "bench"), ("2026-01-01",))
    store.create(Manifest(version=0, model=model_signature(cfg.model, None), layout=layout, id_type="string"))
    manifest = Manifest(
        version=1,
        model=model_signature(cfg.model, None),
        layout=layout,
        id_type="string",
        snapshots=(snap,),
        runs=(RunRecord("2026-01-01", snap.id, snap.docs_rows, snap.docs_rows, 0, 0.0, 0, now()),),
    )
    store.commit(manifest)
    spark.stop()
    return {
        "built": True,
        "seconds": round(time.perf_counter() - started, 1),
        "entries": snap.docs_rows,
        "key_rows": snap.keys_rows,
    }


def queries() -> tuple[list[str], list[str]]:
    from simhash_spark.demo.corpus import generate

    corpus = generate(3000, seed=99).to_pandas()
    dups = corpus[corpus["variant"].isin(["edit", "boilerplate"])]["text"].tolist()
    unrelated = generate(200, seed=123, dup_share=0.0).to_pandas()["text"].tolist()
    return dups, unrelated


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--workdir", default="bench-output/index_check")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()

    from simhash_spark.config import load_config
    from simhash_spark.index.check import Query, check

    cfg = load_config(None, args.overrides)
    workdir = (
        Path(args.workdir) / f"{args.entries}-{hashlib.md5(repr(args.overrides).encode()).hexdigest()[:8]}"
    )
    workdir.mkdir(parents=True, exist_ok=True)
    built = build(workdir, cfg, args.entries)
    index = str(workdir / "index")
    dups, unrelated = queries()

    set_args = [a for o in args.overrides for a in ("--set", o)]
    process_times = []
    for text in dups[:5] + unrelated[:5]:
        t = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "simhash_spark", "check", "--index", index, *set_args, text],
            check=True,
            capture_output=True,
        )
        process_times.append(time.perf_counter() - t)

    check(index, cfg, [Query(None, dups[0])])  # warm: model, file listings
    result: dict = {"index": built, "entries": args.entries, "config": args.overrides}
    result["process_one_text_s"] = {
        "median": round(statistics.median(process_times), 3),
        "max": round(max(process_times), 3),
    }
    found = flagged = 0
    for size in (1, 10, 100):
        times, reads = [], []
        for r in range(args.repeat if size < 100 else max(3, args.repeat // 5)):
            batch = [Query(None, t) for t in (dups + unrelated)[r * size % 300 :][:size]]
            t = time.perf_counter()
            res, read = check(index, cfg, batch)
            times.append(time.perf_counter() - t)
            reads.append(read)
        result[f"in_process_{size}_texts_s"] = {
            "median": round(statistics.median(times), 4),
            "max": round(max(times), 4),
            "per_text_ms": round(1000 * statistics.median(times) / size, 2),
            "key_rows_read": reads[0]["key_rows_read"],
            "entry_rows_read": reads[0]["entry_rows_read"],
        }
    res, _ = check(index, cfg, [Query(None, t) for t in dups[:200]])
    found = sum(r["duplicate"] for r in res)
    res, _ = check(index, cfg, [Query(None, t) for t in unrelated[:200]])
    flagged = sum(r["duplicate"] for r in res)
    result["variants_found"] = f"{found}/{min(200, len(dups))}"
    result["unrelated_flagged"] = f"{flagged}/{min(200, len(unrelated))}"
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
