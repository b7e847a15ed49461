"""Errors the CLI maps to exit codes: bad input or config → 2, anything else at run time → 1."""

import re

_SPARK_ERROR_CLASS = re.compile(r"\[[A-Z][A-Z0-9_.]+\] ")


class SimhashSparkError(Exception):
    exit_code = 1


class ConfigError(SimhashSparkError):
    """The configuration or a command-line argument is invalid."""

    exit_code = 2


class InputError(SimhashSparkError):
    """The input data cannot be processed as configured (missing column, wrong type, null ids, ...)."""

    exit_code = 2


class OutputError(SimhashSparkError):
    """The output location cannot be used (exists without --overwrite, not writable)."""

    exit_code = 2


class FingerprintIndexError(SimhashSparkError):
    """The fingerprint index cannot be used as asked (model differs, unreadable manifest, id type)."""

    exit_code = 2


class IndexDamaged(FingerprintIndexError):
    """The index's files are not what its manifest promises (a folder removed, a file truncated or
    foreign): refused rather than answered from less history."""


class MonitorAlert(SimhashSparkError):
    """The run's dedup rate left the monitoring band: nothing was published or committed."""

    exit_code = 3


def decode_utf8(data: bytes, source: str, advice: str) -> str:
    """``data`` as text, or a ConfigError naming ``source``, the line and the bytes that are not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise ConfigError(
            f"{source} is not UTF-8 (line {line}, byte {e.start}: {data[e.start : e.start + 4]!r}); {advice}"
        ) from None


def essence(e: BaseException) -> str:
    """The line of an exception that says what went wrong: Spark's error-class line (``[FAILED_READ_FILE...]
    ... file:/data/x.parquet ...``) where there is one, the last line of a Python worker's traceback for
    errors raised inside a UDF, else the first line."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    if not lines:
        return type(e).__name__
    if "Python worker" in lines[0] or lines[0].startswith("Traceback"):
        tail = [ln for ln in lines if not ln.startswith(("File ", "Traceback", "^", "at ", "SQLSTATE"))]
        return tail[-1] if tail else lines[-1]
    for ln in lines:
        m = _SPARK_ERROR_CLASS.search(ln)
        if m:
            return ln[m.start() :]
    return lines[0]


def is_unreadable_input(e: BaseException) -> bool:
    """Spark's errors for input files it cannot read (corrupt, truncated, not Parquet). A JVM that ran out
    of memory while reading reports it as a read error too: that is a runtime failure, not bad input."""
    text = str(e)
    unreadable = (
        "FAILED_READ_FILE" in text or "CANNOT_READ_FILE_FOOTER" in text or "is not a Parquet file" in text
    )
    return unreadable and "OutOfMemoryError" not in text


# the data files of an index's snapshots (simhash_spark/index/store.py's layout)
_INDEX_FILE = re.compile(
    r"\S*/snapshots/[^/\s]+/(?:entries|keys/key_table=\d+|keys/part=\d+|docs/bucket=\d+)/[^\s.]\S*?(?=\.?(?:\s|$))"
)


def unreadable_index_file(e: BaseException) -> str | None:
    """The index data file a read error names, if it names one."""
    found = _INDEX_FILE.search(str(e))
    return found.group(0) if found else None
