"""Reading and validating the input; writing the output atomically."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote, urlparse

from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from simhash_spark import columns as C
from simhash_spark.config import Config
from simhash_spark.errors import ConfigError, InputError, essence
from simhash_spark.storage import FileSystem, literal
from simhash_spark.transforms.classic import spark_context
from simhash_spark.transforms.clusters import policy_column

log = logging.getLogger(__name__)

_ID_TYPES = (T.StringType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.DecimalType)
_SHOW = 5


def read_input(spark: SparkSession, *, path: str | None = None, table: str | None = None) -> DataFrame:
    """The input's rows (``open_input``)."""
    raw = open_input(spark, path=path, table=table)[0]
    assert raw is not None
    return raw


def open_input(
    spark: SparkSession, *, path: str | None = None, table: str | None = None, allow_empty: bool = False
) -> tuple[DataFrame | None, list[str]]:
    """(the rows of a Parquet file, directory or glob, or of a catalog table; the data files Spark skips as
    hidden). A directory is read whole: every Parquet file under it (Hive partition folders become
    columns), the schemas of all files merged; a file Spark would skip (in a subfolder that is not a
    partition folder) is an error naming it. Files whose name or folder starts with ``_`` or ``.`` are
    hidden to Spark: those that look like data (``*.parquet``) are returned and logged, never dropped
    without a word. ``allow_empty``: an existing folder without a data file (a day without a crawl) is no
    error: no rows (None), and the caller makes the empty input (``empty_input``)."""
    try:
        if table:
            return spark.read.table(table), []
        assert path is not None
        files = _listing(spark, path)
        read_path = literal(path) if _exists_literally(spark, path) else path
        if allow_empty and files is not None and not [f for f in files if not _hidden(f)]:
            if FileSystem(spark, path).is_dir(path):
                log.warning("input %s: a folder without data files, taken as an empty input", path)
                return None, [f for f in files if f.lower().endswith(".parquet")]
        # merging schemas reads every file's footer; a single file has a single schema
        merge = files is None or sum(1 for f in files if not _hidden(f)) > 1
        df = spark.read.option("mergeSchema", str(merge).lower()).parquet(read_path)
    except Exception as e:  # AnalysisException for a missing path, a JVM error for a corrupt file
        what = f"table {table!r}" if table else f"input {path!r}"
        raise InputError(f"cannot read {what}: {essence(e)}") from None
    if files is None:
        return df, []
    _refuse_skipped_files(spark, path, df, files)
    hidden = [f for f in files if _hidden(f) and f.lower().endswith(".parquet")]
    if hidden:
        log.warning(
            "input %s: %d hidden file(s) not read (names starting with _ or . are skipped), e.g. %s",
            path,
            len(hidden),
            ", ".join(hidden[:_SHOW]),
        )
    return df, hidden


_GLOB = re.compile(r"[*?\[{]")


def _hidden(relative: str) -> bool:
    return any(part.startswith(("_", ".")) for part in relative.split("/"))


def _exists_literally(spark: SparkSession, path: str) -> bool:
    """Whether ``path`` names an existing file or folder as written: then characters Spark would read as a
    pattern (``a[1]``) are part of its name."""
    return FileSystem(spark, path).exists(path)


def _listing(spark: SparkSession, path: str) -> list[str] | None:
    """The files below a folder ``path`` (relative), ``[]`` for a file, ``None`` for a glob or a missing
    path (Spark reports that). A path that exists as written is no glob, whatever characters it holds."""
    fs = FileSystem(spark, path)
    if not fs.exists(path):
        return None
    return fs.list_files(path) if fs.is_dir(path) else []


def _refuse_skipped_files(spark: SparkSession, path: str, df: DataFrame, files: list[str]) -> None:
    """Spark reads a folder's files and its ``name=value`` partition folders only: a Parquet file in any
    other subfolder is silently left out. Name them instead."""
    if not files:
        return
    root = FileSystem(spark, path).qualified(path).rstrip("/")
    read = {_comparable(f) for f in df.inputFiles()}
    skipped = [r for r in files if not _hidden(r) and _comparable_path(f"{root}/{r}") not in read]
    if skipped:
        raise InputError(
            f"input {path!r}: {len(skipped)} file(s) under it would not be read, e.g. "
            + ", ".join(skipped[:_SHOW])
            + ". Spark reads the folder's own files and name=value partition folders only; move these files, "
            "or name the files to read with a glob"
        )


def _comparable(uri: str) -> str:
    """A file Spark read (a URI: ``#`` and ``%`` in names are percent-encoded) as ``_comparable_path``."""
    parsed = urlparse(uri)
    p = unquote(parsed.path)
    return os.path.realpath(p) if parsed.scheme in ("", "file") else f"{parsed.scheme}://{parsed.netloc}{p}"


def _comparable_path(path: str) -> str:
    """A file system path (``file:///x/a#b``, ``hdfs://nn/x``: nothing encoded) in one comparable form."""
    scheme, sep, rest = path.partition("://")
    if not sep:
        return os.path.realpath(path)
    if scheme == "file":
        return os.path.realpath("/" + rest.lstrip("/"))
    netloc, _, p = rest.partition("/")
    return f"{scheme}://{netloc}/{p}"


def empty_input(spark: SparkSession, cfg: Config, *, id_type: str) -> DataFrame:
    """No rows, with the columns the configuration reads: the id (``id_type``, or string), the text and
    title columns, and the pass-through and representative columns, whose types no file gives (strings)."""
    ic = cfg.input
    columns = {ic.id_column: id_type or "string"}
    for col in [*ic.text_columns, *filter(None, [ic.title_column]), *ic.passthrough_columns]:
        columns.setdefault(col, "string")
    policy_col = policy_column(cfg.cluster.representative)
    if policy_col:
        columns.setdefault(policy_col, "string")
    schema = ", ".join("`" + c.replace("`", "``") + f"` {t}" for c, t in columns.items())
    return spark.createDataFrame([], schema)


def _show(values: Iterable[Any]) -> str:
    return ", ".join(repr(v) for v in values)


def validate_schema(raw: DataFrame, cfg: Config, *, source: str) -> None:
    """The configured columns exist with usable types (no Spark job)."""
    fields = {f.name: f.dataType for f in raw.schema.fields}
    ic = cfg.input
    available = ", ".join(fields) or "(none)"
    needed = [ic.id_column, *ic.text_columns, *ic.passthrough_columns, *filter(None, [ic.title_column])]
    policy_col = policy_column(cfg.cluster.representative)
    if policy_col:
        needed.append(policy_col)
    for col in needed:
        if col not in fields:
            raise InputError(f"{source}: column {col!r} not found (columns: {available})")
    if not isinstance(fields[ic.id_column], _ID_TYPES):
        raise InputError(
            f"{source}: id column {ic.id_column!r} has type {fields[ic.id_column].simpleString()}; "
            "expected string or integer"
        )
    for col in [*ic.text_columns, *filter(None, [ic.title_column])]:
        if not isinstance(fields[col], T.StringType):
            raise InputError(
                f"{source}: text column {col!r} has type {fields[col].simpleString()}; expected string"
            )


def id_totals(id_col: Column) -> list[Column]:
    """Aggregates ``validate_ids`` needs (rows, non-null ids, and distinct 64-bit hashes of the ids: as
    many as there are non-null ids when the ids are distinct, fewer when two are equal or, rarely, when two
    hashes collide): the caller folds them into an aggregation it runs anyway, so checking the ids costs
    no pass of its own. Counting hashes (LONG) instead of the ids themselves spares the aggregation every
    string id's bytes."""
    return [
        F.count(F.lit(1)).alias("rows"),
        F.count(id_col).alias("non_null"),
        F.count_distinct(F.when(id_col.isNotNull(), F.xxhash64(id_col))).alias("distinct"),
    ]


def validate_ids(totals: Row | Mapping[str, int], raw: DataFrame, cfg: Config, *, source: str) -> None:
    """No rows (unless allowed), null ids or duplicate ids are errors; the queries that show offending
    values run only when ``totals`` (``id_totals``) say there may be some: fewer distinct id hashes than
    rows is confirmed by grouping the ids themselves."""
    ic = cfg.input
    id_col = F.col(ic.id_column)
    if totals["rows"] == 0 and not ic.allow_empty:
        raise InputError(f"{source}: the input has no rows (set input.allow_empty=true to accept that)")
    if totals["non_null"] < totals["rows"]:
        nulls = raw.where(id_col.isNull()).select(*[F.col(c) for c in raw.columns[:4]]).limit(_SHOW).collect()
        raise InputError(
            f"{source}: id column {ic.id_column!r} has {totals['rows'] - totals['non_null']} null values, "
            f"e.g. in rows {_show(r.asDict() for r in nulls)}"
        )
    if totals["distinct"] < totals["rows"]:
        # fewer distinct hashes than ids: equal ids, or two ids whose hashes collide (then none is shown)
        dups = raw.groupBy(id_col).count().where(F.col("count") > 1).orderBy(id_col).limit(_SHOW).collect()
        if not dups:
            return
        raise InputError(
            f"{source}: id column {ic.id_column!r} has duplicate values, e.g. "
            + ", ".join(f"{r[0]!r} ({r[1]} rows)" for r in dups)
        )


def prepare_docs(raw: DataFrame, cfg: Config) -> DataFrame:
    """The job's working frame.

    Out: ``id``, ``text`` (text columns joined with a newline; null when all of them are null), with a
    title column ``title_text``, then the pass-through columns and the representative policy's column.
    """
    ic = cfg.input
    texts = [F.col(c) for c in ic.text_columns]
    all_null = F.lit(True)
    for t in texts:
        all_null = all_null & t.isNull()
    text = F.when(all_null, F.lit(None).cast("string")).otherwise(F.concat_ws("\n", *texts))
    extras = list(
        dict.fromkeys([*ic.passthrough_columns, *filter(None, [policy_column(cfg.cluster.representative)])])
    )
    extras = [c for c in extras if c not in (C.ID, C.TEXT)]
    title = [F.col(ic.title_column).alias(C.TITLE)] if ic.title_column else []
    return raw.select(
        F.col(ic.id_column).alias(C.ID),
        text.alias(C.TEXT),
        *title,
        *[F.col(c) for c in extras if c != C.TITLE],
    )


def _glob_root(path: str) -> str:
    """The folder a glob pattern reads below (the path itself when it has no pattern)."""
    m = _GLOB.search(path)
    return path if m is None else path[: m.start()].rpartition("/")[0] or "."


def _location(spark: SparkSession, path: str) -> str:
    parsed = urlparse(path)
    if parsed.scheme in ("", "file"):
        return os.path.realpath(os.path.abspath(unquote(parsed.path) if parsed.scheme else path))
    return FileSystem(spark, path).qualified(path).rstrip("/")


def check_locations(
    spark: SparkSession,
    *,
    output: str,
    index: str | None,
    input_path: str | None,
    input_table: str | None,
) -> None:
    """Exit 2 before any work when the output or the index is, holds or lies inside an input, or the two
    overlap each other: a replaced output or a cleaned index would delete the data being read."""
    inputs: list[tuple[str, str]] = []
    if input_path:
        root = input_path if _exists_literally(spark, input_path) else _glob_root(input_path)
        inputs.append((f"--input {input_path}", root))
    if input_table:
        location = table_location(spark, input_table)
        if location:
            inputs.append((f"--input-table {input_table} (at {location})", location))
    written = [(f"--output {output}", output)] + ([(f"--index {index}", index)] if index else [])
    for what, p in written:
        fs = FileSystem(spark, p)
        target = fs.link_target(p)
        if target is not None and not fs.exists(p):
            raise ConfigError(f"{what} is a symbolic link to {target}, which does not exist")
    resolved = [(what, _location(spark, p)) for what, p in inputs + written]
    n_inputs = len(inputs)
    for i, (what_a, a) in enumerate(resolved):
        for what_b, b in resolved[max(i + 1, n_inputs) :]:  # never two inputs with each other
            if a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/"):
                raise ConfigError(
                    f"{what_b} and {what_a} overlap ({b} vs {a}): the job would delete or rewrite what it "
                    "reads or keeps. Use separate locations"
                )


# A Parquet writer holds its row group in the heap until it is full, outside Spark's memory accounting:
# with long texts, each writing task's buffer adds to the input row group it reads. Parquet's default
# (128 MiB) makes that the write stage's largest allocation; smaller row groups bound it.
ROW_GROUP_BYTES = 32 << 20


def write_parquet(df: DataFrame, path: str) -> None:
    df.write.mode("error").option("parquet.block.size", ROW_GROUP_BYTES).parquet(path)


def write_all(outputs: Mapping[str, DataFrame]) -> None:
    """Write each frame to its path (``write_parquet``), as concurrent Spark jobs: a small run's writes
    are mostly each job's fixed cost on the driver, which then overlaps, and Spark's scheduler shares the
    cores among the tasks of large ones. Every write has ended when this returns or raises (nothing is
    left writing into a folder the caller may remove); the first failure in ``outputs``' order is raised.
    Spark Connect writes one after another."""
    from pyspark import InheritableThread  # copies the job group, so each write counts in its stage

    items = list(outputs.items())
    if not items:
        return
    if spark_context(items[0][1].sparkSession) is None:
        for path, df in items:
            write_parquet(df, path)
        return
    failures: dict[int, BaseException] = {}

    def write(i: int) -> None:
        try:
            write_parquet(items[i][1], items[i][0])
        except BaseException as e:  # raised by the caller's thread, below
            failures[i] = e

    others = [InheritableThread(target=write, args=(i,)) for i in range(1, len(items))]
    try:
        for thread in others:
            thread.start()
        write(0)
    finally:
        for thread in others:
            if thread.ident is not None:
                thread.join()
    if failures:
        raise failures[min(failures)]


OUTPUTS = C.OUTPUTS


def quote_identifier(name: str) -> str:
    """``db.table`` → ```db`.`table``` (each part quoted, embedded backticks doubled)."""
    return ".".join("`" + part.replace("`", "``") + "`" for part in name.split("."))


def describe_table(spark: SparkSession, table: str) -> dict[str, str]:
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {quote_identifier(table)}").collect()
    return {str(r[0]).strip(): str(r[1] or "").strip() for r in rows}


def table_location(spark: SparkSession, table: str) -> str | None:
    """Where a catalog table's files are (None for a view or a table without a location)."""
    try:
        return describe_table(spark, table).get("Location") or None
    except Exception:
        return None


def sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
