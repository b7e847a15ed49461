"""What every benchmark starts from: the shared corpora's folder, the job's own local session, a generated
corpus. Run the benchmarks as modules from the checkout (``.venv/bin/python -m bench.NAME``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from simhash_spark.config import Config

# the real corpora beside the checkout (never copied into it): ../shared/corpora
DEFAULT_CORPORA = Path(__file__).resolve().parents[2] / "shared" / "corpora"


def bench_session(
    overrides: Sequence[str] = (), *, master: str | None = "local[2]", conf: dict[str, str] | None = None
) -> tuple[SparkSession, Config]:
    """The job's configuration with ``overrides`` and the session the job builds for it (its driver heap,
    compiler and class archive), quiet: no progress bars, errors only in the log."""
    from simhash_spark.config import load_config
    from simhash_spark.session import build_session

    cfg = load_config(overrides=list(overrides))
    spark = build_session(cfg, master=master, conf={"spark.ui.showConsoleProgress": "false", **(conf or {})})
    spark.sparkContext.setLogLevel("ERROR")
    return spark, cfg


def generated_corpus(folder: Path, docs: int, seed: int = 11) -> tuple[Path, int]:
    """The demo's generated corpus of ``docs`` documents in ``folder``: (its path, its rows)."""
    from simhash_spark.demo.corpus import write_corpus

    path = folder / "corpus.parquet"
    return path, write_corpus(path, docs, seed=seed).num_rows
