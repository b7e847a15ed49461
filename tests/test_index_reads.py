"""Reading the index's partition folders with Spark (``index.snapshots.read_folders``)."""

import time
import uuid

import pyarrow as pa
import pyarrow.parquet as pq

from simhash_spark.index.snapshots import read_folders

LISTING_TASKS = "spark.sql.sources.parallelPartitionDiscovery.parallelism"


def _tasks_of_group(spark, group: str) -> list[int]:
    """Tasks per stage of the jobs of ``group``, once the status store has them."""
    tracker = spark.sparkContext.statusTracker()
    for _ in range(100):
        stages = [
            tracker.getStageInfo(sid)
            for job in tracker.getJobIdsForGroup(group)
            for sid in tracker.getJobInfo(job).stageIds
        ]
        if stages and all(s is not None for s in stages):
            return [s.numTasks for s in stages]
        time.sleep(0.1)
    return []


def test_many_folders_are_listed_by_as_many_tasks_as_there_are_cores(spark, tmp_path):
    """A small batch against an index of many tables reads hundreds of partition folders: Spark would list
    them with one task per folder; the index lists them with at most one task per core."""
    folders = []
    for part in range(40):  # more than Spark's threshold (32) for listing in a job
        folder = tmp_path / f"part={part}"
        folder.mkdir()
        pq.write_table(pa.table({"id": [part], "key": [part * 7]}), folder / "rows.parquet")
        folders.append(str(folder))
    sc = spark.sparkContext
    group = f"listing-{uuid.uuid4().hex}"
    sc.setJobGroup(group, "listing")
    try:
        rows = read_folders(spark, folders)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    tasks = _tasks_of_group(spark, group)
    assert tasks and max(tasks) <= sc.defaultParallelism < len(folders), tasks
    assert sorted(r["id"] for r in rows.collect()) == list(range(40))
    assert spark.conf.get(LISTING_TASKS, None) in (None, "10000")  # the session's setting is left as it was
