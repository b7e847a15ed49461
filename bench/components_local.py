"""The clusters stage with the graph solved on the driver (``cluster.local_max_edges``, default) against
the distributed rounds (``cluster.local_max_edges=0``), alternated in one session, on the generated
corpus:

    .venv/bin/python -m bench.components_local [--docs 8000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from bench.common import bench_session, generated_corpus


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=8000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from simhash_spark.pipeline import dedup

    spark, cfg = bench_session(["output.write_report=false"])
    with tempfile.TemporaryDirectory() as tmp:
        corpus, rows = generated_corpus(Path(tmp), args.docs)
        seconds: dict[str, list[float]] = {"distributed": [], "local": []}
        for _ in range(args.repeat):
            for name, limit in (("distributed", 0), ("local", cfg.cluster.local_max_edges)):
                result = dedup(
                    spark, spark.read.parquet(str(corpus)), cfg, overrides={"cluster.local_max_edges": limit}
                )
                seconds[name].append(result.timings["clusters"])
                result.unpersist()
    print(
        json.dumps(
            {
                "documents": rows,
                "clusters_stage_s": seconds,
                "median": {k: statistics.median(v) for k, v in seconds.items()},
            },
            indent=2,
        )
    )
    spark.stop()


if __name__ == "__main__":
    main()
