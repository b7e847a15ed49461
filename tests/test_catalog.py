"""Catalog tables with the embedded Hive metastore (Derby): --input-table reads a metastore table,
--output-table-prefix registers the outputs as tables."""

import json
import os
import subprocess
import sys

import pytest
from pyspark.testing import assertDataFrameEqual

from simhash_spark.cli import main
from simhash_spark.demo.corpus import write_corpus

pytestmark = [pytest.mark.slow]

HIVE = ["--spark-conf", "spark.sql.catalogImplementation=hive"]


def hive_python(code: str, cwd, warehouse) -> str:
    """Run code with a Hive-enabled session whose metastore lives in ``cwd`` (metastore_db/)."""
    prelude = (
        "from pyspark.sql import SparkSession\n"
        f"spark = SparkSession.builder.master('local[1]').config('spark.sql.warehouse.dir', {str(warehouse)!r})"
        ".enableHiveSupport().getOrCreate()\n"
    )
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.run(
        [sys.executable, "-c", prelude + code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_read_metastore_table_and_write_outputs_as_tables(spark, tmp_path):
    corpus = tmp_path / "corpus.parquet"
    write_corpus(corpus, n_docs=60, seed=14)
    warehouse = tmp_path / "warehouse"
    hive_python(f"spark.read.parquet({str(corpus)!r}).write.saveAsTable('news_corpus')", tmp_path, warehouse)

    out = tmp_path / "out"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    args = [
        sys.executable,
        "-m",
        "simhash_spark",
        "dedup",
        "--input-table",
        "news_corpus",
        "--output",
        str(out),
        "--output-table-prefix",
        "dedup_",
        *HIVE,
        "--spark-conf",
        f"spark.sql.warehouse.dir={warehouse}",
    ]
    proc = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # a second run refuses to replace the tables without --overwrite, before doing any work
    again = subprocess.run(
        [*args[:7], str(tmp_path / "out2"), *args[8:]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert again.returncode == 2 and "table 'dedup_documents' already exists" in again.stderr

    counts = json.loads(
        hive_python(
            "import json\n"
            "print(json.dumps({t: spark.table('dedup_' + t).count() for t in "
            "('documents', 'pairs', 'clusters', 'deduplicated')}))",
            tmp_path,
            warehouse,
        )
        .strip()
        .splitlines()[-1]
    )

    local = tmp_path / "local"
    assert main(["dedup", "--input", str(corpus), "--output", str(local)]) == 0
    for name in ("documents", "pairs", "clusters", "deduplicated"):
        expected = spark.read.parquet(str(local / name))
        assertDataFrameEqual(spark.read.parquet(str(out / name)), expected)
        assert counts[name] == expected.count()
