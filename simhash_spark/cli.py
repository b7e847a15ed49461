"""Command line: ``python -m simhash_spark dedup|demo ...`` and ``spark-submit jobs/dedup.py ...``.

Exit codes: 0 success, 2 bad input or configuration, 1 any other failure.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from simhash_spark.config import DEFAULT_CONFIG_PATH, load_config
from simhash_spark.errors import ConfigError, SimhashSparkError, essence

log = logging.getLogger("simhash_spark")

EPILOG = """exit codes: 0 success, 2 bad input or configuration, 1 runtime failure.
Outputs under OUTPUT: documents/ pairs/ clusters/ deduplicated/ summary.json _SUCCESS
(written to a staging folder and published with one rename when complete)."""


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        metavar="TOML",
        help=f"configuration file (default: {DEFAULT_CONFIG_PATH.name} shipped in conf/, else built-in defaults)",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override one configuration value, e.g. --set match.max_distance=4 (repeatable)",
    )
    p.add_argument(
        "--master",
        help="Spark master for runs outside spark-submit (default: Spark's local[*]); never needed under spark-submit",
    )
    p.add_argument(
        "--remote",
        metavar="sc://HOST:PORT",
        help="run through a Spark Connect server instead of a local or submitted session",
    )
    p.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Spark property for runs outside spark-submit, e.g. --spark-conf spark.driver.memory=2g (repeatable)",
    )
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="simhash_spark",
        description="Find near-duplicate documents in a Parquet corpus with 64-bit SimHash on Spark.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)

    d = sub.add_parser(
        "dedup",
        help="run the dedup job",
        description="Fingerprint every document, join candidates by band keys, keep pairs within "
        "match.max_distance bits, cluster them (connected components) and write the results.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    src = d.add_mutually_exclusive_group(required=True)
    src.add_argument("--input", metavar="PATH", help="Parquet file, directory or glob")
    src.add_argument("--input-table", metavar="TABLE", help="catalog table to read instead of --input")
    d.add_argument(
        "--output", required=True, metavar="PATH", help="output folder (must not exist, see --overwrite)"
    )
    d.add_argument("--overwrite", action="store_true", help="replace an existing output (folder and tables)")
    d.add_argument(
        "--output-table-prefix",
        metavar="PREFIX",
        help="also register the outputs as catalog tables PREFIXdocuments, PREFIXpairs, PREFIXclusters, "
        "PREFIXdeduplicated (external tables over the published folders), e.g. --output-table-prefix dedup.news_",
    )
    _add_common(d)

    m = sub.add_parser(
        "demo",
        help="generate a sample Chinese corpus with planted near-duplicates and run the job on it",
        description="Writes WORKDIR/corpus.parquet (generated, deterministic), runs the job into "
        "WORKDIR/result (replacing it) and prints the summary and a few clusters.",
    )
    m.add_argument("--workdir", default="demo-output", help="folder for the corpus and the result")
    m.add_argument("--docs", type=int, default=2000, help="number of base documents (default 2000)")
    m.add_argument("--seed", type=int, default=7)
    _add_common(m)
    return parser


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)


def _run_dedup(args: argparse.Namespace) -> int:
    from simhash_spark.pipeline import run
    from simhash_spark.session import build_session

    overrides = list(args.overrides)
    if args.overwrite:
        overrides.append("output.overwrite=true")
    cfg = load_config(args.config, overrides)
    spark = build_session(cfg, master=args.master, remote=args.remote, conf=_spark_conf(args.spark_conf))
    summ = run(
        spark,
        cfg,
        output=args.output,
        input_path=args.input,
        input_table=args.input_table,
        output_table_prefix=args.output_table_prefix,
    )
    print(
        json.dumps(
            {
                k: summ[k]
                for k in (
                    "input_rows",
                    "fingerprinted",
                    "pairs_accepted",
                    "clusters",
                    "duplicates",
                    "dedup_rate",
                )
            },
            ensure_ascii=False,
        )
    )
    return 0


def _spark_conf(items: list[str]) -> dict[str, str]:
    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--spark-conf {item!r}: expected KEY=VALUE")
        conf[key.strip()] = value.strip()
    return conf


def _run_demo(args: argparse.Namespace) -> int:
    from simhash_spark.demo.run import run_demo

    cfg = load_config(args.config, [*args.overrides, "output.overwrite=true"])
    run_demo(
        cfg,
        workdir=Path(args.workdir),
        n_docs=args.docs,
        seed=args.seed,
        master=args.master,
        conf=_spark_conf(args.spark_conf),
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _setup_logging(args.log_level)
    try:
        if args.command == "dedup":
            return _run_dedup(args)
        return _run_demo(args)
    except SimhashSparkError as e:
        print(f"simhash_spark: error: {e}", file=sys.stderr)
        return e.exit_code
    except Exception as e:
        from simhash_spark.stages import StageFailed

        log.exception("run failed")
        message = str(e) if isinstance(e, StageFailed) else f"{type(e).__name__}: {essence(e)}"
        print(f"simhash_spark: failed: {message}", file=sys.stderr)
        return 1
