"""The daily Airflow DAG, in a real Airflow installation (``./dev test-airflow`` creates one in
``.venv-airflow``; elsewhere these tests skip). The integration test runs the DAG once with
``airflow dags test`` against Spark local mode, then the dedup task again as a retry would."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

airflow = pytest.importorskip(
    "airflow", reason="Airflow is not installed here (./dev test-airflow installs it)"
)

ROOT = Path(__file__).resolve().parents[1]
DAGS = ROOT / "dags"
DAY = "2026-11-29"


def test_dag_loads_without_import_errors():
    try:  # Airflow 3
        from airflow.dag_processing.dagbag import DagBag
    except ImportError:  # Airflow 2
        from airflow.models.dagbag import DagBag

    try:  # Airflow 2 adds its example DAGs unless told not to
        bag = DagBag(dag_folder=str(DAGS), include_examples=False)
    except TypeError:  # Airflow 3: no example DAGs in a DagBag
        bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    dag = bag.dags["simhash_dedup_daily"]
    assert [t.task_id for t in dag.topological_sort()] == ["dedup", "compact_index"]
    dedup = dag.get_task("dedup")
    assert type(dedup).__name__ == "SimhashSparkSubmitOperator"
    assert "--run-date" in dedup.application_args and "{{ ds }}" in dedup.application_args
    assert dag.max_active_runs == 1 and dedup.retries == 2
    # settings are templates read when the task runs, not Variable lookups while the file is parsed
    assert "{{ var.value.get('SIMHASH_INPUT_ROOT'" in dedup.application_args[1]
    assert "Variable.get" not in (DAGS / "simhash_dedup_daily.py").read_text()


@pytest.fixture
def fake_submit(tmp_path):
    """An Airflow home and a ``spark-submit`` on PATH that prints its arguments and exits with $FAKE_EXIT."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "spark-submit"
    script.write_text('#!/bin/sh\necho "fake spark-submit $*" >&2\nexit "$FAKE_EXIT"\n')
    script.chmod(0o755)
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path / "home"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "SIMHASH_INPUT_ROOT": "/env/input",
        "SIMHASH_OUTPUT_ROOT": "/env/output",
        "SIMHASH_INDEX": "/env/index",
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
    }
    airflow_bin = str(Path(sys.executable).parent / "airflow")
    subprocess.run([airflow_bin, "db", "migrate"], env=env, check=True, capture_output=True)
    return env, airflow_bin


def _final_state(log: str) -> str | None:
    """The task instance's state after the run, from Airflow 3's or Airflow 2's log line."""
    import re

    found = re.findall(r"new_state=(\w+)|Marking task as (\w+)", log)
    return (found[-1][0] or found[-1][1]).lower() if found else None


@pytest.mark.parametrize(
    ("code", "state", "alarm"), [(1, "up_for_retry", False), (2, "failed", False), (3, "failed", True)]
)
def test_exit_codes_2_and_3_fail_without_retry_exit_1_retries(fake_submit, code, state, alarm):
    env, airflow_bin = fake_submit
    proc = _run(
        [airflow_bin, "tasks", "test", "simhash_dedup_daily", "dedup", DAY], {**env, "FAKE_EXIT": str(code)}
    )
    log = proc.stdout + proc.stderr
    assert f"Error code is: {code}" in log
    assert _final_state(log) == state
    assert ("SIMHASH_MONITOR_ALARM" in log) is alarm


def test_an_airflow_variable_wins_over_the_environment_when_the_task_runs(fake_submit):
    env, airflow_bin = fake_submit
    subprocess.run(
        [airflow_bin, "variables", "set", "SIMHASH_INPUT_ROOT", "/from/variable"],
        env=env,
        check=True,
        capture_output=True,
    )
    proc = _run(
        [airflow_bin, "tasks", "test", "simhash_dedup_daily", "dedup", DAY], {**env, "FAKE_EXIT": "0"}
    )
    log = proc.stdout + proc.stderr
    assert f"--input /from/variable/dt={DAY}" in log  # the Variable, read at run time
    assert f"--output /env/output/dt={DAY}" in log  # no Variable: the environment's value
    assert "--config default" in log


def test_an_unset_index_setting_fails_the_task_naming_it_before_submitting(fake_submit):
    env, airflow_bin = fake_submit
    proc = _run(
        [airflow_bin, "tasks", "test", "simhash_dedup_daily", "dedup", DAY],
        {**env, "SIMHASH_INDEX": "", "FAKE_EXIT": "0"},
    )
    log = proc.stdout + proc.stderr
    assert "SIMHASH_INDEX not set" in log and "fake spark-submit" not in log
    assert _final_state(log) == "failed"


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    """An Airflow home with its database, a Spark connection to local[2], and a corpus partition."""
    project_python = os.environ.get("SIMHASH_PYTHON")
    if not project_python:
        pytest.skip("SIMHASH_PYTHON (the project's venv python with pyspark) is not set")
    tmp = tmp_path_factory.mktemp("airflow")
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp / "home"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "SIMHASH_INPUT_ROOT": str(tmp / "corpus"),
        "SIMHASH_OUTPUT_ROOT": str(tmp / "dedup"),
        "SIMHASH_INDEX": str(tmp / "index"),
        "SIMHASH_SPARK_CONF": json.dumps({"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false"}),
        "PYSPARK_PYTHON": project_python,
        "PYSPARK_DRIVER_PYTHON": project_python,
        # spark-submit comes with the project's pyspark
        "PATH": f"{Path(project_python).parent}{os.pathsep}{os.environ['PATH']}",
    }
    part = tmp / "corpus" / f"dt={DAY}"
    part.mkdir(parents=True)
    subprocess.run(
        [
            project_python,
            "-c",
            "import sys; from pathlib import Path; from simhash_spark.demo.corpus import write_corpus; "
            "write_corpus(Path(sys.argv[1]), n_docs=120, seed=4)",
            str(part / "part-0.parquet"),
        ],
        check=True,
    )
    airflow_bin = str(Path(sys.executable).parent / "airflow")
    subprocess.run([airflow_bin, "db", "migrate"], env=env, check=True, capture_output=True)
    return tmp, env, airflow_bin


def _run(cmd, env):
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    print(proc.stdout[-4000:])
    print(proc.stderr[-4000:], file=sys.stderr)
    return proc


def _manifest(index: Path) -> dict:
    return json.loads(sorted((index / "_manifest").glob("v*.json"))[-1].read_text())


@pytest.mark.slow
def test_the_dag_runs_the_job_and_a_retry_adds_nothing_twice(deployment):
    tmp, env, airflow_bin = deployment
    proc = _run([airflow_bin, "dags", "test", "simhash_dedup_daily", DAY], env)
    assert proc.returncode == 0
    out = tmp / "dedup" / f"dt={DAY}"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["index"]["run_date"] == DAY and summary["index"]["created"] is True
    assert summary["index"]["appended"] == summary["fingerprinted"] > 100
    first = _manifest(tmp / "index")
    assert [r["run_date"] for r in first["runs"]] == [DAY]
    # a retry of the dedup task: same day, same index content, output replaced
    proc = _run([airflow_bin, "tasks", "test", "simhash_dedup_daily", "dedup", DAY], env)
    assert proc.returncode == 0
    again = _manifest(tmp / "index")
    assert again["version"] == first["version"] + 1
    assert [s["docs_rows"] for s in again["snapshots"]] == [s["docs_rows"] for s in first["snapshots"]]
    assert json.loads((out / "summary.json").read_text())["duplicates"] == summary["duplicates"]
