"""numpy's sort and the core fingerprinter with numpy's own choice of CPU code paths, and with the paths
``spark.local_numpy_avx512 = "auto"`` gives a local run's Python workers on this machine (its AVX-512
targets off on AMD Zen 4: ``simhash_spark.core.cpu``), each in a fresh process, side by side.

    .venv/bin/python -m bench.numpy_paths [--corpus ../shared/corpora/news_xwlb.parquet] [--limit 20000]
        [--repeat 3]

Prints one JSON object: for each side, the microseconds of ``np.sort`` of 1,000 and of 1,000,000 random
uint64 values (the sizes of one document's n-gram hashes and of a large array), and the core
fingerprinter's characters per second over the corpus's first ``--limit`` texts in batches of 1,000
(the fastest of ``--repeat`` timings each). On a machine where the job keeps numpy's choice both sides
are the same.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from simhash_spark.session import NUMPY_FEATURES, machine_cpuinfo, numpy_features_to_disable

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "news_xwlb.parquet"


def _fastest(run, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def child(corpus: str, limit: int, repeat: int) -> dict:
    """This process's figures (numpy imported here, under the environment it was started with)."""
    import numpy as np
    import pyarrow.parquet as pq

    from simhash_spark.config import load_config
    from simhash_spark.core.allocator import keep_freed_memory
    from simhash_spark.core.fingerprint import Fingerprinter, check_filter

    rng = np.random.default_rng(0)
    out: dict = {NUMPY_FEATURES: os.environ.get(NUMPY_FEATURES, "")}
    for n, times in ((1000, 2000), (1_000_000, 3)):
        values = rng.integers(0, 2**63, n, dtype=np.int64).astype(np.uint64)
        seconds = _fastest(lambda v=values, t=times: [np.sort(v) for _ in range(t)], repeat) / times
        out[f"sort_{n}_us"] = round(seconds * 1e6, 1)
    keep_freed_memory()  # as the fingerprint pass does in the workers
    cfg = load_config()
    texts = pq.read_table(corpus, columns=["text"]).column(0).to_pylist()[:limit]
    fp = Fingerprinter(cfg.model, check_filter(cfg.model, cfg.verify))
    fp.batch(texts[:1000])
    seconds = _fastest(lambda: [fp.batch(texts[i : i + 1000]) for i in range(0, len(texts), 1000)], repeat)
    out["fingerprint_m_chars_per_s"] = round(sum(len(t or "") for t in texts) / seconds / 1e6, 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    ap.add_argument("--limit", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.corpus, args.limit, args.repeat)))
        return
    features = numpy_features_to_disable(machine_cpuinfo())
    base = {k: v for k, v in os.environ.items() if k != NUMPY_FEATURES}
    sides = {"numpy_choice": base, "job_workers": {**base, NUMPY_FEATURES: features} if features else base}
    cmd = [sys.executable, "-m", "bench.numpy_paths", "--child", "--corpus", args.corpus]
    cmd += ["--limit", str(args.limit), "--repeat", str(args.repeat)]
    result = {
        side: json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)
        for side, env in sides.items()
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
