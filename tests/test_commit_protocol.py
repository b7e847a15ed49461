"""The commit protocols on storage, without Spark: create-if-absent, manifest versions, leases, cleanup of
snapshot folders, and the publish journal at every step a kill can interrupt."""

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from simhash_spark.config import load_config
from simhash_spark.core.index_model import IndexLayout, Manifest, RunRecord, Snapshot, model_signature
from simhash_spark.errors import FingerprintIndexError, OutputError
from simhash_spark.index.store import IndexStore
from simhash_spark.lease import Lease, LeaseInfo, read_leases
from simhash_spark.publish import Publisher, recover
from simhash_spark.storage import ArrowFiles, FileSystem


def local_fs(path) -> FileSystem:
    return FileSystem(None, str(path))


def _manifest() -> Manifest:
    return Manifest(
        version=0, model=model_signature(load_config().model, None), layout=IndexLayout(), id_type="string"
    )


def _with_day(m: Manifest, day: str, snap: str) -> Manifest:
    return m.with_run(Snapshot(snap, (day,), 4, 1, "t"), RunRecord(day, snap, 1, 1, 0, 0.0, 0, "t"))


# --- create-if-absent ---------------------------------------------------------------------------------


def test_create_exclusive_never_replaces_a_file(tmp_path):
    fs = local_fs(tmp_path)
    target = str(tmp_path / "v1.json")
    assert fs.create_exclusive(target, "first")
    assert not fs.create_exclusive(target, "second")
    assert (tmp_path / "v1.json").read_text() == "first"
    assert [p.name for p in tmp_path.iterdir()] == ["v1.json"]  # no temporary file left


def test_interleaved_commits_of_one_version_exactly_one_wins(tmp_path):
    """Writer A has written its version file to a temporary name when writer B commits the same version:
    A's link then fails. (With ``os.rename`` A would have replaced B's version silently.)"""
    files = ArrowFiles(str(tmp_path / "idx"))
    store = IndexStore(files, files.root)
    base = _manifest()
    assert store.create(base)
    a = _with_day(base, "2026-01-01", "a")
    b = _with_day(base, "2026-01-02", "b")

    def b_commits_meanwhile():
        IndexStore(ArrowFiles(files.root), files.root).commit(b)

    with pytest.raises(FingerprintIndexError, match="another writer committed version 1 first"):
        store.commit(a, before_link=b_commits_meanwhile)
    assert store.manifest() == b


def test_racing_processes_each_commit_once_and_no_version_is_lost(tmp_path):
    """Several threads commit on top of whatever is current, retrying when they lose: every commit lands in
    its own version and the history holds every writer's day."""
    root = str(tmp_path / "idx")
    store = IndexStore(ArrowFiles(root), root)
    store.create(_manifest())
    lost: list[int] = []

    def writer(i: int) -> None:
        s = IndexStore(ArrowFiles(root), root)
        while True:
            current = s.manifest()
            assert current is not None
            try:
                s.commit(_with_day(current, f"2026-01-{i + 1:02d}", f"s{i}"))
                return
            except FingerprintIndexError:
                lost.append(i)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    final = store.manifest()
    assert final is not None and final.version == 8
    assert sorted(r.run_date for r in final.runs) == [f"2026-01-{i + 1:02d}" for i in range(8)]


def test_hadoop_create_exclusive_refuses_an_existing_version(spark, tmp_path):
    """The path HDFS takes (FileContext.rename with Rename.NONE), exercised on a file: URI."""
    fs = FileSystem(spark, f"file://{tmp_path}", hadoop=True)
    target = f"file://{tmp_path}/v00000001.json"
    assert fs.create_exclusive(target, "first")
    assert not fs.create_exclusive(target, "second")
    assert (tmp_path / "v00000001.json").read_text() == "first"
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".crc")) == ["v00000001.json"]


# --- what is an index -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[]", "not a manifest of this tool"),
        ('{"protocol": {"minReaderVersion": 1}}', "not a manifest of this tool"),
        (None, "not a manifest of this tool"),  # a folder named like a version
    ],
)
def test_unreadable_manifests_are_errors_naming_the_file(tmp_path, content, message):
    version = tmp_path / "_manifest" / "v00000003.json"
    version.parent.mkdir()
    if content is None:
        version.mkdir()
    else:
        version.write_text(content)
    files = ArrowFiles(str(tmp_path))
    with pytest.raises(FingerprintIndexError, match=message) as e:
        IndexStore(files, files.root).manifest()
    assert "v00000003.json" in str(e.value)


def test_snapshots_without_a_manifest_are_refused_and_kept(tmp_path):
    """A partial copy or a lost _manifest/ is not a new index: nothing there may be cleaned."""
    (tmp_path / "snapshots" / "2026-01-01-x").mkdir(parents=True)
    (tmp_path / "_manifest").mkdir()
    files = ArrowFiles(str(tmp_path))
    with pytest.raises(FingerprintIndexError, match="holds snapshots but no manifest version"):
        IndexStore(files, files.root).manifest()
    assert (tmp_path / "snapshots" / "2026-01-01-x").is_dir()


def test_absent_and_empty_folders_and_leftover_leases_are_new_indexes(tmp_path):
    for path in (tmp_path / "absent", tmp_path / "empty", tmp_path / "leases_only"):
        if path.name != "absent":
            path.mkdir()
        if path.name == "leases_only":
            (path / "_leases").mkdir()
            (path / "_leases" / "w.json").write_text("{}")
        files = ArrowFiles(str(path))
        assert IndexStore(files, files.root).manifest() is None


# --- leases and cleanup -----------------------------------------------------------------------------------


def test_the_earlier_live_lease_wins_and_a_dead_writer_is_not_live(tmp_path):
    fs = local_fs(tmp_path)
    first = Lease(fs, str(tmp_path), "", purpose="a", timeout_s=60)
    first.acquire()
    second = Lease(fs, str(tmp_path), "", purpose="b", timeout_s=60)
    second.acquire()
    try:
        assert first.earlier_live() == [] and [i.writer for i in second.earlier_live() if i] == [first.writer]
    finally:
        second.release()
    # a writer on this machine whose process is gone is not live, whatever its heartbeat says
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    ghost = LeaseInfo("ghost", "x", first.info.host, int(dead.stdout), time.time(), time.time(), 3600)
    (tmp_path / "ghost.json").write_text(json.dumps(ghost.__dict__))
    live = {n: is_live for n, _i, is_live in read_leases(fs, str(tmp_path), "", time.time())}
    assert live == {f"{first.writer}.json": True, "ghost.json": False}
    assert first.remove_stale() == ["ghost"] and not (tmp_path / "ghost.json").exists()
    first.release()
    assert not (tmp_path / f"{first.writer}.json").exists()


def test_heartbeat_keeps_a_lease_live_past_its_timeout(tmp_path):
    fs = local_fs(tmp_path)
    lease = Lease(fs, str(tmp_path), "", purpose="long run", timeout_s=1.0)
    lease.acquire()
    try:
        time.sleep(2.5)
        ((_name, info, live),) = read_leases(fs, str(tmp_path), "", time.time())
        assert live and info is not None and time.time() - info.heartbeat < 1.0
    finally:
        lease.release()


def test_cleanup_removes_only_folders_it_can_prove_are_its_own_and_not_being_written(tmp_path):
    fs = local_fs(tmp_path)
    store = IndexStore(fs, str(tmp_path))
    me = Lease(fs, store.leases_dir, "", purpose="me", timeout_s=60)
    other = Lease(fs, store.leases_dir, "", purpose="other", timeout_s=60)
    me.acquire()
    other.acquire()
    try:
        kept = store.new_snapshot("2026-01-01", me.writer)
        replaced = store.new_snapshot("2026-01-02", "an-old-writer")
        failed = store.new_snapshot("2026-01-03", "a-dead-writer")
        in_progress = store.new_snapshot("2026-01-04", other.writer)
        (tmp_path / "snapshots" / "someone-elses").mkdir()
        old = _with_day(_with_day(_manifest(), "2026-01-01", kept), "2026-01-02", replaced)
        new = _with_day(_manifest(), "2026-01-01", kept)
        removed = store.remove_unlisted(new, old, me)
        assert sorted(removed) == sorted([replaced, failed])
        left = sorted(p.name for p in (tmp_path / "snapshots").iterdir())
        assert left == sorted([kept, in_progress, "someone-elses"])
    finally:
        me.release()
        other.release()


# --- publishing ----------------------------------------------------------------------------------------


def _publisher(tmp_path, overwrite=True) -> Publisher:
    return Publisher(local_fs(tmp_path), str(tmp_path / "out"), overwrite=overwrite, timeout_s=60)


def _complete(pub: Publisher, marker: str) -> None:
    pub.fs.mkdirs(pub.path("documents"))
    pub.write_text("documents/part-0", marker)


def _state(tmp_path) -> tuple[str | None, list[str]]:
    out = tmp_path / "out" / "documents" / "part-0"
    return (out.read_text() if out.exists() else None), sorted(
        p.name for p in tmp_path.iterdir() if p.name != "out"
    )


def _previous_output(tmp_path) -> None:
    pub = _publisher(tmp_path, overwrite=False)
    pub.prepare()
    _complete(pub, "old")
    pub.publish()


KILL_STEPS = [
    (True, "publish-journal"),
    (True, "publish-swapped"),  # an exchange has no moved-aside step
    (False, "publish-journal"),
    (False, "publish-moved-aside"),
    (False, "publish-swapped"),
]


@pytest.mark.parametrize(("exchange", "step"), KILL_STEPS)
def test_a_publish_killed_at_any_step_is_finished_by_the_next_run(tmp_path, monkeypatch, exchange, step):
    """The kill is simulated by stopping the publish at ``step`` and dropping the run's lease as a dead
    process's would be; the next run's ``recover`` must leave the new output in place, nothing beside it."""
    _previous_output(tmp_path)
    monkeypatch.setenv("SIMHASH_SPARK_NO_EXCHANGE", "0" if exchange else "1")

    class Killed(BaseException):
        pass

    def stop_at(stage):
        if stage == step:
            raise Killed

    monkeypatch.setattr("simhash_spark.publish.maybe_pause", stop_at)
    pub = _publisher(tmp_path)
    pub.prepare()
    _complete(pub, "new")
    with pytest.raises(Killed):
        pub.publish()
    pub.lease._stop.set()
    os.remove(pub.lease.path)  # the process died: its lease goes with it
    seen, _ = _state(tmp_path)
    if exchange or step != "publish-moved-aside":
        assert seen in ("old", "new")  # a reader never finds the output missing
    actions = recover(local_fs(tmp_path), str(tmp_path / "out"))
    assert actions and "interrupted publish" in actions[0]
    assert _state(tmp_path) == ("new", [])


def test_an_incomplete_staging_is_removed_only_when_its_writer_is_gone(tmp_path):
    _previous_output(tmp_path)
    live = _publisher(tmp_path)
    live.prepare()
    _complete(live, "half")
    assert recover(local_fs(tmp_path), str(tmp_path / "out")) == []
    assert os.path.isdir(live.staging)
    live.lease._stop.set()
    os.remove(live.lease.path)
    (action,) = recover(local_fs(tmp_path), str(tmp_path / "out"))
    assert "removed the staging folder" in action
    assert _state(tmp_path) == ("old", [])


def test_a_second_writer_of_one_output_gives_way_before_any_work(tmp_path):
    first = _publisher(tmp_path)
    first.prepare()
    second = _publisher(tmp_path)
    with pytest.raises(OutputError, match="being written by another run"):
        second.prepare()
    assert not os.path.exists(second.staging) and not os.path.exists(second.lease.path)
    first.abort()
    assert _state(tmp_path) == (None, [])
