"""Real processes: a driver killed with SIGKILL at each step of an incremental run's commit and publish,
then a rerun; and two writers started together on one index or one output, twice each (the hold hooks
make each race the same race: which process reaches its lease first is all that varies)."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from pyspark.testing import assertDataFrameEqual

from simhash_spark.demo.corpus import generate
from tests.test_incremental import DATES, EXACT, incremental, manifest, split_corpus

pytestmark = pytest.mark.slow

OUTPUTS = ("documents", "pairs", "clusters", "deduplicated")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """An index of three days, a published output of day 3 (the output a rerun replaces), and the clean
    result of day 4: its output and its index."""
    tmp = tmp_path_factory.mktemp("world")
    batches = split_corpus(generate(120, seed=5), 4, tmp)
    index = tmp / "index"
    for j in range(3):
        assert incremental(batches[j], tmp / f"out{j}", index, DATES[j]) == 0
    shutil.copytree(index, tmp / "clean_index")
    assert incremental(batches[3], tmp / "clean_out", tmp / "clean_index", DATES[3]) == 0
    return {"tmp": tmp, "batches": batches, "index": index}


def process(args: list[str], env_extra: dict[str, str]) -> subprocess.Popen:
    """The job in its own process group; its output goes to a file (a full pipe would block it), which
    the child holds open and this process closes at once."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, **env_extra}
    with tempfile.NamedTemporaryFile("w", suffix=".stderr", delete=False) as err:
        p = subprocess.Popen(
            [sys.executable, "-m", "simhash_spark", *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
            start_new_session=True,
        )
    p.err_path = err.name  # type: ignore[attr-defined]
    return p


def stderr_of(p: subprocess.Popen) -> str:
    p.wait(timeout=300)
    return Path(p.err_path).read_text("utf-8", errors="replace")  # type: ignore[attr-defined]


def day4_args(world, index: Path, out: Path) -> list[str]:
    return [
        "dedup",
        *["--input", str(world["batches"][3]), "--output", str(out), "--overwrite"],
        *["--index", str(index), "--run-date", DATES[3], *EXACT],
    ]


def wait_for(path: Path, p: subprocess.Popen, what: str) -> None:
    deadline = time.time() + 300
    while not path.exists():
        assert p.poll() is None, stderr_of(p)[-3000:]
        assert time.time() < deadline, f"the run never reached {what}"
        time.sleep(0.1)


def assert_like_the_clean_run(spark, world, index: Path, out: Path) -> None:
    clean = manifest(world["tmp"] / "clean_index")
    got = manifest(index)
    assert [r["run_date"] for r in got["runs"]] == DATES[:4]
    dates = [d for s in got["snapshots"] for d in s["runs"]]
    assert sorted(dates) == DATES[:4]  # each date exactly once
    assert [s["docs_rows"] for s in got["snapshots"]] == [s["docs_rows"] for s in clean["snapshots"]]
    assert sorted(p.name for p in (index / "snapshots").iterdir()) == sorted(
        s["id"] for s in got["snapshots"]
    )
    assert list((index / "_leases").glob("*.json")) == []  # none left behind, not even a killed writer's
    for name in OUTPUTS:
        assertDataFrameEqual(
            spark.read.parquet(str(out / name)), spark.read.parquet(str(world["tmp"] / "clean_out" / name))
        )
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")] == []


STEPS = [
    ("index-snapshot-written", "0"),
    ("index-committing", "0"),
    ("index-committed", "0"),
    ("publish-journal", "0"),
    ("publish-swapped", "0"),
    ("publish-moved-aside", "1"),
    ("publish-swapped", "1"),
]


@pytest.mark.parametrize(("step", "no_exchange"), STEPS, ids=[f"{s}-rename{n}" for s, n in STEPS])
def test_a_driver_killed_at_each_step_then_rerun_gives_the_clean_result(
    spark, world, tmp_path, step, no_exchange
):
    index, out = tmp_path / "index", tmp_path / "out"
    shutil.copytree(world["index"], index)
    shutil.copytree(world["tmp"] / "out2", out)  # the previous output the run replaces
    marker = tmp_path / "paused"
    env = {"SIMHASH_SPARK_PAUSE": f"{step}:{marker}", "SIMHASH_SPARK_NO_EXCHANGE": no_exchange}
    p = process(day4_args(world, index, out), env)
    wait_for(marker, p, step)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    if not (step == "publish-moved-aside" and no_exchange == "1"):
        assert (out / "_SUCCESS").exists()  # a reader finds a complete output at every other step
    rerun = incremental(world["batches"][3], out, index, DATES[3], "--overwrite")
    assert rerun == 0
    assert_like_the_clean_run(spark, world, index, out)


def race(first: list[str], second: list[str], tmp_path: Path) -> list[tuple[int, str]]:
    """Start both runs together, each held once it has passed its lease checks (at the validate stage):
    at most one may get there. Release it when the other has exited."""
    held = [tmp_path / "held_a", tmp_path / "held_b"]
    procs = [
        process(args, {"SIMHASH_SPARK_HOLD": f"validate:{h}"})
        for args, h in zip((first, second), held, strict=True)
    ]
    deadline = time.time() + 300
    while True:
        exited = [p.poll() is not None for p in procs]
        holding = [h.exists() for h in held]
        assert not all(holding), "both writers got past their lease checks"
        if any(exited) and any(holding):
            break
        assert not all(exited), [stderr_of(p)[-2000:] for p in procs]
        assert time.time() < deadline
        time.sleep(0.1)
    for h in held:
        h.unlink(missing_ok=True)
    return [(p.wait(timeout=300), stderr_of(p)) for p in procs]


def test_two_incremental_runs_on_one_index_one_wins_each_time(spark, world, tmp_path):
    for rep in range(2):
        index = tmp_path / f"index{rep}"
        shutil.copytree(world["index"], index)
        outs = [tmp_path / f"a{rep}", tmp_path / f"b{rep}"]
        results = race(day4_args(world, index, outs[0]), day4_args(world, index, outs[1]), tmp_path)
        codes = [c for c, _ in results]
        assert sorted(codes) == [0, 2], results
        winner, loser = (0, 1) if codes[0] == 0 else (1, 0)
        assert "is being written by another process" in results[loser][1]
        assert not outs[loser].exists()
        assert_like_the_clean_run(spark, world, index, outs[winner])


def test_two_full_runs_on_one_output_one_wins_each_time(spark, world, tmp_path):
    out = tmp_path / "out"
    args = ["dedup", "--input", str(world["batches"][3]), "--output", str(out), "--overwrite", *EXACT]
    for _rep in range(2):
        results = race(args, args, tmp_path)
        codes = sorted(c for c, _ in results)
        assert codes == [0, 2], results
        assert any("is being written by another run" in err for _, err in results)
        assert (out / "_SUCCESS").exists()
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.")] == []
    assert (
        spark.read.parquet(str(out / "documents")).count()
        == spark.read.parquet(str(world["tmp"] / "clean_out" / "documents")).count()
    )
