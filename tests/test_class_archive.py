"""The driver JVM's class archive (simhash_spark/class_archive.py): a run uses an archive only once a
separate JVM has mapped it with -Xshare:on; one run at a time writes it; keys follow what the archive
depends on. Archives here are written by a bare `java -version`, not Spark (which takes seconds)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simhash_spark import class_archive as ca
from simhash_spark.config import ConfigError, load_config, with_overrides


@pytest.fixture
def jars(tmp_path: Path) -> Path:
    folder = tmp_path / "jars"
    folder.mkdir()
    (folder / "spark-core.jar").write_bytes(b"jar one")
    return folder


def _java() -> Path:
    java = ca.java_executable()
    if java is None:
        pytest.skip("no java")
    return java


def _write_archive(plan: ca.Plan, classpath: str) -> subprocess.Popen:
    """What the writing run's JVM does: archive the classes it loaded when it exits. Returns the
    finished process (its pid is the writer's)."""
    assert plan.state == "writing"
    proc = subprocess.Popen(
        [str(_java()), *plan.options.split(), "-cp", classpath, "-version"], stderr=subprocess.DEVNULL
    )
    proc.wait(60)
    return proc


def _until_named(pid: int, marker: str) -> None:
    """Until process ``pid`` has exec'd: a forked child shows its parent's command line."""
    deadline = time.time() + 10
    while marker not in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"):
        assert time.time() < deadline
        time.sleep(0.01)


def test_first_run_writes_then_later_runs_use_the_checked_archive(tmp_path, jars):
    cache = tmp_path / "cache"
    first = ca.plan(cache, jars, "")
    assert (
        first.state == "writing" and first.path is not None and "-XX:ArchiveClassesAtExit=" in first.options
    )
    writer = _write_archive(first, str(tmp_path))
    ca.record_writer(first, writer.pid, str(tmp_path))
    second = ca.plan(cache, jars, "")
    assert second.state == "using" and second.path == cache / f"{first.path.name.split('.')[0]}.jsa"
    assert f"-XX:SharedArchiveFile={second.path}" in second.options and "-Xlog:cds=off" in second.options
    sealed = [second.path.name, second.path.name + ".sum"]
    assert sorted(p.name for p in cache.iterdir()) == sealed  # temp, record and lock gone; size and checksum
    assert ca.plan(cache, jars, "").state == "using"
    # a run that wrote the same archive in a race: its copy is cleared, the archive in place kept
    racer = cache / f"{second.path.stem}.77.tmp"
    racer.write_bytes(b"a whole archive, as good as the first")
    ca.record_writer(ca.Plan("writing", "", racer), writer.pid, str(tmp_path))
    assert ca.plan(cache, jars, "").state == "using"
    assert sorted(p.name for p in cache.iterdir()) == sealed


def test_a_truncated_archive_is_dropped_not_used(tmp_path, jars, monkeypatch):
    """A JVM crashes on a truncated archive even in its default sharing mode: one is never renamed
    into place (the writer was killed while dumping, or the disk filled), and the checking JVM's crash
    leaves no report behind, in the working directory or the cache."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    cache = tmp_path / "cache"
    first = ca.plan(cache, jars, "")
    writer = _write_archive(first, str(tmp_path))
    assert first.path is not None
    whole = first.path.read_bytes()
    first.path.chmod(0o644)
    first.path.write_bytes(whole[: len(whole) // 3])
    ca.record_writer(first, writer.pid, str(tmp_path))
    again = ca.plan(cache, jars, "")
    assert again.state == "writing" and not first.path.exists()
    assert not list(cache.glob("*.jsa"))
    assert list(work.iterdir()) == [] and not list(cache.glob("*.log"))


def test_a_run_writing_the_archive_keeps_others_from_writing_it(tmp_path, jars):
    cache = tmp_path / "cache"
    first = ca.plan(cache, jars, "")
    assert first.path is not None
    # a live process whose command line names the temporary archive, as the writing JVM's does
    jvm = subprocess.Popen(["sh", "-c", "sleep 30", str(first.path)])
    deadline = time.time() + 10  # until it has exec'd: a forked child shows its parent's command line
    while str(first.path) not in Path(f"/proc/{jvm.pid}/cmdline").read_text(errors="replace"):
        assert time.time() < deadline
        time.sleep(0.01)
    try:
        ca.record_writer(first, jvm.pid, str(tmp_path))
        assert ca.plan(cache, jars, "").state == "busy"
    finally:
        jvm.kill()
        jvm.wait()
    # gone without writing anything: the record is cleared and the next run writes
    nxt = ca.plan(cache, jars, "")
    assert nxt.state == "writing" and not list(cache.glob("*.json"))


def test_unrecorded_temporary_archives_go_once_no_process_names_them(tmp_path, jars):
    """A run that failed before recording its writer leaves a temporary: it goes at the next run, unless a
    live process names it (a JVM still writing it)."""
    cache = tmp_path / "cache"
    plan = ca.plan(cache, jars, "")
    assert plan.path is not None
    stray = cache / f"{plan.path.name.split('.')[0]}.999.tmp"
    stray.write_bytes(b"half an archive")
    writer = subprocess.Popen(["sh", "-c", "sleep 30", str(stray)])
    try:
        _until_named(writer.pid, str(stray))
        assert ca.plan(cache, jars, "").state == "busy" and stray.exists()
    finally:
        writer.kill()
        writer.wait()
    assert ca.plan(cache, jars, "").state == "writing" and not stray.exists()


def test_dead_writers_temporaries_of_other_keys_are_settled_at_once(tmp_path, jars):
    """Another heap size or environment gives another key: its temporaries do not wait for a run of
    their own key. A complete one is checked and kept, a broken one removed."""
    cache = tmp_path / "cache"
    other = ca.plan(cache, jars, "64g")
    writer = _write_archive(other, str(tmp_path))
    ca.record_writer(other, writer.pid, str(tmp_path))
    broken = cache / "0123456789abcdef.4242.tmp"
    broken.write_bytes(b"not an archive")
    ca.record_writer(ca.Plan("writing", "", broken), writer.pid, str(tmp_path))
    assert other.path is not None
    mine = ca.plan(cache, jars, "")
    assert mine.state == "writing" and mine.path is not None
    kept = f"{other.path.name.split('.')[0]}.jsa"
    lock = f"{mine.path.name.split('.')[0]}.lock"  # this run writes its own key's
    assert sorted(p.name for p in cache.iterdir()) == sorted([kept, kept + ".sum", lock])


def test_a_failed_run_leaves_no_archive(tmp_path, jars):
    """abandon ends the writing JVM before it exits on its own, so it writes nothing, and clears its
    record. (The same JVM ended normally writes the archive: the first test.)"""
    source = tmp_path / "Wait.java"
    source.write_text(
        "public class Wait { public static void main(String[] a) throws Exception { Thread.sleep(60000); } }"
    )
    cache = tmp_path / "cache"
    plan = ca.plan(cache, jars, "")
    assert plan.state == "writing" and plan.path is not None
    jvm = subprocess.Popen(
        [str(_java()), *plan.options.split(), str(source)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _until_named(jvm.pid, str(plan.path))
        ca.record_writer(plan, jvm.pid, str(tmp_path))
        ca.abandon(plan, jvm.pid)
        assert jvm.wait(30) == -signal.SIGKILL  # ended before it could write
    finally:
        jvm.kill()
    assert list(cache.iterdir()) == []


def test_the_key_follows_what_the_archive_depends_on(tmp_path, jars):
    java = _java()
    release = ca.java_release(java)
    key = ca.archive_key(java, release, jars, "")
    assert ca.archive_key(java, release, jars, "") == key
    assert ca.archive_key(java, release, jars, "64g") != key  # another heap layout
    assert ca.archive_key(java, {**release, "JAVA_VERSION": "21.0.1"}, jars, "") != key
    (jars / "spark-sql.jar").write_bytes(b"jar two")  # another Spark
    assert ca.archive_key(java, release, jars, "") != key


def _sealed(final: Path, content: bytes = b"x") -> None:
    """An archive as a checked writer leaves it: its size and checksum beside it."""
    staged = final.with_name(final.name + ".staged")
    staged.write_bytes(content)
    ca.seal(staged, final)


def _key(jars: Path) -> str:
    java = _java()
    return ca.archive_key(java, ca.java_release(java), jars, "")


@pytest.mark.parametrize("damage", ["truncated", "bits-flipped", "no-record"])
def test_an_archive_changed_since_it_was_checked_is_removed_not_mapped(tmp_path, jars, damage):
    """A full disk, a bad copy or a bit flip after the archive was checked: the JVM would crash mapping
    it (JAVA_GATEWAY_EXITED, every later run too). Its size and checksum no longer match: removed, and
    the run starts without it (and writes it again)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    final = cache / f"{_key(jars)}.jsa"
    _sealed(final, bytes(range(256)) * 64)
    if damage == "truncated":
        final.write_bytes(final.read_bytes()[:1000])
    elif damage == "bits-flipped":
        data = bytearray(final.read_bytes())
        data[5000] ^= 0x41
        final.write_bytes(bytes(data))
    else:
        final.with_name(final.name + ".sum").unlink()  # an archive of an earlier version, never recorded
    again = ca.plan(cache, jars, "")
    assert again.state == "writing" and not final.exists()
    assert not final.with_name(final.name + ".sum").exists()
    _sealed(final, b"whole")
    assert ca.plan(cache, jars, "").state == "using"  # a whole one is mapped


def test_one_run_writes_the_archive_at_a_time_and_a_dead_writers_lock_is_taken_over(tmp_path, jars):
    """Runs started together on an empty cache: one writes, the others run without (each wrote a 190 MB
    temporary before). A lock whose process is gone does not hold the archive back."""
    cache = tmp_path / "cache"
    # each racer, as a run, lives on after it planned (until told to end)
    code = (
        "import sys; from pathlib import Path; from simhash_spark import class_archive as ca; "
        "print(ca.plan(Path(sys.argv[1]), Path(sys.argv[2]), '').state, flush=True); sys.stdin.read()"
    )
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(cache), str(jars)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    states = sorted(p.stdout.readline().strip() for p in racers if p.stdout is not None)
    for p in racers:
        p.communicate(timeout=60)
    assert states == ["busy", "busy", "busy", "writing"], states
    # the winner's process is gone, its JVM never recorded: the next run takes the lock over and writes
    assert ca.plan(cache, jars, "").state == "writing"
    holder = subprocess.Popen(["sleep", "30"])
    try:
        lock = cache / f"{_key(jars)}.lock"
        lock.write_text(json.dumps({"pid": holder.pid}))
        assert ca.plan(cache, jars, "").state == "busy"  # a live holder
    finally:
        holder.kill()
        holder.wait()
    assert ca.plan(cache, jars, "").state == "writing"


def test_a_driver_jvm_that_fails_with_its_archive_starts_again_without_it(tmp_path, jars, monkeypatch, spark):
    """Whatever the checks let through: a JVM that does not start with the archive is started again
    without it, and the archive removed, so the next run does not fail the same way."""
    from pyspark.sql import SparkSession

    from simhash_spark import session

    final = tmp_path / "cache" / "0123456789abcdef.jsa"
    final.parent.mkdir()
    _sealed(final)
    plan = ca.Plan("using", f"-XX:SharedArchiveFile={final}", final)
    monkeypatch.setattr(session, "_jvm_running", lambda: True)
    monkeypatch.setattr(session, "_starts_driver_jvm", lambda settings: True)
    monkeypatch.setattr(session, "_class_archive", lambda cfg, memory: plan)
    started: list[str] = []
    original = SparkSession.Builder.getOrCreate

    def get_or_create(builder):
        options = builder._options.get(session.JAVA_OPTIONS, "")
        started.append(options)
        if "SharedArchiveFile" in options:
            raise RuntimeError("[JAVA_GATEWAY_EXITED] Java gateway process exited before sending its port")
        return original(builder)

    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", get_or_create)
    assert session.build_session(load_config()) is spark
    assert len(started) == 2 and "SharedArchiveFile" not in started[1]
    assert not final.exists() and not final.with_name(final.name + ".sum").exists()


def test_only_the_most_recently_used_archives_are_kept(tmp_path, jars):
    cache = tmp_path / "cache"
    cache.mkdir()
    for i in range(5):
        old = cache / f"{i:016x}.jsa"
        _sealed(old)
        os.utime(old, (1000 + i, 1000 + i))
    ca.plan(cache, jars, "")  # writing a new one makes room
    assert sorted(p.name for p in cache.glob("*.jsa")) == [f"{i:016x}.jsa" for i in (3, 4)]
    # a run that uses an archive prunes too, its own being the most recently used
    java = _java()
    mine = cache / f"{ca.archive_key(java, ca.java_release(java), jars, '')}.jsa"
    _sealed(mine)
    os.utime(mine, (900, 900))
    assert ca.plan(cache, jars, "").state == "using"
    assert sorted(p.name for p in cache.glob("*.jsa")) == sorted([mine.name, f"{4:016x}.jsa"])


@pytest.mark.parametrize(
    ("version", "major"), [("17.0.15", 17), ("21", 21), ("1.8.0_392", 8), ("11.0.2", 11), ("", None)]
)
def test_java_major(version, major):
    assert ca.java_major({"JAVA_VERSION": version}) == major


def test_older_java_or_no_java_gets_no_options(tmp_path, jars, monkeypatch):
    home = tmp_path / "jdk11"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "java").write_text("#!/bin/sh\n")
    (home / "release").write_text('JAVA_VERSION="11.0.2"\n')
    monkeypatch.setenv("JAVA_HOME", str(home))
    assert ca.plan(tmp_path / "cache", jars, "") == ca.Plan("unsupported")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert ca.plan(tmp_path / "cache", jars, "") == ca.Plan("unsupported")


def test_a_session_leaves_the_driver_jvm_to_the_user_when_told(tmp_path, monkeypatch):
    """Off by configuration, or the driver's Java options set by the user: no plan, nothing written, no
    Java option of the job's."""
    from simhash_spark import session

    monkeypatch.setattr(session, "_jvm_running", lambda: False)
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    cfg = with_overrides(load_config(), {"spark.class_archive": str(tmp_path / "c")})
    assert session._starts_driver_jvm({})
    assert not session._starts_driver_jvm({"spark.driver.extraJavaOptions": "-Xss4m"})
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--driver-java-options -Xss4m pyspark-shell")
    assert not session._starts_driver_jvm({})
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS")
    conf_dir = tmp_path / "spark-conf"
    conf_dir.mkdir()
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf_dir))
    (conf_dir / "spark-defaults.conf").write_text("# site settings\nspark.executor.memory 2g\n")
    assert session._starts_driver_jvm({})
    for line in ("spark.driver.extraJavaOptions -Xss4m", "spark.driver.extraJavaOptions=-Xss4m"):
        (conf_dir / "spark-defaults.conf").write_text(f"spark.executor.memory 2g\n{line}\n")
        assert not session._starts_driver_jvm({}), line  # the job's options would replace the site's
    monkeypatch.delenv("SPARK_CONF_DIR")
    assert session._class_archive(cfg, "") is not None
    off = with_overrides(load_config(), {"spark.class_archive": "off"})
    assert session._class_archive(off, "") is None
    monkeypatch.setattr(session, "_jvm_running", lambda: True)  # the test session's JVM: nothing to plan
    assert not session._starts_driver_jvm({})
    # planned: no archive before a JVM runs, only the lock that keeps other runs from writing it too
    assert [p.suffix for p in (tmp_path / "c").iterdir()] == [".lock"]


def test_the_driver_jvm_compiles_quickly_unless_told(tmp_path, jars):
    from simhash_spark import session

    plan = ca.plan(tmp_path / "cache", jars, "")
    quick = session._driver_java_options(load_config(), plan)
    assert quick.split() == [*plan.options.split(), session.QUICK_JIT]
    full = with_overrides(load_config(), {"spark.driver_jit": "full"})
    assert session._driver_java_options(full, plan) == plan.options
    assert session._driver_java_options(full, None) == ""
    assert session._driver_java_options(load_config(), None) == session.QUICK_JIT
    with pytest.raises(ConfigError, match=r"spark\.driver_jit"):
        with_overrides(load_config(), {"spark.driver_jit": "fast"})


def test_records_are_written_whole(tmp_path, jars):
    plan = ca.plan(tmp_path / "cache", jars, "")
    ca.record_writer(plan, 123, "/a:/b")
    assert plan.path is not None
    record = plan.path.with_name(plan.path.name + ".json")
    java = ca.java_executable()
    assert json.loads(record.read_text()) == {"jvm_pid": 123, "classpath": "/a:/b", "java": str(java)}
    assert not list((tmp_path / "cache").glob("*.partial"))


@pytest.mark.slow
def test_local_runs_write_then_map_the_archive_with_the_same_outputs(tmp_path):
    """Three `python -m simhash_spark` runs in one cache: the first writes the archive when its JVM
    exits, the next checks and maps it, the third maps it (with the JVM's default compilers instead of
    the quick one); every run gives the same documents."""
    import sys

    import pandas as pd

    from simhash_spark.demo.corpus import write_corpus

    corpus = tmp_path / "c.parquet"
    write_corpus(corpus, n_docs=40, seed=3)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYSPARK_PYTHON": sys.executable}
    logs, outputs = [], []
    for i in range(3):
        out = tmp_path / f"out{i}"
        cmd = [
            sys.executable,
            "-m",
            "simhash_spark",
            "dedup",
            "--input",
            str(corpus),
            "--output",
            str(out),
            "--quiet",
            *(["--set", "spark.driver_jit=full"] if i == 2 else []),
        ]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=True)
        logs.append(done.stderr)
        outputs.append(pd.read_parquet(out / "documents").sort_values("id").reset_index(drop=True))
        spark_summary = json.loads((out / "summary.json").read_text())["spark"]
        from simhash_spark.session import auto_driver_memory, machine_memory_bytes

        assert spark_summary["driver_memory"] == auto_driver_memory(machine_memory_bytes())[0]
        assert "quarter" in spark_summary["driver_memory_from"]
        if i == 0:  # the archive is written when that JVM exits, after the run's result is out
            assert len(list((tmp_path / "cache" / "simhash_spark").glob("*.tmp.json"))) == 1
            assert ca.wait_for_writers(tmp_path / "cache" / "simhash_spark", 300)
    assert "writes" in logs[0] and "JVM class archive checked" in logs[1]
    (archive,) = (tmp_path / "cache" / "simhash_spark").glob("*.jsa")
    assert f"JVM class archive: {archive}" in logs[1] and f"JVM class archive: {archive}" in logs[2]
    for other in outputs[1:]:
        pd.testing.assert_frame_equal(outputs[0], other)


_SHOW_JVM = """
from simhash_spark.config import load_config, with_overrides
from simhash_spark.session import build_session
cfg = with_overrides(load_config(), {"spark.driver_jit": "%s", "spark.class_archive": "off"})
jvm = build_session(cfg)._jvm
print(list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()))
print(jvm.java.lang.System.getProperty("java.vm.info"))
"""


@pytest.mark.slow
@pytest.mark.parametrize("jit", ["quick", "full"])
def test_a_local_session_starts_its_jvm_with_the_configured_compiler(jit):
    import sys

    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_SUBMIT_ARGS"}
    done = subprocess.run(
        [sys.executable, "-c", _SHOW_JVM % jit],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    arguments, vm_info = done.stdout.strip().splitlines()[-2:]
    from simhash_spark.session import QUICK_JIT

    assert (QUICK_JIT in arguments) == (jit == "quick")
    assert ("emulated-client" in vm_info) == (jit == "quick")  # HotSpot's name for C1-only
