"""A real Spark standalone cluster on 127.0.0.1: master + 2 workers started from the PySpark installation
with a clean environment, the job submitted with spark-submit in client mode and the packed environment
(`./dev package`), outputs compared with a local-mode run."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pyspark.testing import assertDataFrameEqual

from simhash_spark.cli import main
from simhash_spark.demo.corpus import write_corpus

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slow, pytest.mark.cluster]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(tmp: Path) -> dict[str, str]:
    """What a cluster node has: Java, a shell, Spark. No project virtualenv, no PYTHONPATH."""
    import pyspark

    java_home = os.environ.get("JAVA_HOME") or str(Path(shutil.which("java")).resolve().parents[1])
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp),
        "JAVA_HOME": java_home,
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(tmp / "logs"),
    }


@pytest.fixture(scope="module")
def packed_env():
    dist = ROOT / "dist" / "simhash_spark-env.tar.gz"
    subprocess.run(["bash", str(ROOT / "dev"), "package"], check=True, cwd=ROOT, capture_output=True)
    assert dist.exists()
    return dist


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cluster")
    env = clean_env(tmp)
    spark_class = str(Path(env["SPARK_HOME"]) / "bin" / "spark-class")
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    procs = []
    logs = []
    try:
        master_log = open(tmp / "master.log", "w")
        logs.append(master_log)
        procs.append(
            subprocess.Popen(
                [
                    spark_class,
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--webui-port",
                    str(free_port()),
                ],
                env=env,
                stdout=master_log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
        for i in range(2):
            wlog = open(tmp / f"worker{i}.log", "w")
            logs.append(wlog)
            procs.append(
                subprocess.Popen(
                    [
                        spark_class,
                        "org.apache.spark.deploy.worker.Worker",
                        url,
                        "--host",
                        "127.0.0.1",
                        "--cores",
                        "1",
                        "--memory",
                        "1g",
                        "--webui-port",
                        str(free_port()),
                        "--work-dir",
                        str(tmp / f"work{i}"),
                    ],
                    env=env,
                    stdout=wlog,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        deadline = time.time() + 120
        while (tmp / "master.log").read_text().count("Registering worker") < 2:
            assert time.time() < deadline, (tmp / "master.log").read_text()[-2000:]
            time.sleep(0.5)
        yield url, tmp
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
        for f in logs:
            f.close()


def test_spark_submit_on_standalone_cluster_equals_local_mode(spark, cluster, packed_env, tmp_path):
    url, ctmp = cluster
    corpus = tmp_path / "corpus.parquet"
    write_corpus(corpus, n_docs=100, seed=12)
    userdict = tmp_path / "userdict.txt"
    userdict.write_text("城市更新 50000 n\n", encoding="utf-8")
    args = ["--set", f"tokenizer.user_dict_path={userdict}"]
    local = tmp_path / "local"
    assert main(["dedup", "--input", str(corpus), "--output", str(local), *args]) == 0

    out = tmp_path / "cluster-out"
    conf = ("spark.executor.memory=1g", "spark.cores.max=2", "spark.sql.shuffle.partitions=4")
    cmd = [*submit_command(url, packed_env, *conf), str(ROOT / "jobs" / "dedup.py")]
    cmd += ["--input", str(corpus), "--output", str(out), *args]
    proc = subprocess.run(cmd, env=submit_env(), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    # the executors ran on the workers with the packed interpreter
    stderr_logs = "".join(p.read_text(errors="replace") for p in ctmp.glob("work*/app-*/*/stderr"))
    assert stderr_logs, "no executor ran on the workers"
    for name in ("documents", "pairs", "clusters", "deduplicated"):
        assertDataFrameEqual(spark.read.parquet(str(out / name)), spark.read.parquet(str(local / name)))


def submit_command(url: str, packed_env: Path, *conf: str) -> list[str]:
    """spark-submit in client mode with the packed environment on the executors; ``conf``: --conf values."""
    cmd = [str(Path(sys.executable).parent / "spark-submit"), "--master", url, "--deploy-mode", "client"]
    cmd += ["--archives", f"{packed_env}#env"]
    for value in (
        "spark.pyspark.python=./env/bin/python",
        f"spark.pyspark.driver.python={sys.executable}",
        *conf,
    ):
        cmd += ["--conf", value]
    return cmd


def submit_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_GATEWAY", "SPARK_"))}
    env["PYSPARK_PYTHON"] = "./env/bin/python"
    return env


def same_rows(spark, a: Path, b: Path) -> bool:
    left, right = spark.read.parquet(str(a)), spark.read.parquet(str(b))
    return left.exceptAll(right).isEmpty() and right.exceptAll(left).isEmpty()


def test_100k_documents_through_the_spark_steps_with_a_1g_driver(spark, cluster, packed_env, tmp_path):
    """Past one machine: with a 1 GB driver heap, executors in other JVMs and every action's results capped
    at 16 MB (``spark.driver.maxResultSize``: about a tenth of the corpus's text), the defaults run 100k+
    documents through the Spark steps (more than ``cluster.local_max_documents``) — so no stage gathers the
    documents or their texts on the driver — with the outputs of a local-mode run."""
    url, _ = cluster
    corpus = tmp_path / "corpus.parquet"
    rows = write_corpus(corpus, n_docs=62_500, seed=5).num_rows
    assert rows >= 100_000
    out = tmp_path / "cluster-out"
    conf = ("spark.executor.memory=1g", "spark.cores.max=2", "spark.driver.maxResultSize=16m")
    cmd = [*submit_command(url, packed_env, *conf), "--driver-memory", "1g"]
    cmd += [str(ROOT / "jobs" / "dedup.py"), "--input", str(corpus), "--output", str(out)]
    proc = subprocess.run(cmd, env=submit_env(), capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-4000:]

    summary = json.loads((out / "summary.json").read_text())
    assert summary["input_rows"] == summary["fingerprinted"] == rows
    assert summary["fingerprinted_on"] == "executors"
    assert summary["bands"]["join"] != "driver"  # linked by the Spark steps
    assert summary["spark"]["driver_memory"] == "1g"
    assert summary["pairs_accepted"] > 0

    local = tmp_path / "local"
    assert main(["dedup", "--input", str(corpus), "--output", str(local)]) == 0
    for name in ("documents", "pairs", "clusters"):
        assert same_rows(spark, out / name, local / name), name
