"""Resource run: 1M short documents, 300k of them near-identical boilerplate, on local[2] with a 2 GB driver.

    .venv/bin/python -m bench.resources [--docs 1000000] [--boilerplate 300000] [--workdir /tmp/simhash-resources]

Generates the corpus (deterministic), runs the job as a user would (``python -m simhash_spark dedup``
in a subprocess with ``--master local[2] --spark-conf spark.driver.memory=2g``), and prints the exit code,
wall time, the peak resident memory of the job's process tree and the run summary.

The boilerplate rows are 60 footer/disclaimer templates under random layout changes (HTML wrapping,
full-width characters, punctuation style, whitespace, zero-width characters), so they collapse to a few
dozen distinct fingerprints: the shape of crawled pages that repeat a site footer. The other rows are
short generated news sentences, unique.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bench.common import run_measured
from simhash_spark.demo.corpus import Vocabulary, _sentence, format_variant

SITES = [
    "新华网",
    "人民网",
    "央视网",
    "澎湃新闻",
    "中国新闻网",
    "环球网",
    "光明网",
    "中国日报网",
    "经济日报",
    "科技日报",
]
TEMPLATES = [
    "本文来源于{site}，转载请注明出处。免责声明：本站内容仅供参考，不构成任何投资建议，如有侵权请联系删除。",
    "{site}版权所有，未经书面授权禁止转载、摘编或以其他方式使用。违者必究，举报电话请见网站底部说明。",
    "以上内容由{site}编辑整理，图片来源于网络，如涉及版权问题请与我们联系，我们将在第一时间处理。",
    "关注{site}官方账号，获取更多权威新闻资讯。责任编辑：值班编辑。本文仅代表作者观点，与本站立场无关。",
    "{site}提醒您：理性消费，谨防诈骗。如需投诉或反馈意见，请拨打客服热线或发送邮件至服务邮箱。",
    "声明：{site}转载此文目的在于传递更多信息，并不代表本站赞同其观点和对其真实性负责。",
]


def generate(n_docs: int, n_boiler: int, seed: int = 1) -> pa.Table:
    rng = random.Random(seed)
    vocab = Vocabulary.load()
    boiler = [t.format(site=s) for t in TEMPLATES for s in SITES]
    texts = []
    for _ in range(n_docs - n_boiler):
        texts.append("".join(_sentence(vocab, rng) for _ in range(rng.randint(1, 2))))
    for _ in range(n_boiler):
        base = rng.choice(boiler)
        texts.append(format_variant(base, rng) if rng.random() < 0.7 else base)
    order = list(range(n_docs))
    rng.shuffle(order)
    return pa.table({"id": [f"r{i:08d}" for i in range(n_docs)], "text": [texts[i] for i in order]})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--boilerplate", type=int, default=300_000)
    ap.add_argument("--workdir", default="/tmp/simhash-resources")
    ap.add_argument("--driver-memory", default="2g")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    args = ap.parse_args()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / f"corpus-{args.docs}-{args.boilerplate}.parquet"
    if not corpus.exists():
        pq.write_table(generate(args.docs, args.boilerplate), corpus, row_group_size=100_000)
    out = work / "out"
    cmd = [
        sys.executable,
        "-m",
        "simhash_spark",
        "dedup",
        "--input",
        str(corpus),
        "--output",
        str(out),
        "--overwrite",
        "--master",
        "local[2]",
        "--spark-conf",
        f"spark.driver.memory={args.driver_memory}",
        "--log-level",
        "WARNING",
    ]
    for o in args.overrides:
        cmd += ["--set", o]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    run = run_measured(cmd, env)
    summary = json.loads((out / "summary.json").read_text()) if run.returncode == 0 else {}
    keep = (
        "input_rows",
        "fingerprinted",
        "distinct_fingerprints",
        "same_fingerprint_groups",
        "identical_groups",
        "largest_identical_group",
        "candidate_pairs_within_k",
        "pairs_accepted",
        "pairs_complete",
        "clusters",
        "largest_cluster",
        "duplicates",
        "dedup_rate",
        "components_iterations",
        "timings_s",
    )
    print(
        json.dumps(
            {
                "command": " ".join(cmd),
                "exit_code": run.returncode,
                "wall_s": round(run.seconds, 1),
                "peak_rss_process_tree_mib": run.peak_rss_mib,
                "summary": {k: summary.get(k) for k in keep},
                "stderr_tail": run.stderr.strip().splitlines()[-3:] if run.returncode else [],
            },
            ensure_ascii=False,
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
