"""A template flood against identical documents, interleaved in one run, each a separate job process with
the default configuration:

- ``flood``: ``--variants`` distinct near-variants of one daily notice (its seven figures drawn at random:
  most variants are not near duplicates of each other) plus ``--unrelated`` generated news stories;
- ``near``: as many variants that differ only in a serial number and a time (near duplicates of each
  other) plus the same stories;
- ``identical``: ``--identical`` copies of one notice.

    .venv/bin/python -m bench.flood [--variants 50000] [--unrelated 500] [--identical 100000]
        [--repeat 1] [--workdir bench-output/flood]

Prints one JSON object: per corpus the median seconds, each round's, its stage times and summary.json's
flood, hot_buckets, candidate_pairs_within_k and clusters, and each corpus's time over ``identical``'s.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

NOTICE = (
    "市场监管总局发布今日农产品批发价格监测公告：全国重点监测的农产品批发市场中，猪肉平均价格为每公斤{a}元，"
    "比前一日{b}百分之{c}；牛肉平均价格为每公斤{d}元；羊肉平均价格为每公斤{e}元；鸡蛋平均价格为每公斤{f}元；"
    "白条鸡平均价格为每公斤{g}元；重点监测的二十八种蔬菜平均价格为每公斤{h}元，比前一日{i}百分之{j}；"
    "六种水果平均价格为每公斤{k}元。本公告数据来源于全国农产品批发市场价格信息系统，仅供参考。编号{m}，"
    "发布时间{t}。"
)
FIXED = {
    "a": "32.15", "b": "上涨", "c": "1.2", "d": "75.40", "e": "71.88", "f": "9.65", "g": "18.20",
    "h": "4.87", "i": "下降", "j": "0.6", "k": "7.31",
}  # fmt: skip


def _figures(rng: random.Random) -> dict[str, str]:
    def price(lo: float, hi: float) -> str:
        return f"{rng.uniform(lo, hi):.2f}"

    return {
        "a": price(20, 40), "b": rng.choice(["上涨", "下降"]), "c": f"{rng.uniform(0, 3):.1f}",
        "d": price(60, 90), "e": price(60, 90), "f": price(8, 12), "g": price(15, 25), "h": price(4, 6),
        "i": rng.choice(["上涨", "下降"]), "j": f"{rng.uniform(0, 3):.1f}", "k": price(6, 9),
    }  # fmt: skip


def _stamp(rng: random.Random) -> dict[str, str]:
    return {"m": str(rng.randrange(10**8)), "t": f"{rng.randrange(24):02d}:{rng.randrange(60):02d}"}


def write_corpora(workdir: Path, variants: int, unrelated: int, identical: int) -> dict[str, Path]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from simhash_spark.demo.corpus import generate

    workdir.mkdir(parents=True, exist_ok=True)
    news = generate(unrelated, seed=5).to_pandas()
    rng = random.Random(1)
    texts = {
        "flood": [NOTICE.format(**_figures(rng), **_stamp(rng)) for _ in range(variants)],
        "near": [NOTICE.format(**FIXED, **_stamp(rng)) for _ in range(variants)],
        "identical": [NOTICE.format(**FIXED, m="1", t="08:00")] * identical,
    }
    paths = {}
    for name, rows in texts.items():
        ids = [f"{name}-{i:07d}" for i in range(len(rows))]
        if name != "identical":
            ids += news["id"].tolist()
            rows = rows + news["text"].tolist()
        paths[name] = workdir / f"{name}.parquet"
        pq.write_table(pa.table({"id": ids, "text": rows}), paths[name])
    return paths


def run_job(corpus: Path, out: Path) -> tuple[float, dict]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "simhash_spark", "dedup", "--input", str(corpus), "--output", str(out),
         "--quiet", "--overwrite", "--set", "output.write_report=false"],
        check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    return seconds, json.loads((out / "summary.json").read_text())


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--variants", type=int, default=50_000)
    p.add_argument("--unrelated", type=int, default=500)
    p.add_argument("--identical", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--workdir", type=Path, default=Path("bench-output/flood"))
    args = p.parse_args(argv)
    corpora = write_corpora(args.workdir, args.variants, args.unrelated, args.identical)
    rounds: dict[str, list[float]] = {name: [] for name in corpora}
    summaries: dict[str, dict] = {}
    for r in range(args.repeat):
        for name, path in corpora.items():
            seconds, summary = run_job(path, args.workdir / f"out-{name}-{r}")
            rounds[name].append(round(seconds, 1))
            summaries[name] = summary
    report: dict[str, object] = {"command": " ".join(["python -m bench.flood", *(argv or sys.argv[1:])])}
    base = statistics.median(rounds["identical"])
    for name, times in rounds.items():
        s = summaries[name]
        report[name] = {
            "median_s": statistics.median(times),
            "rounds_s": times,
            "over_identical": round(statistics.median(times) / base, 2),
            "stages_s": {k: v["seconds"] for k, v in s.get("stages", {}).items()},
            "flood": s.get("flood"),
            "hot_buckets": s.get("hot_buckets"),
            "candidate_pairs_within_k": s.get("candidate_pairs_within_k"),
            "clusters": s.get("clusters"),
            "largest_cluster": s.get("largest_cluster"),
        }
    print(json.dumps(report, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
