"""The daily Airflow DAG, in a real Airflow installation (``./dev test-airflow`` creates one in
``.venv-airflow``; elsewhere these tests skip). The integration test runs the DAG with ``airflow dags test``
against Spark local mode for three days, the second without a crawl, then the dedup task again as a retry
would."""

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
DAYS = ["2026-11-27", "2026-11-28", "2026-11-29"]


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
    assert [t.task_id for t in dag.topological_sort()] == ["wait_for_input", "dedup", "compact_index"]
    dedup = dag.get_task("dedup")
    from simhash_spark.airflow import SimhashInputSensor, SimhashSparkSubmitOperator

    assert isinstance(dedup, SimhashSparkSubmitOperator)  # the package's operator, not the DAG file's
    assert "--run-date" in dedup.application_args and "{{ ds }}" in dedup.application_args
    assert "--allow-empty-input" in dedup.application_args
    assert dag.max_active_runs == 1 and dedup.retries == 2
    # every day runs, in order: catch up on paused days, a day after the one before it succeeded
    assert dag.catchup is True
    assert all(t.depends_on_past for t in dag.tasks)
    assert dedup.execution_timeout is not None and dag.get_task("compact_index").execution_timeout is not None
    wait = dag.get_task("wait_for_input")
    assert isinstance(wait, SimhashInputSensor) and wait.mode == "reschedule" and wait.timeout > 0
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

    found = re.findall(r"new_state=(\w+)|[Mm]arking task as (\w+)", log)
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


def test_a_missing_partition_is_waited_for_not_failed(fake_submit, tmp_path):
    env, airflow_bin = fake_submit
    env = {**env, "SIMHASH_INPUT_ROOT": str(tmp_path / "corpus")}
    proc = _run([airflow_bin, "tasks", "test", "simhash_dedup_daily", "wait_for_input", DAY], env)
    log = proc.stdout + proc.stderr
    assert f"dt={DAY} is not there yet" in log
    assert _final_state(log) == "up_for_reschedule"
    (tmp_path / "corpus" / f"dt={DAY}").mkdir(parents=True)  # arrived, empty: the job's to accept
    proc = _run([airflow_bin, "tasks", "test", "simhash_dedup_daily", "wait_for_input", DAY], env)
    assert _final_state(proc.stdout + proc.stderr) == "success"


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
    # three days: the first and the third with documents (the third reprints the first's), the second
    # without a crawl (its folder, no file)
    for day in DAYS:
        (tmp / "corpus" / f"dt={day}").mkdir(parents=True)
    subprocess.run(
        [
            project_python,
            "-c",
            "import sys; from pathlib import Path; import pyarrow.parquet as pq; "
            "from simhash_spark.demo.corpus import generate; t = generate(240, seed=4); "
            "pq.write_table(t.slice(0, 120), sys.argv[1]); pq.write_table(t.slice(120), sys.argv[2])",
            str(tmp / "corpus" / f"dt={DAYS[0]}" / "part-0.parquet"),
            str(tmp / "corpus" / f"dt={DAYS[2]}" / "part-0.parquet"),
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
def test_three_days_run_in_order_an_empty_one_included_and_a_retry_adds_nothing_twice(deployment):
    tmp, env, airflow_bin = deployment
    for day in DAYS:
        proc = _run([airflow_bin, "dags", "test", "simhash_dedup_daily", day], env)
        assert proc.returncode == 0, day
    summaries = [json.loads((tmp / "dedup" / f"dt={d}" / "summary.json").read_text()) for d in DAYS]
    first, empty, third = summaries
    assert first["index"]["created"] is True and first["index"]["appended"] == first["fingerprinted"] > 100
    assert empty["input_rows"] == 0 and empty["index"]["appended"] == 0
    assert empty["monitor"]["checked"] is False
    assert third["index"]["batch_documents_matched"] > 0  # the third day's reprints of the first day's
    m = _manifest(tmp / "index")
    assert [r["run_date"] for r in m["runs"]] == DAYS
    assert [r["input_rows"] for r in m["runs"]][1] == 0
    # the empty day's outputs exist, empty, with the job's columns
    for name in ("documents", "pairs", "clusters", "deduplicated"):
        assert (tmp / "dedup" / f"dt={DAYS[1]}" / name).is_dir()
    # a retry of the third day's dedup task: same index content, output replaced
    proc = _run([airflow_bin, "tasks", "test", "simhash_dedup_daily", "dedup", DAYS[2]], env)
    assert proc.returncode == 0
    again = _manifest(tmp / "index")
    assert again["version"] == m["version"] + 1
    assert [s["docs_rows"] for s in again["snapshots"]] == [s["docs_rows"] for s in m["snapshots"]]
    out = tmp / "dedup" / f"dt={DAYS[2]}"
    assert json.loads((out / "summary.json").read_text())["duplicates"] == third["duplicates"]
