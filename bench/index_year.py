"""An incremental run after a year of daily history: what it reads of the index, and how long it takes.

    .venv/bin/python -m bench.index_year [--per-day 3000] [--batch 2000] [--set k=v ...]

Builds (once per workdir and configuration) the index a year of the daily DAG leaves behind: 358 days
merged by compaction into one snapshot plus the last 7 days as daily snapshots, ``--per-day`` entries a
day (random fingerprints, plus the base articles of a generated corpus on the first day, fingerprinted
for real, with 365 recorded runs for the monitor). Then runs the job incrementally on day 366 for a
batch of ``--batch`` generated documents (with reprints of the indexed articles) and for a batch of 20,
and prints each run's ``index`` summary (key rows and entry rows read against those the index holds) and
stage times.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from datetime import date, timedelta
from pathlib import Path


def build(workdir: Path, cfg, per_day: int) -> dict:
    from pyspark.sql import functions as F

    from bench.index_check import random_sketch, real_entries
    from simhash_spark import columns as C
    from simhash_spark.core.index_model import ENTRY_COLUMNS, Manifest, RunRecord, model_signature
    from simhash_spark.index.session import new_layout
    from simhash_spark.index.snapshots import write_snapshot
    from simhash_spark.index.store import now, open_store
    from simhash_spark.session import build_session

    spark = build_session(cfg, conf={"spark.driver.memory": "8g"})
    store = open_store(spark, str(workdir / "index"))
    if store.manifest() is not None:
        return {"built": False}
    started = time.perf_counter()
    days = [(date(2025, 12, 1) + timedelta(days=d)).isoformat() for d in range(365)]
    real = real_entries(cfg, days[0])
    day_of = F.element_at(F.array(*[F.lit(d) for d in days]), (F.col("id") % 365 + 1).cast("int"))
    synthetic = spark.range(per_day * 365).select(
        F.format_string("y%09d", F.col("id")).alias(C.ID),
        F.xxhash64(F.col("id"), F.lit("year")).alias(C.FINGERPRINT),
        F.lit(1000).alias(C.N_CHARS),
        F.lit(None).cast("bigint").alias(C.TITLE_FINGERPRINT),
        F.format_string("synthetic entry %d", F.col("id")).alias(C.TEXT),
        F.lit(None).cast("string").alias(C.TITLE),
        day_of.alias(C.RUN_DATE),
        (random_sketch(F.col("id")) if cfg.sketch_bands else F.lit(None).cast("binary")).alias(
            C.CHECK_SUMMARY
        ),
    )
    entries = synthetic.unionByName(spark.createDataFrame(real, schema=synthetic.schema)).select(
        *ENTRY_COLUMNS
    )
    layout = new_layout(cfg)
    old, recent = days[:358], days[358:]
    snaps = [
        write_snapshot(
            store,
            layout,
            entries.where(F.col(C.RUN_DATE).isin(old)),
            store.new_snapshot("compact", "bench"),
            tuple(old),
        )
    ]
    for d in recent:
        snaps.append(
            write_snapshot(
                store, layout, entries.where(F.col(C.RUN_DATE) == d), store.new_snapshot(d, "bench"), (d,)
            )
        )
    snap_of = {d: s.id for s in snaps for d in s.runs}
    runs = tuple(RunRecord(d, snap_of[d], per_day, per_day, per_day // 10, 0.1, 0, now()) for d in days)
    store.create(Manifest(version=0, model=model_signature(cfg.model, None), layout=layout, id_type="string"))
    store.commit(
        Manifest(
            version=1,
            model=model_signature(cfg.model, None),
            layout=layout,
            id_type="string",
            snapshots=tuple(snaps),
            runs=runs,
        )
    )
    spark.stop()
    return {
        "built": True,
        "seconds": round(time.perf_counter() - started, 1),
        "entries": sum(s.docs_rows for s in snaps),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--per-day", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=2000)
    parser.add_argument("--workdir", default="bench-output/index_year")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()

    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from simhash_spark.cli import main as cli
    from simhash_spark.config import load_config
    from simhash_spark.demo.corpus import generate

    cfg = load_config(None, args.overrides)
    tag = hashlib.md5(repr((args.per_day, args.overrides)).encode()).hexdigest()[:8]
    workdir = Path(args.workdir) / tag
    workdir.mkdir(parents=True, exist_ok=True)
    result: dict = {"index": build(workdir, cfg, args.per_day), "config": args.overrides}
    reprints = generate(3000, seed=99).to_pandas()
    reprints = reprints[reprints["variant"] != "base"].head(args.batch // 4)
    fresh = generate(args.batch, seed=2026).to_pandas().head(args.batch - len(reprints))
    fresh["id"] = "d366-" + fresh["id"]  # new ids: the index holds the generator's n0000... ids already
    day = pd.concat([fresh, reprints.assign(id="r-" + reprints["id"])], ignore_index=True)
    set_args = [a for o in args.overrides for a in ("--set", o)]
    for name, frame in (("batch", day), ("small_batch", day.head(20))):
        path = workdir / f"{name}.parquet"
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
        out = workdir / f"out-{name}"
        t = time.perf_counter()
        # a copy-free rerun of the same date: the run replaces its own entries each time
        code = cli(
            [
                "dedup",
                "--input",
                str(path),
                "--output",
                str(out),
                "--overwrite",
                "--index",
                str(workdir / "index"),
                "--run-date",
                "2026-12-01",
                "--set",
                "monitor.max_factor=0",
                "--set",
                "output.write_report=false",
                *set_args,
            ]
        )
        wall = time.perf_counter() - t
        s = json.loads((out / "summary.json").read_text())
        result[name] = {
            "exit": code,
            "wall_s": round(wall, 1),
            "rows": s["input_rows"],
            "matched_index": s["index"]["batch_documents_matched"],
            "index": {
                k: s["index"].get(k)
                for k in (
                    "entries_before",
                    "snapshots_read",
                    "looked_up_on",
                    "key_rows_total",
                    "key_rows_read",
                    "entry_rows_read",
                    "touched_entries",
                    "probe_radius",
                    "exact_to_bits",
                    "fingerprint_recall_at_k",
                )
            },
            "timings_s": s["timings_s"],
        }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
