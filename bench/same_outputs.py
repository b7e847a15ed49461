"""Digests of the job's outputs on fixed inputs, to show that a change (a refactoring) leaves every output
identical. Run it on the old commit and on the new one, then compare:

    .venv/bin/python -m bench.same_outputs --out before.json          # on the old commit
    .venv/bin/python -m bench.same_outputs --out after.json --compare before.json

Inputs: the demo corpus (generated, with titles), under the default configuration, the title rules "and"
and "or", and the text check off; the labelled quality benchmark (the shared corpora, when present) under
the default configuration; two incremental days against an index. Each output's digest is the SHA-256 of
its rows sorted (as JSON), with the row count; summary statistics are compared without wall times.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bench.common import DEFAULT_CORPORA

OUTPUTS = ("documents", "pairs", "clusters", "deduplicated")
RUNS: dict[str, list[str]] = {
    "demo default": [],
    "demo title and": ["--set", 'input.title_column="title"'],
    "demo title or": ["--set", 'input.title_column="title"', "--set", 'title.rule="or"'],
    "demo no text check": ["--set", 'verify.measure="none"', "--set", "match.max_distance=3"],
}


def digest_folder(folder: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in OUTPUTS:
        if not (folder / name).exists():
            continue
        rows = sorted(
            json.dumps(r, sort_keys=True, default=str, ensure_ascii=False)
            for r in pq.read_table(folder / name).to_pylist()
        )
        out[name] = {"rows": len(rows), "sha256": hashlib.sha256("\n".join(rows).encode()).hexdigest()}
    summary = json.loads((folder / "summary.json").read_text())
    for key in ("timings_s", "stages", "input", "versions", "spark"):
        summary.pop(key, None)
    for key in ("path", "snapshot", "version_before", "version_after"):
        summary.get("index", {}).pop(key, None)
    out["summary"] = summary
    return out


def run(args: list[str]) -> None:
    from simhash_spark.cli import main

    code = main(["dedup", *args, "--set", "output.write_report=false"])
    if code != 0:
        raise SystemExit(f"run failed ({code}): {args}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", required=True)
    parser.add_argument("--compare", help="an earlier --out file: exit 1 naming every difference")
    parser.add_argument("--corpora", default=str(DEFAULT_CORPORA))
    args = parser.parse_args()
    from simhash_spark.demo.corpus import generate

    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        demo = generate(1000, seed=7)
        pq.write_table(demo, tmp / "demo.parquet")
        for label, extra in RUNS.items():
            out = tmp / label.replace(" ", "_")
            run(["--input", str(tmp / "demo.parquet"), "--output", str(out), *extra])
            results[label] = digest_folder(out)
        half = demo.num_rows // 2
        pq.write_table(demo.slice(0, half), tmp / "day1.parquet")
        pq.write_table(demo.slice(half), tmp / "day2.parquet")
        for day, date in (("day1", "2026-01-01"), ("day2", "2026-01-02")):
            out = tmp / f"inc_{day}"
            run(
                [
                    "--input",
                    str(tmp / f"{day}.parquet"),
                    "--output",
                    str(out),
                    "--index",
                    str(tmp / "index"),
                    "--run-date",
                    date,
                ]
            )
            results[f"incremental {day}"] = digest_folder(out)
        corpora = Path(args.corpora)
        if (corpora / "news_xwlb.parquet").exists():
            from bench.quality.benchmark import build

            docs = build(corpora)
            pq.write_table(
                pa.table({"id": [d.id for d in docs], "text": [d.text for d in docs]}),
                tmp / "quality.parquet",
            )
            run(["--input", str(tmp / "quality.parquet"), "--output", str(tmp / "quality")])
            results["quality benchmark default"] = digest_folder(tmp / "quality")
    Path(args.out).write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    if args.compare:
        before = json.loads(Path(args.compare).read_text())
        diffs = [
            label for label in sorted(set(before) | set(results)) if before.get(label) != results.get(label)
        ]
        for label in diffs:
            print(f"differs: {label}", file=sys.stderr)
        print(f"{len(results) - len(diffs)} of {len(results)} runs identical")
        raise SystemExit(1 if diffs else 0)


if __name__ == "__main__":
    main()
