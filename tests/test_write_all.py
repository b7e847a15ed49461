"""``io.write_all``: the outputs as concurrent Spark jobs, counted in their stage, failures raised only
once every write has ended."""

from __future__ import annotations

import pytest

from simhash_spark.context import RunContext
from simhash_spark.io import write_all
from simhash_spark.progress import Progress, SparkProbe


def test_concurrent_writes_count_in_the_stage_that_started_them(spark, tmp_path):
    frames = {str(tmp_path / name): spark.range(n) for name, n in (("a", 3), ("b", 5), ("c", 7))}
    ctx = RunContext(Progress(SparkProbe(spark), show=False))
    with ctx.stage("write"):
        write_all(frames)
    assert ctx.stages["write"]["jobs"] == 3  # a thread without the stage's job group would count none
    assert [spark.read.parquet(path).count() for path in frames] == [3, 5, 7]


def test_a_failed_write_is_raised_once_every_other_write_has_ended(spark, tmp_path):
    taken, later = tmp_path / "taken", tmp_path / "later"
    taken.mkdir()
    later.mkdir()
    frames = {
        str(taken): spark.range(3),  # mode "error": fails at once, in the calling thread
        str(tmp_path / "b"): spark.range(5),
        str(later): spark.range(6),  # fails too: the first failure in order is the one raised
        str(tmp_path / "c"): spark.range(7),
    }
    with pytest.raises(Exception, match="taken"):
        write_all(frames)
    # the writes that could succeed are complete when the failure comes out (the caller may now remove
    # their folders without a write still going on in them)
    assert (tmp_path / "b" / "_SUCCESS").exists() and (tmp_path / "c" / "_SUCCESS").exists()
    assert spark.read.parquet(str(tmp_path / "c")).count() == 7
