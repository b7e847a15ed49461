"""The one place a SparkSession is built. Library code receives the session; it never sets a master."""

from __future__ import annotations

import atexit
import importlib
import logging
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from simhash_spark import class_archive
from simhash_spark.config import Config, size_bytes
from simhash_spark.core.cpu import avx512_targets, slow_avx512_sort
from simhash_spark.errors import ConfigError, essence

log = logging.getLogger(__name__)
JAVA_OPTIONS = "spark.driver.extraJavaOptions"
DRIVER_MEMORY = "spark.driver.memory"
# where the job's choice of the driver heap is recorded for summary.json (absent: the launcher chose it)
DRIVER_MEMORY_CHOSEN = "spark.simhash_spark.driverMemoryChosen"
SPARK_DEFAULT_DRIVER_MEMORY = "1g"
MiB = 1 << 20
# Compressed object pointers end just below 32 GiB: a larger heap holds fewer objects up to ~48 GiB.
MAX_AUTO_DRIVER_MIB = 31 * 1024


@dataclass
class DriverJvm:
    """The driver JVM this process started (local runs): its heap and, while it writes a class archive,
    the plan and its process id. Kept here because the JVM may be gone when the run reports its end."""

    memory: str
    memory_from: str
    archive: class_archive.Plan | None = None
    pid: int | None = None


_started: DriverJvm | None = None


def started_driver() -> DriverJvm | None:
    """The driver JVM this process started itself, if it did."""
    return _started


# HotSpot's quick compiler (C1) only: no second, optimizing compilation competing with the run for the cores
QUICK_JIT = "-XX:TieredStopAtLevel=1"


def launched_by_spark_submit() -> bool:
    """spark-submit starts the Python driver with a gateway already running."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _submitted_keys() -> set[str]:
    """The Spark properties spark-submit set (``--name``, ``--conf``, properties files): the JVM it
    started holds them as system properties, which a new SparkConf reads."""
    if not launched_by_spark_submit():
        return set()
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # connects to spark-submit's gateway: SparkConf then reads the JVM's
    return {key for key, _ in SparkConf().getAll()}


def _defaults(cfg: Config, local: bool) -> dict[str, str]:
    """What the job sets unless the launcher did."""
    out = {
        "spark.app.name": cfg.spark.app_name,
        "spark.sql.execution.arrow.maxRecordsPerBatch": str(cfg.spark.arrow_batch_size),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # The job persists shuffled frames it reads several times. Spark's default (false) keeps adaptive
        # execution from coalescing the partitions of a persisted plan, so with the default 200 shuffle
        # partitions every stage downstream ran 200 mostly empty tasks and every output came out as up
        # to 200 files. true lets adaptive execution size them from the data, whoever launched the job.
        "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "true",
        # Spark writes timestamps as INT96 by default, which readers take as zone-less nanoseconds: a
        # passthrough timestamp would come back without being an instant. As microseconds adjusted to UTC
        # (Parquet's own timestamp type) it comes back as the same instant, in UTC.
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    }
    if local:
        # Local development: no progress bars over the job's own progress line, and shuffle partitions
        # sized to the machine instead of Spark's 200 (which makes every small local shuffle pay 200 tasks).
        out["spark.ui.showConsoleProgress"] = "false"
        out["spark.sql.shuffle.partitions"] = str(2 * (os.cpu_count() or 2))
    return out


# Spark prints a persisted frame's plan inside every plan that reads it, under adaptive execution both its
# initial and its final plan: each level of persisted frames doubles the text, and a run's later stages sit
# many levels deep. Unbounded (Spark's default) the driver renders plans of tens of megabytes at every
# adaptive re-plan and keeps them for the UI, enough to exhaust its heap. Spark's own remedy is this limit;
# the plan of any one stage fits it many times over.
PLAN_STRING_LIMIT = "spark.sql.maxPlanStringLength"
PLAN_STRING_CHARS = 262_144


def bound_plan_strings(spark: SparkSession) -> None:
    """Limits the plan texts Spark renders for this session to ``PLAN_STRING_CHARS``, unless the user set
    the limit. Set on the session, not only for a run: the frames a run returns carry its plans."""
    if spark.conf.get(PLAN_STRING_LIMIT, None) is None:
        spark.conf.set(PLAN_STRING_LIMIT, str(PLAN_STRING_CHARS))


def _jvm_running() -> bool:
    """Whether this process has a driver JVM already (a session built before, as in tests and notebooks)."""
    from pyspark import SparkContext

    return SparkContext._gateway is not None


def _defaults_file_sets(key: str) -> bool:
    """Whether the launcher's properties file (``$SPARK_CONF_DIR`` or ``$SPARK_HOME/conf``
    ``/spark-defaults.conf``, which spark-submit reads for local runs too) sets ``key``."""
    from pyspark.find_spark_home import _find_spark_home

    conf_dir = os.environ.get("SPARK_CONF_DIR") or str(Path(_find_spark_home()) / "conf")
    try:
        lines = (Path(conf_dir) / "spark-defaults.conf").read_text("utf-8", "replace").splitlines()
    except OSError:  # none: the usual case for a pip-installed PySpark
        return False
    # Java properties syntax: "key value", "key=value" or "key: value"
    return any(re.match(rf"\s*{re.escape(key)}\s*[\s=:]", line) for line in lines)


def _starts_driver_jvm(settings: dict[str, str]) -> bool:
    """Whether the session about to be built starts a driver JVM whose Java options the job may choose: no
    JVM runs in this process yet (tests and notebooks build one first) and the user set none (in the
    settings, PYSPARK_SUBMIT_ARGS or the launcher's properties file: the job's would replace theirs)."""
    wanted_elsewhere = (
        JAVA_OPTIONS in settings
        or "java-options" in os.environ.get("PYSPARK_SUBMIT_ARGS", "")
        or _defaults_file_sets(JAVA_OPTIONS)
    )
    return not wanted_elsewhere and not _jvm_running()


def _cgroup_limit_bytes() -> int | None:
    """The memory limit of this process's container (cgroup v2, then v1), None when unlimited."""
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text("ascii").strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:  # v1 says "unlimited" with a huge number
            return int(text)
    return None


def machine_memory_bytes() -> int | None:
    """The memory this process may use: the machine's, or its container's limit when lower."""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        physical = None
    limits = [m for m in (physical, _cgroup_limit_bytes()) if m]
    return min(limits) if limits else None


def auto_driver_memory(available: int | None) -> tuple[str, str]:
    """A local run's driver heap and why: a quarter of ``available`` (the driver JVM runs the tasks; the
    Python workers, the page cache and the OS need the rest), never below Spark's default 1g."""
    if not available:
        return SPARK_DEFAULT_DRIVER_MEMORY, "Spark's default: the machine's memory is unknown"
    mib = max(1024, min(available // 4 // MiB, MAX_AUTO_DRIVER_MIB))
    return f"{mib}m", f"a quarter of the {available / (1 << 30):.1f} GiB this run may use"


def _driver_memory_set_elsewhere(settings: dict[str, str]) -> bool:
    """Whether the user set the driver heap: ``--spark-conf``, PYSPARK_SUBMIT_ARGS, SPARK_DRIVER_MEMORY or
    the launcher's properties file."""
    submit_args = os.environ.get("PYSPARK_SUBMIT_ARGS", "")
    return (
        DRIVER_MEMORY in settings
        or "--driver-memory" in submit_args
        or DRIVER_MEMORY in submit_args
        or bool(os.environ.get("SPARK_DRIVER_MEMORY"))
        or _defaults_file_sets(DRIVER_MEMORY)
    )


def _local_driver_memory(cfg: Config, settings: dict[str, str]) -> None:
    """Sizes the heap of the driver JVM a local run starts, unless the user did (``spark.local_driver_memory``;
    Spark's own default of 1g fails a million-document run)."""
    global _started
    if _driver_memory_set_elsewhere(settings):
        _started = DriverJvm(settings.get(DRIVER_MEMORY, ""), "set by the user")
        return
    if cfg.spark.local_driver_memory == "auto":
        memory, source = auto_driver_memory(machine_memory_bytes())
    else:
        memory, source = cfg.spark.local_driver_memory, "spark.local_driver_memory"
        available = machine_memory_bytes()
        wanted = size_bytes(memory) or 0
        if available and wanted > available:
            raise ConfigError(
                f"spark.local_driver_memory: {memory!r} is more than the {available / (1 << 30):.1f} GiB this "
                "run may use (the machine's or its container's memory); give a smaller size or \"auto\""
            )
    settings[DRIVER_MEMORY] = memory
    settings[DRIVER_MEMORY_CHOSEN] = source
    _started = DriverJvm(memory, source)


NUMPY_FEATURES = "NPY_DISABLE_CPU_FEATURES"
WORKER_NUMPY_FEATURES = f"spark.executorEnv.{NUMPY_FEATURES}"


def machine_cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:  # not Linux: nothing known of the CPU, numpy's own choice stands
        return ""


def _numpy_targets() -> tuple[list[str], dict[str, bool]]:
    """numpy's dispatch targets and the CPU features it found (the workers of a local run import the same
    numpy)."""
    for name in ("numpy._core._multiarray_umath", "numpy.core._multiarray_umath"):  # numpy 2, numpy 1
        try:
            umath = importlib.import_module(name)
        except ImportError:
            continue
        return list(getattr(umath, "__cpu_dispatch__", [])), dict(getattr(umath, "__cpu_features__", {}))
    return [], {}


def numpy_features_to_disable(cpuinfo: str) -> str:
    """``NPY_DISABLE_CPU_FEATURES`` for the Python workers on the CPU ``cpuinfo`` describes: numpy's
    AVX-512 targets where its AVX-512 sort is slow (``core.cpu``), else empty."""
    if not slow_avx512_sort(cpuinfo):
        return ""
    return " ".join(avx512_targets(*_numpy_targets()))


def _local_numpy_features(cfg: Config, settings: dict[str, str]) -> None:
    """Leaves the Python workers of a local run on numpy's AVX2 code where its AVX-512 sort is slow
    (``spark.local_numpy_avx512 = "auto"``), unless the user set ``NPY_DISABLE_CPU_FEATURES`` for them
    or for this process. The workers run on this machine; the driver's numpy is imported already."""
    if cfg.spark.local_numpy_avx512 != "auto" or NUMPY_FEATURES in os.environ:
        return
    if WORKER_NUMPY_FEATURES in settings or _defaults_file_sets(WORKER_NUMPY_FEATURES):
        return
    features = numpy_features_to_disable(machine_cpuinfo())
    if features:
        settings[WORKER_NUMPY_FEATURES] = features


def _driver_java_options(cfg: Config, archive: class_archive.Plan | None) -> str:
    """The Java options of a local run's driver JVM (which runs the tasks too): the class archive's and,
    unless ``spark.driver_jit = "full"``, the quick compiler only (docs/deploy.md says when each pays)."""
    jit = QUICK_JIT if cfg.spark.driver_jit == "quick" else ""
    return " ".join(filter(None, [archive.options if archive is not None else "", jit]))


def _class_archive(cfg: Config, driver_memory: str) -> class_archive.Plan | None:
    """The class archive plan of the driver JVM this process is about to start (``_starts_driver_jvm``);
    None when the archive is off or cannot be kept."""
    where = cfg.spark.class_archive.strip()
    if where == "off":
        return None
    from pyspark.find_spark_home import _find_spark_home

    directory = class_archive.default_directory() if where == "auto" else Path(where).expanduser()
    jars = Path(_find_spark_home()) / "jars"
    try:
        plan = class_archive.plan(directory, jars, driver_memory)
    except OSError as e:  # an unwritable cache costs the speed-up, never the run
        log.info("no JVM class archive (%s): %s", directory, e)
        return None
    if plan.state == "using":
        log.info("JVM class archive: %s", plan.path)
    elif plan.state == "writing":
        log.info(
            "JVM class archive: this run's JVM writes %s when it exits; later local runs start from it "
            '(spark.class_archive = "off" turns it off)',
            plan.path,
        )
    return plan


def _archive_started(spark: SparkSession, plan: class_archive.Plan) -> None:
    """A writing JVM says who it is, so the next run can tell when its archive is complete."""
    if plan.state != "writing":
        return
    try:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        pid = int(jvm.java.lang.ProcessHandle.current().pid())
        classpath = str(jvm.java.lang.System.getProperty("java.class.path"))
        class_archive.record_writer(plan, pid, classpath)
        if _started is not None:
            _started.archive, _started.pid = plan, pid
    except Exception as e:  # without the record the archive is never used: only the speed-up is lost
        log.info("JVM class archive not recorded: %s", e)


def build_session(
    cfg: Config, *, master: str | None = None, remote: str | None = None, conf: dict[str, str] | None = None
) -> SparkSession:
    """Local runs (plain ``python -m simhash_spark``) get Spark's default local master unless ``master``
    is given; under spark-submit the master, resources and every property spark-submit set win: the
    configuration fills in only what it left unset. ``conf`` (``--spark-conf``) wins over both."""
    submitted = launched_by_spark_submit()
    if not submitted:
        # Workers must import the same interpreter (and packages) as the driver in local mode.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder
    if remote:
        builder = builder.remote(remote)
    elif master:
        builder = builder.master(master)
    taken = _submitted_keys()
    settings = {k: v for k, v in _defaults(cfg, local=not submitted and not remote).items() if k not in taken}
    settings.update(conf or {})
    archive = None
    if not submitted and not remote and not _jvm_running():
        _local_driver_memory(cfg, settings)
        _local_numpy_features(cfg, settings)
    if not submitted and not remote and _starts_driver_jvm(settings):
        archive = _class_archive(cfg, settings.get(DRIVER_MEMORY, ""))
        options = _driver_java_options(cfg, archive)
        if options:
            settings[JAVA_OPTIONS] = options
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except Exception as e:
        if archive is None or archive.state not in ("using", "writing"):
            raise
        # a class archive the checks passed that this JVM still cannot map: never let the cache break a run
        log.warning(
            "the driver JVM did not start with its class archive %s (%s): the archive is removed and the JVM "
            "started again without it",
            archive.path,
            essence(e),
        )
        class_archive.discard(archive)
        archive = None
        spark = builder.config(JAVA_OPTIONS, _driver_java_options(cfg, None)).getOrCreate()
    if archive is not None:
        _archive_started(spark, archive)
    batch = "spark.sql.execution.arrow.maxRecordsPerBatch"
    if batch in settings:  # an existing session (tests, notebooks) keeps its own otherwise
        spark.conf.set(batch, settings[batch])
    return spark


def abandon_class_archive_at_exit() -> None:
    """After a failed run: when this process exits, the driver JVM it started is ended before it writes its
    class archive (a failed run leaves nothing in the cache). At exit, not now: a caller that runs the
    command line in its own process (a test, a Python task) may go on using the session."""
    global _abandon_registered
    if not _abandon_registered:
        atexit.register(abandon_class_archive)
        _abandon_registered = True


_abandon_registered = False


def abandon_class_archive() -> None:
    """The driver JVM this process started stops without writing its class archive. Nothing to do for a
    JVM that writes none."""
    started = _started
    if started is None or started.archive is None or started.pid is None:
        return
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    if sc is not None:
        try:
            sc.stop()
        except Exception as e:  # the JVM may be gone already (it ran out of memory)
            log.debug("stopping Spark after a failed run: %s", e)
    class_archive.abandon(started.archive, started.pid)
    started.archive = started.pid = None
