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

    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    dag = bag.dags["simhash_dedup_daily"]
    assert [t.task_id for t in dag.topological_sort()] == ["dedup", "compact_index"]
    dedup = dag.get_task("dedup")
    assert type(dedup).__name__ == "SparkSubmitOperator"
    assert "--run-date" in dedup.application_args and "{{ ds }}" in dedup.application_args
    assert dag.max_active_runs == 1 and dedup.retries == 2


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
