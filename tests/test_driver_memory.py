"""The heap of the driver JVM a local run starts (simhash_spark/session.py) and the one line a run that ran
out of memory ends with (simhash_spark/cli.py)."""

from __future__ import annotations

import pytest

from simhash_spark import session
from simhash_spark.config import ConfigError, load_config, with_overrides

GiB = 1 << 30


@pytest.mark.parametrize(
    ("available", "memory"),
    [(24 * GiB, "6144m"), (2 * GiB, "1024m"), (6 * GiB, "1536m"), (512 * GiB, "31744m"), (None, "1g")],
)
def test_a_local_driver_gets_a_quarter_of_the_memory_within_bounds(available, memory):
    chosen, why = session.auto_driver_memory(available)
    assert chosen == memory
    assert ("quarter" in why) == (available is not None)


def test_a_container_limit_below_the_machine_sizes_the_heap(monkeypatch):
    monkeypatch.setattr(session, "_cgroup_limit_bytes", lambda: 4 * GiB)
    assert session.machine_memory_bytes() == 4 * GiB
    assert session.auto_driver_memory(session.machine_memory_bytes())[0] == "1024m"


@pytest.fixture
def no_user_settings(monkeypatch, tmp_path):
    for name in ("PYSPARK_SUBMIT_ARGS", "SPARK_DRIVER_MEMORY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "no-conf"))
    monkeypatch.setattr(session, "machine_memory_bytes", lambda: 24 * GiB)


def _chosen(cfg, settings):
    session._local_driver_memory(cfg, settings)
    return settings.get(session.DRIVER_MEMORY), session.started_driver()


def test_the_job_sizes_the_heap_only_when_nobody_else_did(no_user_settings, monkeypatch, tmp_path):
    cfg = load_config()
    memory, started = _chosen(cfg, {})
    assert memory == "6144m" and started is not None and started.memory == "6144m"
    memory, started = _chosen(cfg, {session.DRIVER_MEMORY: "3g"})  # --spark-conf
    assert memory == "3g" and started is not None and started.memory_from == "set by the user"
    for name, value in (
        ("SPARK_DRIVER_MEMORY", "2g"),
        ("PYSPARK_SUBMIT_ARGS", "--driver-memory 2g pyspark-shell"),
    ):
        monkeypatch.setenv(name, value)
        settings: dict[str, str] = {}
        assert _chosen(cfg, settings)[0] is None and session.DRIVER_MEMORY_CHOSEN not in settings, name
        monkeypatch.delenv(name)
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text("spark.driver.memory 5g\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf_dir))
    assert _chosen(cfg, {})[0] is None
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "no-conf"))
    fixed = with_overrides(cfg, {"spark.local_driver_memory": "2g"})
    settings = {}
    assert _chosen(fixed, settings)[0] == "2g"
    assert settings[session.DRIVER_MEMORY_CHOSEN] == "spark.local_driver_memory"


@pytest.mark.parametrize("value", ["lots", "0g", "-1g", "8 g", ""])
def test_a_driver_memory_that_is_not_a_size_is_refused_naming_the_key(value):
    with pytest.raises(ConfigError, match=r"spark\.local_driver_memory"):
        with_overrides(load_config(), {"spark.local_driver_memory": value})


def test_an_out_of_memory_failure_is_one_line_naming_the_setting(no_user_settings):
    from simhash_spark import cli

    session._local_driver_memory(load_config(), {})
    failure = RuntimeError("An error occurred while calling o123.save")
    failure.__cause__ = RuntimeError("java.lang.OutOfMemoryError: Java heap space\n\tat java.util.Arrays...")
    message = cli._out_of_memory(failure)
    assert message is not None and "\n" not in message
    assert "spark.driver.memory=6144m" in message and "nothing was published" in message
    assert cli._out_of_memory(RuntimeError("Py4JJavaError: java.io.IOException: disk full")) is None


def test_a_job_ended_by_spark_stopping_itself_waits_for_the_jvms_exit_code():
    """An OutOfMemoryError in a task makes local-mode Spark stop itself; the job then waiting on it fails
    with a NullPointerException about the stopped context, which names no memory. That is the JVM going
    away: its exit code (52, out of memory) is awaited and read."""
    from types import SimpleNamespace

    from simhash_spark import cli

    class Exiting:
        def poll(self):
            return None

        def wait(self, timeout):
            return cli.JVM_OUT_OF_MEMORY_EXIT

    gateway = SimpleNamespace(proc=Exiting())
    stopped = (
        "Py4JJavaError: An error occurred while calling o1508.collectToPython.\n: java.lang.NullPointerException: "
        'Cannot invoke "org.apache.spark.scheduler.DAGScheduler.cleanupQueryJobs(long)" because the return '
        'value of "org.apache.spark.SparkContext.dagScheduler()" is null'
    )
    assert cli._jvm_exit_code(gateway, [stopped]) == cli.JVM_OUT_OF_MEMORY_EXIT
    assert cli._jvm_exit_code(gateway, ["Py4JJavaError: java.io.IOException: disk full"]) is None


@pytest.mark.slow
def test_a_run_that_runs_out_of_memory_says_so_in_one_line_and_publishes_nothing(tmp_path):
    """A real out-of-memory error: one document of 200 M characters in a 512 MB driver. The run ends with
    one line naming the setting, exit 1; the previous output stays as it was; the JVM, which would have
    written a class archive at exit, leaves nothing in the cache."""
    import os
    import subprocess
    import sys

    import pyarrow as pa
    import pyarrow.parquet as pq

    small, huge = tmp_path / "small.parquet", tmp_path / "huge.parquet"
    texts = ["今天天气很好，我们去公园散步。" * 10, "明天也是好天气，我们去河边钓鱼。" * 10]
    pq.write_table(pa.table({"id": ["a", "b"], "text": texts}), small)
    pq.write_table(pa.table({"id": ["a", "b", "big"], "text": [*texts, "a" * 200_000_000]}), huge)
    cache, out = tmp_path / "cache", tmp_path / "out"
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "PYSPARK_PYTHON": sys.executable}
    env.pop("PYSPARK_SUBMIT_ARGS", None)

    def dedup(corpus, *extra):
        cmd = [sys.executable, "-m", "simhash_spark", "dedup", "--input", str(corpus), "--output", str(out)]
        return subprocess.run([*cmd, *extra], env=env, capture_output=True, text=True, timeout=600)

    assert dedup(small, "--set", "spark.class_archive=off").returncode == 0
    before = (out / "summary.json").read_text(), sorted(p.name for p in out.iterdir())
    failed = dedup(huge, "--overwrite", "--spark-conf", "spark.driver.memory=512m")
    assert failed.returncode == 1, failed.stderr
    last = failed.stderr.strip().splitlines()[-1]
    assert last.startswith("simhash_spark: failed: the Spark JVM ran out of memory (spark.driver.memory=512m")
    assert "Traceback" not in failed.stderr
    assert ((out / "summary.json").read_text(), sorted(p.name for p in out.iterdir())) == before
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left beside it
    assert [p.name for p in (cache / "simhash_spark").iterdir()] == []


def test_an_out_of_memory_error_while_reading_is_not_bad_input():
    """Spark wraps an OutOfMemoryError met while reading a file as a read error of that file: exit 1 with
    the memory line, not exit 2 blaming the input (a scheduler retries 1, not 2)."""
    from simhash_spark.errors import is_unreadable_input

    read = "[FAILED_READ_FILE.NO_HINT] Encountered error while reading file file:///in/part-0.parquet."
    assert is_unreadable_input(RuntimeError(read))
    assert not is_unreadable_input(
        RuntimeError(f"{read}\nCaused by: java.lang.OutOfMemoryError: Java heap space")
    )
