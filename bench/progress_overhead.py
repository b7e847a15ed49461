"""What progress reporting costs: the same dedup run with and without a progress reporter polling Spark's
status (as on a terminal, once a second), alternated in one session, median of each.

    .venv/bin/python -m bench.progress_overhead [--docs 20000] [--repeat 3] [--interval 1.0]
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import bench_session, generated_corpus


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=20000, help="base documents of the generated corpus")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--interval", type=float, default=1.0, help="seconds between polls (terminal default)"
    )
    args = parser.parse_args()

    from simhash_spark.context import RunContext
    from simhash_spark.pipeline import dedup
    from simhash_spark.progress import Progress, SparkProbe

    spark, cfg = bench_session(["output.write_report=false"])
    with tempfile.TemporaryDirectory() as tmp:
        corpus, rows = generated_corpus(Path(tmp), args.docs)

        def once(progress: bool) -> float:
            ctx = (
                RunContext(
                    Progress(SparkProbe(spark), stream=io.StringIO(), tty=True, interval=args.interval)
                )
                if progress
                else RunContext()
            )
            start = time.perf_counter()
            result = dedup(spark, spark.read.parquet(str(corpus)), cfg, ctx=ctx)
            result.documents.count()
            seconds = time.perf_counter() - start
            result.unpersist()
            return seconds

        once(False)  # warm-up: JIT, Python workers, caches
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.repeat):
            for progress in (False, True):
                times[progress].append(once(progress))
    off, on = statistics.median(times[False]), statistics.median(times[True])
    print(
        json.dumps(
            {
                "documents": rows,
                "repeat": args.repeat,
                "seconds_without": [round(t, 2) for t in times[False]],
                "seconds_with": [round(t, 2) for t in times[True]],
                "median_without": round(off, 2),
                "median_with": round(on, 2),
                "ratio_with_to_without": round(on / off, 3),
            },
            indent=2,
        )
    )
    spark.stop()


if __name__ == "__main__":
    main()
