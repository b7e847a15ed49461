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


DAYS_SCRIPT = """
import json, sys
from simhash_spark.cli import main
root, warehouse = sys.argv[1], sys.argv[2]
common = ["--output-table-prefix", "daily.news_", "--set", "output.table_layout=partitioned",
          "--spark-conf", "spark.sql.catalogImplementation=hive",
          "--spark-conf", f"spark.sql.warehouse.dir={warehouse}", "--quiet"]
runs = [("2026-11-01", "c1"), ("2026-11-02", "c2"), ("2026-11-03", "c3"), ("2026-11-02", "c4")]
for i, (day, corpus) in enumerate(runs):
    code = main(["dedup", "--input", f"{root}/{corpus}.parquet", "--output", f"{root}/out{i}", "--run-date", day,
                 "--overwrite", *common])
    assert code == 0, (day, corpus)
from pyspark.sql import SparkSession
spark = SparkSession.getActiveSession()
counts = {}
for name in ("documents", "pairs", "clusters", "deduplicated"):
    rows = spark.table("daily.news_" + name).groupBy("run_date").count().collect()
    counts[name] = {r["run_date"]: r["count"] for r in rows}
    counts[name]["folders"] = [spark.read.parquet(f"{root}/out{i}/{name}").count() for i in range(4)]
print(json.dumps(counts))
"""


def test_partitioned_tables_in_the_hive_metastore_over_three_dates_and_a_rerun(tmp_path):
    warehouse = tmp_path / "warehouse"
    rows = [
        write_corpus(tmp_path / f"c{i}.parquet", n_docs=n, seed=seed).num_rows
        for i, (n, seed) in enumerate([(40, 1), (50, 2), (30, 3), (20, 4)], start=1)
    ]
    hive_python("spark.sql('CREATE DATABASE daily')", tmp_path, warehouse)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.run(
        [sys.executable, "-c", DAYS_SCRIPT, str(tmp_path), str(warehouse)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = json.loads(proc.stdout.strip().splitlines()[-1])
    # one documents row per input row, so the rerun of 11-02 (corpus c4) is told apart from its first run (c2)
    assert counts["documents"]["folders"] == rows and rows[1] != rows[3]
    for name, by_date in counts.items():
        folders = by_date.pop("folders")
        # 11-01 and 11-03 as their runs wrote them; 11-02 as the rerun (out3) wrote it, not the first run
        assert by_date == {"2026-11-01": folders[0], "2026-11-02": folders[3], "2026-11-03": folders[2]}, name
    assert (warehouse / "daily.db" / "news_documents" / "run_date=2026-11-02").is_dir()
