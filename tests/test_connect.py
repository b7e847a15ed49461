"""The pipeline runs unchanged through Spark Connect: a local Connect server started from the PySpark
installation, the CLI with --remote, outputs equal to a local-mode run."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pyspark.testing import assertDataFrameEqual

from simhash_spark.cli import main
from simhash_spark.demo.corpus import write_corpus
from tests.test_cluster import free_port

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory):
    pytest.importorskip("grpc", reason="Spark Connect client dependencies (pyspark[connect]) not installed")
    tmp = tmp_path_factory.mktemp("connect")
    port = free_port()
    log = open(tmp / "server.log", "w")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "spark-submit"),
            "--master",
            "local[2]",
            "--class",
            "org.apache.spark.sql.connect.service.SparkConnectServer",
            "--conf",
            f"spark.connect.grpc.binding.port={port}",
            "--conf",
            "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf",
            "spark.sql.shuffle.partitions=4",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.time() + 180
        while "Spark Connect server started" not in (tmp / "server.log").read_text():
            assert proc.poll() is None, (tmp / "server.log").read_text()[-3000:]
            assert time.time() < deadline, "Connect server did not start"
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


# the second case takes the Spark linking steps: locally the band join inside tasks, through Connect (no
# SparkContext to broadcast with) the shuffled one; one fixed design, so both must give the same pairs
@pytest.mark.parametrize(
    "settings", [[], ["--set", "cluster.local_max_documents=0", "--set", "bands.scheme=lsh:30,8"]]
)
def test_pipeline_through_spark_connect_equals_local_mode(spark, connect_server, tmp_path, settings):
    corpus = tmp_path / "corpus.parquet"
    write_corpus(corpus, n_docs=100, seed=13)
    local = tmp_path / "local"
    # through Connect "auto" runs without the sketch bands (no sketches kept): the local run likewise
    no_sketch_bands = ["--set", "match.sketch_bands=false"]
    assert main(["dedup", "--input", str(corpus), "--output", str(local), *settings, *no_sketch_bands]) == 0
    remote = tmp_path / "remote"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "simhash_spark",
            "dedup",
            "--input",
            str(corpus),
            "--output",
            str(remote),
            "--remote",
            connect_server,
            *settings,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (remote / "_SUCCESS").exists()
    assert json.loads((remote / "summary.json").read_text())["config"]["match"]["sketch_bands"] == "false"
    if settings:  # Connect cannot broadcast: the shuffled band join
        joins = [json.loads((out / "summary.json").read_text())["bands"]["join"] for out in (local, remote)]
        assert joins == ["in_task", "shuffled"]
    for name in ("documents", "pairs", "clusters", "deduplicated"):
        assertDataFrameEqual(spark.read.parquet(str(remote / name)), spark.read.parquet(str(local / name)))
