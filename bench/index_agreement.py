"""Incremental runs against the index agree with one run over everything, on real corpora, with the
defaults: the same pairs and the same duplicate flags.

    .venv/bin/python -m bench.index_agreement [--corpus news_xwlb] [--days 4] [--workdir /tmp/simhash-agreement]
        [--set section.key=value ...]

The corpus (one of the shared corpora, by name, or ``quality``: the labelled benchmark of bench/quality,
real texts with their edited reprints) is split into ``--days`` daily batches in its own order (by
``date`` where it has one: news in broadcast order), each batch runs as one day against the index,
and the union runs once without an index. For each day j the full run's pairs among days <= j that
involve a day-j document are what the incremental run of day j should write (pairs are a property of the
two documents); reported: those pairs found by both, only by the full run, only by the incremental run,
and the documents whose ``is_duplicate`` differs (a day-j document is a duplicate when the full run's
cluster, restricted to days <= j, holds an earlier document: an indexed one or an earlier id of its day).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bench.common import DEFAULT_CORPORA

DATES = [f"2026-10-{d:02d}" for d in range(1, 29)]


def union_find(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """Each node of ``pairs`` → the smallest node of its component (the job's own labelling)."""
    import numpy as np

    from simhash_spark.core.components import component_labels

    if not pairs:
        return {}
    nodes, labels = component_labels(np.array([a for a, _ in pairs]), np.array([b for _, b in pairs]))
    return dict(zip(nodes.tolist(), labels.tolist(), strict=True))


def run(args: list[str], overrides: list[str]) -> None:
    from simhash_spark.cli import main

    sets = [
        a for o in ["output.write_report=false", "monitor.max_factor=0", *overrides] for a in ("--set", o)
    ]
    code = main(["dedup", "--quiet", "--overwrite", *args, *sets])
    if code:
        sys.exit(f"the job exited {code}")


def quality_corpus(corpora: Path, work: Path) -> Path:
    """The labelled benchmark's documents (bench/quality: real news, prose and abstracts with their edited
    reprints), in a random order of days (a reprint and its source land on different days)."""
    import zlib

    from bench.quality.benchmark import build

    docs = build(corpora)
    ranked = sorted(docs, key=lambda d: zlib.crc32(d.id.encode()))
    path = work / "quality.parquet"
    pq.write_table(pa.table({"id": [d.id for d in ranked], "text": [d.text for d in ranked]}), path)
    return path


def split(corpus: Path, days: int, work: Path) -> list[Path]:
    table = pq.read_table(
        corpus, columns=[c for c in ("id", "text", "date") if c in pq.read_schema(corpus).names]
    )
    order = table.column("date").to_pylist() if "date" in table.column_names else None
    ids = table.column("id").to_pylist()
    ranked = sorted(range(len(ids)), key=lambda i: order[i]) if order else list(range(len(ids)))
    paths = []
    for d in range(days):
        rows = ranked[d * len(ranked) // days : (d + 1) * len(ranked) // days]
        path = work / "days" / f"day{d}.parquet"
        pq.write_table(table.select(["id", "text"]).take(pa.array(rows)), path)
        paths.append(path)
    return paths


def pairs_of(folder: Path) -> set[tuple[str, str]]:
    return {
        (r["id_a"], r["id_b"]) for r in pq.read_table(folder / "pairs", columns=["id_a", "id_b"]).to_pylist()
    }


def compare(work: Path, days: list[Path]) -> dict:
    day_of = {}
    for j, path in enumerate(days):
        for i in pq.read_table(path, columns=["id"]).column("id").to_pylist():
            day_of[i] = j
    full = pairs_of(work / "full")
    totals = {"documents": len(day_of), "both": 0, "only_full": 0, "only_incremental": 0, "flags_differ": 0}
    examples: list = []
    for j in range(len(days)):
        upto = [(a, b) for a, b in full if day_of[a] <= j and day_of[b] <= j]
        want = {p for p in upto if j in (day_of[p[0]], day_of[p[1]])}
        got = pairs_of(work / f"day{j}")
        totals["both"] += len(want & got)
        totals["only_full"] += len(want - got)
        totals["only_incremental"] += len(got - want)
        examples += sorted(want ^ got)[:3]
        comp = union_find(upto)
        members: dict[str, list[str]] = {}
        for node, root in comp.items():
            members.setdefault(root, []).append(node)
        docs = pq.read_table(work / f"day{j}" / "documents", columns=["id", "is_duplicate"]).to_pylist()
        for r in docs:
            d = r["id"]
            group = members.get(comp.get(d, d), [d])
            earlier = any(m != d and (day_of[m] < j or (day_of[m] == j and m < d)) for m in group)
            totals["flags_differ"] += earlier != r["is_duplicate"]
    return {**totals, "differing_pairs_e_g": examples[:10]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default="quality")
    ap.add_argument("--corpora", default=str(DEFAULT_CORPORA))
    ap.add_argument("--days", type=int, default=4)
    ap.add_argument("--workdir", default="/tmp/simhash-agreement")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    args = ap.parse_args()
    work = Path(args.workdir) / args.corpus
    shutil.rmtree(work, ignore_errors=True)
    (work / "days").mkdir(parents=True)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    corpora = Path(args.corpora)
    source = quality_corpus(corpora, work) if args.corpus == "quality" else corpora / f"{args.corpus}.parquet"
    days = split(source, args.days, work)
    for j, path in enumerate(days):
        run(
            [
                "--input",
                str(path),
                "--output",
                str(work / f"day{j}"),
                "--index",
                str(work / "index"),
                "--run-date",
                DATES[j],
            ],
            args.overrides,
        )
    run(["--input", str(work / "days"), "--output", str(work / "full")], args.overrides)
    summaries = [
        json.loads((work / f"day{j}" / "summary.json").read_text())["index"] for j in range(len(days))
    ]
    plans = [
        {k: s.get(k) for k in ("probe_width", "probe_radius", "exact_to_bits", "looked_up_on")}
        for s in summaries
    ]
    print(
        json.dumps(
            {
                "corpus": args.corpus,
                "days": args.days,
                "config": args.overrides,
                "plans": plans,
                **compare(work, days),
            },
            indent=2,
            ensure_ascii=False,
        )
    )


if __name__ == "__main__":
    main()
