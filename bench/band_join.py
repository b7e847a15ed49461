"""What a row and a pair cost in the band join inside a task (``core.bucket_pairs.join_tables``), the two
numbers behind ``core.designs.IN_TASK_PAIR_COST``.

    .venv/bin/python -m bench.band_join [--n 1000000] [--k 12] [--tables 6]
        [--designs lsh:123,14 lsh:214,16 lsh:316,17]

Random fingerprints (uniform bits), one process, one core: for each design, ``--tables`` of its tables are
joined one at a time and timed; the random-collision pairs each table compared are counted from its bucket
sizes. A least-squares fit (of relative errors) of seconds per table = rows * row_cost + pairs * pair_cost over the designs gives
both costs; their ratio is what the design choice weighs a pair at.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from simhash_spark.core.bands import parse_scheme
from simhash_spark.core.bucket_pairs import join_tables


def measure(fps: np.ndarray, spec: str, k: int, tables: int) -> dict:
    masks = np.array(parse_scheme(spec).table_masks(k), dtype=np.int64)
    pairs = 0
    for t in range(tables):
        counts = np.unique(fps & masks[t], return_counts=True)[1]
        pairs += int((counts * (counts - 1) // 2).sum())
    start = time.perf_counter()
    for t in range(tables):
        join_tables(fps, masks, [t], k=k, limit=1 << 62)
    seconds = (time.perf_counter() - start) / tables
    return {
        "design": spec,
        "seconds_per_table": round(seconds, 4),
        "pairs_per_table": pairs // tables,
        "whole_design_s": round(seconds * len(masks), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--k", type=int, default=12)
    ap.add_argument("--tables", type=int, default=6)
    ap.add_argument("--designs", nargs="+", default=["lsh:123,14", "lsh:214,16", "lsh:316,17"])
    args = ap.parse_args()
    fps = np.random.default_rng(1).integers(-(2**63), 2**63 - 1, size=args.n, dtype=np.int64)
    rows = [measure(fps, spec, args.k, args.tables) for spec in args.designs]
    x = np.array([[args.n, r["pairs_per_table"]] for r in rows], dtype=np.float64)
    y = np.array([r["seconds_per_table"] for r in rows])
    # relative errors: the small times of the designs that matter weigh as much as the large ones
    row_cost, pair_cost = np.linalg.lstsq(x / y[:, None], np.ones_like(y), rcond=None)[0]
    for r in rows:
        print(json.dumps(r))
    print(
        json.dumps(
            {
                "row_ns": round(row_cost * 1e9, 2),
                "pair_ns": round(pair_cost * 1e9, 2),
                "pair_in_rows": round(pair_cost / row_cost, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
