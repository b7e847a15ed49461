"""Command line: ``python -m simhash_spark dedup|demo ...`` and ``spark-submit jobs/dedup.py ...``.

Exit codes: 0 success, 2 bad input or configuration, 3 monitoring alert (incremental runs), 1 any other failure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from simhash_spark.config import DEFAULT_CONFIG_PATH, load_config, presets
from simhash_spark.errors import ConfigError, SimhashSparkError, decode_utf8, essence

log = logging.getLogger("simhash_spark")

EPILOG = """exit codes: 0 success, 2 bad input or configuration, 3 dedup rate outside the monitoring band
(incremental runs; nothing published), 1 runtime failure.
Outputs under OUTPUT: documents/ pairs/ clusters/ deduplicated/ summary.json _SUCCESS
(written to a staging folder and published with one rename when complete)."""


def _add_config(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        metavar="TOML",
        help=f"configuration file, or a preset shipped with the package ({', '.join(presets())}; "
        f"default: {DEFAULT_CONFIG_PATH.stem})",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override one configuration value, e.g. --set match.max_distance=4 (repeatable)",
    )


def _add_quiet(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--quiet",
        action="store_true",
        help="no progress on stderr (by default: one updating line on a terminal, else a log line every 30 s "
        "and at each stage's end); the result line on stdout and summary.json are the same",
    )


def _add_common(p: argparse.ArgumentParser) -> None:
    _add_config(p)
    _add_spark(p)


def _add_spark(p: argparse.ArgumentParser) -> None:
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
        prog="simhash-spark",
        description="Find near-duplicate documents in a Parquet corpus with 64-bit SimHash on Spark.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from simhash_spark import __version__

    parser.add_argument("--version", action="version", version=f"simhash-spark {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_dedup(sub)
    _add_demo(sub)
    _add_check(sub)
    _add_index(sub)
    return parser


def _add_dedup(sub: Any) -> None:
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
        "--index",
        metavar="PATH",
        help="incremental run: check the batch against this fingerprint index too (created on first use), "
        "then add the batch to it; documents/ gets matched_index_id",
    )
    d.add_argument(
        "--run-date",
        metavar="YYYY-MM-DD",
        help="with --index: the batch's date (default: today, UTC); rerunning a date replaces its entries "
        "and sees only the entries of earlier dates, as its first run did. With partitioned output tables: "
        "the run_date partition the run replaces",
    )
    d.add_argument(
        "--allow-future-run-date",
        action="store_true",
        help="with --index: accept a --run-date more than one day after today (refused by default: a typo'd "
        "year would enter the index and move retention cutoffs)",
    )
    d.add_argument(
        "--allow-empty-input",
        action="store_true",
        help="an input without rows, or an existing folder without data files (a day without a crawl), is "
        "no error: empty outputs, nothing indexed, the run recorded in the index (input.allow_empty = true)",
    )
    d.add_argument(
        "--rebuild-index",
        action="store_true",
        help="with --index: if the index was built with another fingerprint model or k, refingerprint its "
        "stored texts with this run's settings (committed together with the run)",
    )
    d.add_argument(
        "--output-table-prefix",
        metavar="PREFIX",
        help="also write the outputs to catalog tables PREFIXdocuments, PREFIXpairs, PREFIXclusters, "
        "PREFIXdeduplicated, e.g. --output-table-prefix dedup.news_: external tables over the published "
        "folders, or with output.table_layout = 'partitioned' tables partitioned by run_date (--run-date) "
        "of which a run replaces only its own date",
    )
    _add_quiet(d)
    _add_common(d)


def _add_demo(sub: Any) -> None:
    m = sub.add_parser(
        "demo",
        help="generate a sample Chinese corpus with planted near-duplicates and run the job on it",
        description="Writes WORKDIR/corpus.parquet (generated, deterministic), runs the job into "
        "WORKDIR/result (replacing it) and prints the summary and a few clusters.",
    )
    m.add_argument("--workdir", default="demo-output", help="folder for the corpus and the result")
    m.add_argument("--docs", type=int, default=2000, help="number of base documents (default 2000)")
    m.add_argument("--seed", type=int, default=7)
    _add_quiet(m)
    _add_common(m)


def _add_check(sub: Any) -> None:
    c = sub.add_parser(
        "check",
        help="check texts against a fingerprint index (no Spark)",
        description="For each text: its fingerprint and the indexed documents it duplicates (within k bits "
        "and passing [verify], as the job decides). Texts come from the arguments, --file, or standard "
        "input (one per line). Prints one JSON object per text.",
    )
    c.add_argument("--index", required=True, metavar="PATH")
    c.add_argument("texts", nargs="*", metavar="TEXT")
    c.add_argument("--file", metavar="FILE", help="texts, one per line ('-' = standard input)")
    c.add_argument(
        "--jsonl",
        action="store_true",
        help='lines are JSON objects {"id": ..., "text": ...} instead of plain texts',
    )
    _add_config(c)
    c.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"])


def _add_index(sub: Any) -> None:
    ix = sub.add_parser("index", help="inspect or maintain a fingerprint index")
    ixs = ix.add_subparsers(dest="index_command", required=True)
    st = ixs.add_parser("stats", help="entries, snapshots, runs, size and model of an index (no Spark)")
    st.add_argument("path", metavar="PATH")
    st.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    ve = ixs.add_parser(
        "verify",
        help="check that the index holds what its manifest promises (no Spark); exit 2 if not",
        description="Checks every snapshot the current manifest lists: its contents record, every folder's "
        "files and sizes, every Parquet footer (columns, rows, run dates), and ids stored twice. Prints a "
        "JSON report; exit 0 when the index is whole, 2 when it is damaged.",
    )
    ve.add_argument("path", metavar="PATH")
    ve.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    up = ixs.add_parser(
        "upgrade",
        help="rewrite an index of an earlier format (1-3) as format 4, once",
        description="Checks each snapshot against the manifest (a damaged snapshot is refused, exit 2, and "
        "nothing is changed), rewrites it as format 4 (each entry stored once, a few sorted key tables) under "
        "the index's writer lease, commits the manifest as format 4 and removes the old snapshot folders.",
    )
    up.add_argument("path", metavar="PATH")
    _add_common(up)
    co = ixs.add_parser(
        "compact",
        help="merge older snapshots, optionally dropping old entries",
        description="Merges the snapshots of all but the most recent run dates into one snapshot, or (with "
        "--tier-ratio) the smallest group of like-sized ones (committed atomically; the merged folders are "
        "removed afterwards).",
    )
    co.add_argument("path", metavar="PATH")
    # each option sets its [index] key, validated as the configuration is (index.keep_recent, ...)
    co.add_argument(
        "--keep-recent",
        metavar="N",
        help="run dates left unmerged, so they stay rerunnable (index.keep_recent, default 7)",
    )
    co.add_argument(
        "--retention-days",
        metavar="N",
        help="drop entries whose run date is more than N days before the latest run "
        "(index.retention_days, default 0: keep everything)",
    )
    co.add_argument(
        "--min-snapshots",
        metavar="N",
        help="merge only when at least this many snapshots would be (index.compact_min_snapshots, default 2)",
    )
    co.add_argument(
        "--tier-ratio",
        metavar="R",
        help="0: merge every older snapshot into one; above 1: merge the smallest group of snapshots whose "
        "sizes lie within this ratio (size-tiered; index.compact_tier_ratio, default 0)",
    )
    co.add_argument(
        "--max-drop-fraction",
        metavar="F",
        help="refuse (exit 2) a compaction whose retention would drop more than this fraction of the "
        "entries (index.max_drop_fraction, default 0.5)",
    )
    _add_common(co)


def _to_jvm_stderr(text: str) -> bool:
    """Under spark-submit the Python driver's stderr is merged into spark-submit's stdout (Spark's
    PythonRunner redirects it): there, text for stderr goes through the JVM's ``System.err`` once a
    SparkContext exists. False where it did not."""
    from simhash_spark.session import launched_by_spark_submit

    if not launched_by_spark_submit():
        return False
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    if sc is None or sc._jvm is None:
        return False
    try:
        sc._jvm.System.err.println(text)
        return True
    except Exception:  # the gateway is closing: fall back to the merged stream
        return False


def _error(text: str) -> None:
    if not _to_jvm_stderr(text):
        print(text, file=sys.stderr)


class _StderrHandler(logging.StreamHandler):
    def __init__(self) -> None:
        super().__init__(sys.stderr)

    def emit(self, record: logging.LogRecord) -> None:
        if not _to_jvm_stderr(self.format(record)):
            super().emit(record)


def _setup_logging(level: str) -> None:
    """The job's own log lines, on stderr whoever launched it (stdout carries the result line only); other
    libraries' loggers keep their levels."""
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    log.handlers[:] = [handler]
    log.setLevel(getattr(logging, level))
    log.propagate = False


def _run_dedup(args: argparse.Namespace) -> int:
    from simhash_spark.pipeline import run
    from simhash_spark.session import build_session

    _refuse_empty_values(args, ("input", "input_table", "output", "index", "output_table_prefix", "run_date"))
    overrides = list(args.overrides)
    if args.overwrite:
        overrides.append("output.overwrite=true")
    if args.allow_empty_input:
        overrides.append("input.allow_empty=true")
    cfg = load_config(args.config, overrides)
    run_date = None
    dated_tables = bool(args.output_table_prefix) and cfg.output.table_layout == "partitioned"
    if args.index or dated_tables:
        from simhash_spark.index.session import check_run_date

        given = datetime.now(UTC).date().isoformat() if args.run_date is None else args.run_date
        run_date = check_run_date(given, allow_future=args.allow_future_run_date)
    elif args.run_date is not None or args.allow_future_run_date:
        raise ConfigError(
            "--run-date and --allow-future-run-date need --index or partitioned output tables "
            "(--output-table-prefix with output.table_layout = 'partitioned')"
        )
    if args.rebuild_index and not args.index:
        raise ConfigError("--rebuild-index needs --index")
    _refuse_existing_local_output(args.output, cfg.output.overwrite)
    spark = build_session(cfg, master=args.master, remote=args.remote, conf=_spark_conf(args.spark_conf))
    summ = run(
        spark,
        cfg,
        output=args.output,
        input_path=args.input,
        input_table=args.input_table,
        output_table_prefix=args.output_table_prefix,
        index_path=args.index,
        run_date=run_date,
        rebuild_index=args.rebuild_index,
        show_progress=not args.quiet,
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


def _refuse_empty_values(args: argparse.Namespace, options: Sequence[str]) -> None:
    """An option given an empty value (a scheduler's unset variable) is exit 2 naming it, not taken as
    absent: ``--index ""`` would otherwise run without the index and blame another option."""
    for option in options:
        value = getattr(args, option)
        if value is not None and not str(value).strip():
            raise ConfigError(
                f"--{option.replace('_', '-')}: empty value (is the variable that sets it unset?)"
            )


def _refuse_existing_local_output(output: str, overwrite: bool) -> None:
    """Before starting Spark, where Python can see the path: an output the run may not replace is exit 2
    at once (other file systems are checked as soon as the session is up, by the same rule)."""
    from simhash_spark.publish import refuse_unless_replaceable
    from simhash_spark.storage import FileSystem

    fs = FileSystem(None, output)
    if fs.local:
        refuse_unless_replaceable(fs, output, overwrite)


def _spark_conf(items: list[str]) -> dict[str, str]:
    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--spark-conf {item!r}: expected KEY=VALUE")
        conf[key.strip()] = value.strip()
    return conf


def _decode_lines(data: bytes, source: str) -> list[str]:
    return decode_utf8(data, source, "convert it, e.g. with iconv -f GB18030 -t UTF-8").splitlines()


def _read_lines(args: argparse.Namespace) -> list[str]:
    if args.file and args.file != "-":
        try:
            with open(args.file, "rb") as fh:
                return _decode_lines(fh.read(), f"--file {args.file}")
        except OSError as e:
            raise ConfigError(f"--file {args.file}: {e.strerror}") from None
    if args.file == "-" or not args.texts:
        return _decode_lines(sys.stdin.buffer.read(), "standard input")
    return []


def _json_query(line: str, where: str) -> Any:
    """One ``{"id": ..., "text": ...}`` line: a null text is checked as ``null_text``; anything else that
    is not a string, and an id that is not a string or an integer, is an error naming the line."""
    from simhash_spark.index.check import Query

    try:
        obj = json.loads(line)
    except json.JSONDecodeError:
        obj = None
    if not isinstance(obj, dict) or "text" not in obj:
        raise ConfigError(f'{where}: expected a JSON object with a "text" key')
    text, qid = obj["text"], obj.get("id")
    if text is not None and not isinstance(text, str):
        raise ConfigError(f'{where}: "text" is {type(text).__name__}, expected a string or null')
    if qid is not None and (isinstance(qid, bool) or not isinstance(qid, str | int)):
        raise ConfigError(f'{where}: "id" is {qid!r}, expected a string or an integer')
    return Query(qid, text)


def _read_queries(args: argparse.Namespace) -> list[Any]:
    from simhash_spark.index.check import Query

    queries = [Query(None, t) for t in args.texts]
    source = args.file if args.file and args.file != "-" else "stdin"
    for n, line in enumerate(_read_lines(args), start=1):
        if not line.strip():
            continue
        queries.append(_json_query(line, f"{source} line {n}") if args.jsonl else Query(None, line))
    return queries


def _run_check(args: argparse.Namespace) -> int:
    from simhash_spark.index.check import check

    _refuse_empty_values(args, ("index",))
    cfg = load_config(args.config, args.overrides)
    results, read = check(args.index, cfg, _read_queries(args))
    for r in results:
        print(json.dumps(r, ensure_ascii=False, allow_nan=False))
    log.info("read %s", read)
    return 0


def _run_index(args: argparse.Namespace) -> int:
    _refuse_empty_values(args, ("path",))
    if args.index_command == "stats":
        from simhash_spark.index.admin import stats

        print(json.dumps(stats(args.path), indent=2, ensure_ascii=False))
        return 0
    if args.index_command == "verify":
        from simhash_spark.index.integrity import verify

        report = verify(args.path)
        print(json.dumps(report, indent=2, ensure_ascii=False))
        if not report["ok"]:
            _error(f"simhash_spark: error: index {args.path} is damaged: {report['problems']} problem(s)")
            return 2
        return 0
    if args.index_command == "upgrade":
        from simhash_spark.index.integrity import upgrade
        from simhash_spark.session import build_session

        cfg = load_config(args.config, args.overrides)
        spark = build_session(cfg, master=args.master, remote=args.remote, conf=_spark_conf(args.spark_conf))
        report = upgrade(spark, args.path, lease_timeout_s=cfg.writers.lease_timeout_seconds)
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return 0
    from simhash_spark.index.admin import compact
    from simhash_spark.session import build_session

    try:
        cfg = load_config(args.config, [*args.overrides, *_compact_overrides(args)])
    except ConfigError as e:  # name the option the user typed beside the key it sets
        option = next((o for o, k in _COMPACT_KEYS.items() if str(e).startswith(f"{k}:")), None)
        if option is None or getattr(args, option) is None:
            raise
        raise ConfigError(f"--{option.replace('_', '-')}: {e}") from None
    spark = build_session(cfg, master=args.master, remote=args.remote, conf=_spark_conf(args.spark_conf))
    ix = cfg.index
    report = compact(
        spark,
        args.path,
        keep_recent=ix.keep_recent,
        retention_days=ix.retention_days,
        min_snapshots=ix.compact_min_snapshots,
        tier_ratio=ix.compact_tier_ratio,
        max_drop_fraction=ix.max_drop_fraction,
        lease_timeout_s=cfg.writers.lease_timeout_seconds,
    )
    print(json.dumps(report, indent=2, ensure_ascii=False))
    return 0


_COMPACT_KEYS = {
    "keep_recent": "index.keep_recent",
    "retention_days": "index.retention_days",
    "min_snapshots": "index.compact_min_snapshots",
    "tier_ratio": "index.compact_tier_ratio",
    "max_drop_fraction": "index.max_drop_fraction",
}


def _compact_overrides(args: argparse.Namespace) -> list[str]:
    """``index compact``'s options as the configuration keys they set (checked by the same rules)."""
    out = []
    for option, key in _COMPACT_KEYS.items():
        value = getattr(args, option)
        if value is None:
            continue
        if "\n" in value or "=" in value:
            raise ConfigError(f"--{option.replace('_', '-')} {value!r}: expected a number")
        out.append(f"{key}={value}")
    return out


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
        show_progress=not args.quiet,
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _setup_logging(args.log_level)
    try:
        if args.command == "dedup":
            return _run_dedup(args)
        if args.command == "check":
            return _run_check(args)
        if args.command == "index":
            return _run_index(args)
        return _run_demo(args)
    except SimhashSparkError as e:
        _abandon_class_archive()
        _error(f"simhash_spark: error: {e}")
        return e.exit_code
    except Exception as e:
        from simhash_spark.context import StageFailed

        memory = _out_of_memory(e)
        if memory is None:
            log.exception("run failed")
            message = str(e) if isinstance(e, StageFailed) else f"{type(e).__name__}: {essence(e)}"
        else:
            log.debug("run failed", exc_info=True)
            message = memory
        _abandon_class_archive()
        _error(f"simhash_spark: failed: {message}")
        return 1


# How a Spark JVM exits after an OutOfMemoryError (Spark's SparkExitCode.OOM): local mode ends the driver.
JVM_OUT_OF_MEMORY_EXIT = 52
JVM_EXIT_WAIT_S = 60.0
_JVM_GONE = (
    "SparkContext was shut down",
    '"org.apache.spark.SparkContext.dagScheduler()" is null',  # a job ended after Spark stopped itself
    "Py4JNetworkError",
    "Answer from Java side is empty",
    "Connection refused",
)


def _out_of_memory(e: BaseException) -> str | None:
    """The one line for a run that failed because the driver JVM ran out of memory (an OutOfMemoryError in
    the error, or the JVM gone with Spark's exit code for it); None for any other failure."""
    if "simhash_spark.session" not in sys.modules:  # no session was built
        return None
    from pyspark import SparkContext

    from simhash_spark.session import SPARK_DEFAULT_DRIVER_MEMORY, started_driver

    chain, seen = [], set()
    x: BaseException | None = e
    while x is not None and id(x) not in seen:
        seen.add(id(x))
        chain.append(f"{type(x).__name__}: {x}")
        x = x.__cause__ or x.__context__
    if not any("java.lang.OutOfMemoryError" in text for text in chain) and (
        _jvm_exit_code(SparkContext._gateway, chain) != JVM_OUT_OF_MEMORY_EXIT
    ):
        return None
    started = started_driver()
    if started is None:
        setting = "the driver's and executors' memory as the launcher set them"
    elif started.memory:
        setting = f"spark.driver.memory={started.memory}, {started.memory_from}"
    else:
        setting = (
            f"spark.driver.memory as the launcher set it (Spark's default: {SPARK_DEFAULT_DRIVER_MEMORY})"
        )
    return (
        f"the Spark JVM ran out of memory ({setting}); nothing was published. "
        "Give it more: --spark-conf spark.driver.memory=<size> in local mode, spark-submit's --driver-memory "
        "and --executor-memory on a cluster"
    )


def _jvm_exit_code(gateway: Any, chain: list[str]) -> int | None:
    """The exit code of the driver JVM this process started, once it has ended; when the failure says the
    JVM went away (Spark stops itself before an out-of-memory exit), it is given time to end."""
    proc = getattr(gateway, "proc", None)
    if proc is None:
        return None
    code = proc.poll()
    if code is None and any(sign in text for text in chain for sign in _JVM_GONE):
        with contextlib.suppress(subprocess.TimeoutExpired):
            code = proc.wait(JVM_EXIT_WAIT_S)
    return code if isinstance(code, int) else None


def _abandon_class_archive() -> None:
    """A failed local run leaves no class archive behind (simhash_spark/class_archive.py)."""
    if "simhash_spark.session" in sys.modules:
        from simhash_spark.session import abandon_class_archive_at_exit

        abandon_class_archive_at_exit()
