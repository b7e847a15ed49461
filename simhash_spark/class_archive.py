"""A class archive for the driver JVM of local runs (Java's application class-data sharing).

Most of a small local run is the JVM loading and verifying Spark's classes: the session and the first
query. Java 17 can write the classes a process loaded to an archive when it exits
(``-XX:ArchiveClassesAtExit``) and map them from there at the next start (``-XX:SharedArchiveFile``).

The protocol, per archive key (the Java installation, the Spark jars, the driver's memory):

1. A run that finds no archive and no other run writing one starts its JVM with
   ``ArchiveClassesAtExit=<key>.<pid>.tmp`` and records, beside it, its JVM's process id and class path.
   The JVM writes the archive when it exits, after the run's result is out: the process has returned,
   but the JVM still holds its standard output, so a caller that reads that output to its end waits for
   the archive too (once per key).
   One run writes at a time: it holds ``<key>.lock`` (created only if absent, naming its process); a
   run that finds a live lock or a live writer runs without an archive.
2. A later run that finds such a record whose JVM is gone checks the archive in a separate JVM with
   ``-Xshare:on`` (which refuses an incomplete or mismatched archive instead of using it: the JVM crashes
   on a truncated one even in its default mode), writes its size and checksum beside it
   (``<key>.jsa.sum``) and only then renames it to ``<key>.jsa``.
3. A run that finds ``<key>.jsa`` maps it once its size and checksum are those recorded: an archive
   truncated or changed since (a full disk, a bad copy) is removed, never mapped. A rename is atomic: a
   reader sees a checked archive or none. A driver JVM that still fails to start with an archive is
   started again without it, and the archive removed (``discard``): a cache never breaks a run.
4. Every run settles every temporary of the directory, whatever its key: a writer that is gone has its
   archive checked and renamed, or removed; an unrecorded temporary no process names is removed. A run
   that fails ends its JVM before it writes an archive (``abandon``). At most ``KEEP`` archives stay, the
   least recently used go first.

Nothing here changes what a run computes; the archive only saves class loading. Under spark-submit the
driver JVM is already running when the job starts: docs/deploy.md says how to give it an archive there.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import xxhash

from simhash_spark.lease import pid_alive

log = logging.getLogger(__name__)

QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"  # the dump lists every class it skips; a mismatch warns
KEEP = 2  # archives kept per directory (other Spark or Java versions, heap sizes), the most recently used
ABANDONED_S = 3600.0  # without /proc: an unrecorded temporary archive older than this is removed
CHECK_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Plan:
    """What the driver JVM is started with: ``options`` (Java options, "" for none) and ``state``:
    ``using`` an archive, ``writing`` one at exit, ``busy`` (another run is writing it), or why not."""

    state: str
    options: str = ""
    path: Path | None = None


def default_directory() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "simhash_spark"


def java_executable() -> Path | None:
    """The java PySpark's launcher runs: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def java_release(java: Path) -> dict[str, str]:
    """The installation's ``release`` file (``JAVA_VERSION="17.0.15"``, ...), empty when it has none."""
    try:
        text = (java.parent.parent / "release").read_text("utf-8", errors="replace")
    except OSError:
        return {}
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
    return {k.strip(): v.strip().strip('"') for k, v in pairs}


def java_major(release: dict[str, str]) -> int | None:
    version = release.get("JAVA_VERSION", "")
    head = version.split(".")[0]
    if head == "1":  # 1.8.0_392
        head = version.split(".")[1] if "." in version else ""
    return int(head) if head.isdigit() else None


def archive_key(java: Path, release: dict[str, str], jars: Path, driver_memory: str) -> str:
    """Changes whenever the archive would not fit: another Java build, other Spark jars, a heap size
    that changes how the JVM lays objects out."""
    h = hashlib.sha256()
    stat = java.stat()
    h.update(f"{java}|{stat.st_size}|{stat.st_mtime_ns}|{sorted(release.items())}|{driver_memory}".encode())
    for jar in sorted(jars.glob("*.jar")):
        st = jar.stat()
        h.update(f"|{jar.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def _alive(pid: int, marker: str) -> bool:
    """Whether process ``pid`` runs and (where /proc says) is the JVM started with ``marker``."""
    if Path("/proc/self/cmdline").exists():
        try:
            return marker in Path(f"/proc/{pid}/cmdline").read_bytes().decode("utf-8", "replace")
        except OSError:
            return False
    return pid_alive(pid)


def _checks(java: Path, archive: Path, classpath: str) -> bool:
    """A JVM that must map ``archive`` (``-Xshare:on``) with the writer's class path starts."""
    # a bad archive crashes this JVM: its crash report goes beside the archive and is removed with it
    crash = archive.with_name(archive.name + ".crash.log")
    cmd = [str(java), "-Xshare:on", f"-XX:SharedArchiveFile={archive}", *QUIET.split(), "-cp", classpath]
    cmd += [f"-XX:ErrorFile={crash}", "-XX:-CreateCoredumpOnCrash", "-version"]
    try:
        done = subprocess.run(
            cmd,
            capture_output=True,
            timeout=CHECK_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
            cwd=archive.parent,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        crash.unlink(missing_ok=True)
    return done.returncode == 0


def _cmdline_names(marker: str) -> bool | None:
    """Whether any process's command line holds ``marker`` (a writer that has not recorded itself yet);
    None where there is no /proc to tell."""
    proc = Path("/proc")
    if not (proc / "self" / "cmdline").exists():
        return None
    for entry in proc.iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if marker in (entry / "cmdline").read_bytes().decode("utf-8", "replace"):
                    return True
    return False


def _key_of(archive: Path) -> str:
    return archive.name.split(".", 1)[0]


SUM = ".sum"


def _digest(path: Path) -> dict[str, object]:
    """``path``'s size and xxh64 (a 200 MB archive reads in a fraction of a second from the page cache)."""
    h = xxhash.xxh64()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return {"size": path.stat().st_size, "xxh64": h.hexdigest()}


def seal(archive: Path, final: Path) -> None:
    """Record ``archive``'s size and checksum as ``final``'s, then rename it to ``final``: a reader that
    finds ``final`` finds its record."""
    record = final.with_name(final.name + SUM)
    partial = record.with_name(record.name + ".partial")
    partial.write_text(json.dumps(_digest(archive)), "utf-8")
    os.replace(partial, record)
    os.replace(archive, final)


def verified(final: Path) -> bool:
    """Whether ``final`` is whole: its size and checksum are the ones recorded when it was sealed."""
    try:
        recorded = json.loads(final.with_name(final.name + SUM).read_text("utf-8"))
        if final.stat().st_size != recorded["size"]:
            return False
        return bool(_digest(final) == recorded)
    except (OSError, ValueError, KeyError, TypeError):
        return False


def remove_archive(final: Path) -> None:
    final.unlink(missing_ok=True)
    final.with_name(final.name + SUM).unlink(missing_ok=True)


def _lock_path(directory: Path, key: str) -> Path:
    return directory / f"{key}.lock"


def _take_lock(directory: Path, key: str) -> bool:
    """Create ``<key>.lock`` naming this process, if and only if no live process holds it (a dead
    holder's lock is taken over once)."""
    lock = _lock_path(directory, key)
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                holder = int(json.loads(lock.read_text("utf-8"))["pid"])
            except (OSError, ValueError, KeyError, TypeError):
                holder = -1  # being written, or unreadable: another run's
                with contextlib.suppress(OSError):
                    if time.time() - lock.stat().st_mtime < 60:
                        return False
            if holder == os.getpid():
                return True  # this process's own (one driver JVM a process: re-entered, not raced)
            if holder > 0 and pid_alive(holder):
                return False
            lock.unlink(missing_ok=True)
            continue
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps({"pid": os.getpid()}))
        return True
    return False


def _settle_recorded(directory: Path, key: str, java: Path) -> bool:
    """Check and rename the archives of recorded writers whose JVMs are gone, whatever their key (a
    temporary is never left for a run of its own key to come); drop what cannot be used. Returns whether
    a writer of ``key`` still runs."""
    busy = False
    for record in directory.glob("*.tmp.json"):
        archive = record.with_name(record.name[: -len(".json")])
        final = directory / f"{_key_of(archive)}.jsa"
        try:
            info = json.loads(record.read_text("utf-8"))
            if _alive(int(info["jvm_pid"]), str(archive)):
                busy = busy or _key_of(archive) == key
                continue
            checker = Path(info.get("java") or java)
            if archive.exists() and not final.exists() and _checks(checker, archive, str(info["classpath"])):
                seal(archive, final)
                log.info("JVM class archive checked: %s", final)
        except (OSError, ValueError, KeyError, TypeError) as e:
            log.debug("dropping the class archive record %s: %s", record, e)
        archive.unlink(missing_ok=True)
        record.unlink(missing_ok=True)
        _lock_path(directory, _key_of(archive)).unlink(missing_ok=True)
    return busy


def _settle(directory: Path, key: str, java: Path, now: float) -> bool:
    """Settle every temporary archive in ``directory``; whether a run is still writing the one of
    ``key``. An unrecorded temporary (its run failed before saying who writes it) goes as soon as no
    process names it; where that cannot be told, after ``ABANDONED_S``."""
    busy = _settle_recorded(directory, key, java)
    for orphan in directory.glob("*.tmp"):
        if orphan.with_name(orphan.name + ".json").exists():
            continue
        writing = _cmdline_names(str(orphan))
        if writing is None:
            with contextlib.suppress(OSError):
                writing = now - orphan.stat().st_mtime <= ABANDONED_S
        if writing:
            busy = busy or _key_of(orphan) == key
        else:
            orphan.unlink(missing_ok=True)
    return busy


def _prune(directory: Path) -> None:
    """Keep the ``KEEP`` most recently used archives (each is a couple of hundred megabytes)."""
    archives = []
    for path in directory.glob("*.jsa"):
        with contextlib.suppress(OSError):  # removed by another run meanwhile
            archives.append((path.stat().st_mtime, path))
    for _, old in sorted(archives, reverse=True)[KEEP:]:
        remove_archive(old)


def plan(directory: Path, jars: Path, driver_memory: str, now: float | None = None) -> Plan:
    """The archive plan for a driver JVM about to start (see the module's protocol)."""
    java = java_executable()
    if java is None or os.name != "posix":
        return Plan("unsupported")
    release = java_release(java)
    major = java_major(release)
    if major is None or major < 17 or not jars.is_dir():
        return Plan("unsupported")
    now = time.time() if now is None else now
    directory.mkdir(parents=True, exist_ok=True)
    key = archive_key(java, release, jars, driver_memory)
    final = directory / f"{key}.jsa"
    busy = _settle(directory, key, java, now)  # also clears what runs that lost a race to write left
    if final.exists() and not verified(final):
        log.warning(
            "JVM class archive %s is not the one written (its size or checksum differs): removed; this run "
            "starts without it and a later one writes it again",
            final,
        )
        remove_archive(final)
    if final.exists():
        with contextlib.suppress(OSError):  # another user's archive: used all the same
            os.utime(final)  # the most recently used are kept
        _prune(directory)
        return Plan("using", f"-XX:SharedArchiveFile={final} {QUIET}", final)
    if busy or not _take_lock(directory, key):
        return Plan("busy")
    _prune(directory)
    temp = directory / f"{key}.{os.getpid()}.tmp"
    return Plan("writing", f"-XX:ArchiveClassesAtExit={temp} {QUIET}", temp)


def record_writer(plan: Plan, jvm_pid: int, classpath: str) -> None:
    """Written once the JVM runs: who writes ``plan.path`` and with which class path it is checked."""
    assert plan.state == "writing" and plan.path is not None
    record = plan.path.with_name(plan.path.name + ".json")
    partial = record.with_name(record.name + ".partial")
    java = java_executable()
    info = {"jvm_pid": jvm_pid, "classpath": classpath, "java": str(java) if java else None}
    partial.write_text(json.dumps(info), "utf-8")
    os.replace(partial, record)


def abandon(plan: Plan, jvm_pid: int, timeout_s: float = 30.0) -> None:
    """A failed run's JVM writes no archive: it is ended before it exits on its own (the dump runs at a
    normal exit only), and whatever it wrote goes with its record. Call after the SparkContext stopped."""
    assert plan.path is not None
    if _alive(jvm_pid, str(plan.path)):
        with contextlib.suppress(OSError):
            os.kill(jvm_pid, signal.SIGKILL)
        deadline = time.time() + timeout_s
        while _alive(jvm_pid, str(plan.path)) and time.time() < deadline:
            time.sleep(0.05)
    plan.path.unlink(missing_ok=True)
    plan.path.with_name(plan.path.name + ".json").unlink(missing_ok=True)
    _lock_path(plan.path.parent, _key_of(plan.path)).unlink(missing_ok=True)


def discard(plan: Plan) -> None:
    """A driver JVM did not start with ``plan``'s options: the archive it mapped goes (the next run writes
    it again), or the one it was to write, with its lock."""
    if plan.path is None:
        return
    if plan.state == "using":
        remove_archive(plan.path)
    elif plan.state == "writing":
        plan.path.unlink(missing_ok=True)
        plan.path.with_name(plan.path.name + ".json").unlink(missing_ok=True)
        _lock_path(plan.path.parent, _key_of(plan.path)).unlink(missing_ok=True)


def wait_for_writers(directory: Path, timeout_s: float) -> bool:
    """Wait until no recorded writer's JVM runs (its archive is then complete, or never will be);
    whether that happened within ``timeout_s``. Benchmarks and tests use it to time warm runs."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        records = [(r, json.loads(r.read_text("utf-8"))) for r in directory.glob("*.tmp.json")]
        if not any(_alive(int(info["jvm_pid"]), str(r)[: -len(".json")]) for r, info in records):
            return True
        time.sleep(0.5)
    return False
