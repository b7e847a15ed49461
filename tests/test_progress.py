"""Progress on long runs: the lines (fake clock, fake Spark status), the throttle when stderr is not a
terminal, stdout staying one JSON line, summary.json's per-stage numbers, and no extra Spark jobs."""

import io
import json
import logging

from simhash_spark.cli import main
from simhash_spark.config import load_config
from simhash_spark.context import RunContext
from simhash_spark.demo.corpus import write_corpus
from simhash_spark.pipeline import dedup
from simhash_spark.progress import Progress, SparkCounts, SparkProbe, StageProgress, format_line


class FakeProbe:
    available = True

    def __init__(self):
        self.counts_by_stage: dict[str, SparkCounts] = {}
        self.tags: list[str | None] = []

    def tag(self, stage):
        self.tags.append(stage)

    def counts(self, stage):
        return self.counts_by_stage.get(stage, SparkCounts())

    def jobs_so_far(self):
        return 0


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_the_line_says_tasks_rows_rate_elapsed_and_time_left():
    snap = StageProgress("fingerprint", SparkCounts(tasks_done=10, tasks_total=40, rows=12_000), elapsed=10.0)
    assert (
        format_line(snap) == "fingerprint: tasks 10/40, rows 12,000, 1,200 rows/s, elapsed 0:10, left ~0:30"
    )
    done = StageProgress("write", SparkCounts(8, 8, 0), elapsed=3725.0)
    assert format_line(done) == "write: tasks 8/8, elapsed 1:02:05"
    assert (
        format_line(StageProgress("validate", SparkCounts(), 0.4))
        == "validate: no Spark tasks yet, elapsed 0:00"
    )


def test_a_terminal_gets_one_line_rewritten_in_place():
    probe, clock, out = FakeProbe(), FakeClock(), io.StringIO()
    progress = Progress(probe, stream=out, tty=True, clock=clock)
    progress.begin("fingerprint")
    for done in (1, 2, 3):
        clock.now += 1
        probe.counts_by_stage["fingerprint"] = SparkCounts(done, 4, done * 100)
        progress.tick()
    record = progress.end("fingerprint", 3.0)
    text = out.getvalue()
    assert text.count("\r") == 4 and "\n" not in text  # three redraws, one erase
    assert "fingerprint: tasks 3/4, rows 300, 100 rows/s, elapsed 0:03, left ~0:01\x1b[K" in text
    assert text.endswith("\r\x1b[K")
    assert record == {"seconds": 3.0, "tasks": 3, "rows": 300, "jobs": 0} == progress.finished["fingerprint"]
    assert probe.tags == ["fingerprint", None]
    progress.close()


def test_elsewhere_a_log_line_every_30_seconds(caplog):
    probe, clock, out = FakeProbe(), FakeClock(), io.StringIO()
    progress = Progress(probe, stream=out, tty=False, clock=clock, log_every=30)
    caplog.set_level(logging.INFO, logger="simhash_spark.progress")
    progress.begin("candidates")
    for _ in range(70):  # a tick a second for 70 s
        clock.now += 1
        probe.counts_by_stage["candidates"] = SparkCounts(1, 2, 10)
        progress.tick()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and all(m.startswith("progress candidates: tasks 1/2") for m in lines)
    assert out.getvalue() == ""  # nothing written around the log
    progress.close()


def test_stdout_stays_one_json_line_and_summary_has_the_stages(spark, tmp_path, capsys):
    corpus = tmp_path / "c.parquet"
    write_corpus(corpus, n_docs=60, seed=3)
    out = tmp_path / "out"
    assert (
        main(["dedup", "--input", str(corpus), "--output", str(out), "--set", "output.write_report=false"])
        == 0
    )
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 1 and json.loads(printed[0])["input_rows"] > 60
    summary = json.loads((out / "summary.json").read_text())
    stages = summary["stages"]
    assert list(stages)[:3] == ["validate", "fingerprint", "candidates"]
    assert stages["fingerprint"]["tasks"] > 0 and stages["fingerprint"]["rows"] >= 60
    assert stages["fingerprint"]["jobs"] >= 1
    assert summary["spark_jobs"] >= sum(v["jobs"] for v in stages.values()) > 0
    assert all(v["seconds"] > 0 for v in stages.values())


def test_a_second_run_in_one_session_counts_only_its_own_jobs(spark, tmp_path):
    corpus = tmp_path / "c.parquet"
    write_corpus(corpus, n_docs=40, seed=4)
    summaries = []
    for run in ("first", "second"):
        out = tmp_path / run
        args = ["dedup", "--input", str(corpus), "--output", str(out), "--set", "output.write_report=false"]
        assert main(args) == 0
        summaries.append(json.loads((out / "summary.json").read_text()))
    first, second = ({k: v["jobs"] for k, v in s["stages"].items()} for s in summaries)
    assert second == first  # the same plan starts the same jobs; the first run's are not counted again
    assert summaries[1]["spark_jobs"] >= sum(second.values()) > 0


def test_reporting_adds_no_spark_job(spark, tmp_path):
    corpus = tmp_path / "c.parquet"
    write_corpus(corpus, n_docs=60, seed=5)
    cfg = load_config(overrides=["output.write_report=false"])
    scheduler = spark.sparkContext._jsc.sc().dagScheduler()

    def jobs_of_one_run(ctx: RunContext) -> int:
        before = scheduler.nextJobId()
        result = dedup(spark, spark.read.parquet(str(corpus)), cfg, ctx=ctx)
        result.documents.count()
        result.unpersist()
        return scheduler.nextJobId() - before

    quiet = jobs_of_one_run(RunContext())
    shown = jobs_of_one_run(
        RunContext(Progress(SparkProbe(spark), stream=io.StringIO(), tty=True, interval=0.01))
    )
    assert shown == quiet > 5
