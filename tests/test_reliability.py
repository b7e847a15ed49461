"""Reliability: retried task faults, permanent faults, a killed driver, deterministic reruns."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from pyspark.testing import assertDataFrameEqual

from simhash_spark.cli import main
from simhash_spark.config import load_config
from simhash_spark.demo.corpus import write_corpus
from simhash_spark.pipeline import dedup

OUTPUTS = ("documents", "pairs", "clusters", "deduplicated")
# the faults are injected into the executors' fingerprint tasks: keep this small corpus off the driver path
EXECUTORS_FINGERPRINT = ["--set", "cluster.local_max_characters=0"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("rel") / "corpus.parquet"
    write_corpus(path, n_docs=120, seed=9)
    return path


@pytest.fixture(scope="module")
def baseline(spark, corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("base") / "out"
    assert main(["dedup", "--input", str(corpus), "--output", str(out)]) == 0
    return out


def job(args, env_extra=None, **kw):
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, **(env_extra or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "simhash_spark", "dedup", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def assert_same_outputs(spark, a, b):
    for name in OUTPUTS:
        assertDataFrameEqual(spark.read.parquet(str(a / name)), spark.read.parquet(str(b / name)))


@pytest.mark.slow
def test_task_failing_once_is_retried_with_identical_results(spark, corpus, baseline, tmp_path):
    out = tmp_path / "out"
    p = job(
        ["--input", str(corpus), "--output", str(out), "--master", "local[2,3]", *EXECUTORS_FINGERPRINT],
        {"SIMHASH_SPARK_FAULT": "fingerprint:1:once"},
    )
    _, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    assert "injected fault" in err  # it did fail once
    assert_same_outputs(spark, out, baseline)


@pytest.mark.slow
def test_permanent_task_failure_exits_1_naming_the_stage_and_publishes_nothing(corpus, tmp_path):
    out = tmp_path / "out"
    p = job(
        ["--input", str(corpus), "--output", str(out), "--master", "local[2,2]", *EXECUTORS_FINGERPRINT],
        {"SIMHASH_SPARK_FAULT": "fingerprint:0:always"},
    )
    _, err = p.communicate(timeout=300)
    assert p.returncode == 1
    assert "stage 'fingerprint' failed" in err and "injected fault" in err
    assert not out.exists()
    assert not [x for x in os.listdir(tmp_path) if x.startswith(".out.")], "staging left behind"


@pytest.mark.slow
def test_driver_killed_during_the_join_leaves_previous_output_intact(spark, corpus, baseline, tmp_path):
    out = tmp_path / "out"
    assert main(["dedup", "--input", str(corpus), "--output", str(out)]) == 0
    summary_before = (out / "summary.json").read_text("utf-8")
    marker = tmp_path / "in-join"
    p = job(
        ["--input", str(corpus), "--output", str(out), "--overwrite"],
        {"SIMHASH_SPARK_PAUSE": f"candidates:{marker}"},
        start_new_session=True,
    )
    deadline = time.time() + 240
    while not marker.exists():
        assert p.poll() is None, p.communicate()[1]
        assert time.time() < deadline, "the run never reached the join"
        time.sleep(0.2)
    os.killpg(p.pid, signal.SIGKILL)  # the driver and its JVM and workers, no cleanup
    p.communicate(timeout=60)  # reaps it and closes its pipes
    assert (out / "summary.json").read_text("utf-8") == summary_before
    assert (out / "_SUCCESS").exists()
    assert_same_outputs(spark, out, baseline)
    # the next run succeeds and replaces the output
    assert main(["dedup", "--input", str(corpus), "--output", str(out), "--overwrite"]) == 0
    assert json.loads((out / "summary.json").read_text("utf-8"))["input_rows"] > 0
    assert_same_outputs(spark, out, baseline)


@pytest.mark.parametrize(("partitions", "aqe"), [("2", "false"), ("16", "true"), ("16", "false")])
def test_deterministic_across_partitioning_and_adaptive_execution(spark, corpus, baseline, partitions, aqe):
    before = {k: spark.conf.get(k) for k in ("spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled")}
    spark.conf.set("spark.sql.shuffle.partitions", partitions)
    spark.conf.set("spark.sql.adaptive.enabled", aqe)
    try:
        raw = spark.read.parquet(str(corpus)).repartition(int(partitions))
        # the Spark linking (the baseline ran on the driver path): its results may not depend on partitions
        cfg = load_config(
            overrides=[f"spark.min_fingerprint_partitions={partitions}", "cluster.local_max_documents=0"]
        )
        res = dedup(spark, raw, cfg)
        for name in OUTPUTS:
            got = getattr(res, name)
            assertDataFrameEqual(got, spark.read.parquet(str(baseline / name)))
        res.unpersist()
    finally:
        for k, v in before.items():
            spark.conf.set(k, v)
