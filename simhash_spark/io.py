"""Reading and validating the input; writing the output atomically."""

from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from simhash_spark import columns as C
from simhash_spark.config import Config
from simhash_spark.errors import InputError, OutputError, essence
from simhash_spark.transforms.clusters import policy_column

log = logging.getLogger(__name__)

_ID_TYPES = (T.StringType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.DecimalType)
_SHOW = 5


def read_input(spark: SparkSession, *, path: str | None = None, table: str | None = None) -> DataFrame:
    """A Parquet file, directory or glob, or a catalog table."""
    try:
        if table:
            return spark.read.table(table)
        assert path is not None
        return spark.read.parquet(path)
    except Exception as e:  # AnalysisException for a missing path, a JVM error for a corrupt file
        what = f"table {table!r}" if table else f"input {path!r}"
        raise InputError(f"cannot read {what}: {essence(e)}") from None


def _show(values: Iterable[Any]) -> str:
    return ", ".join(repr(v) for v in values)


def validate_input(raw: DataFrame, cfg: Config, *, source: str) -> None:
    """Schema checks, then null and duplicate ids (two aggregations over the input)."""
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

    id_col = F.col(ic.id_column)
    # One pass in the common case; the queries that show offending values run only on failure.
    totals = raw.agg(
        F.count(F.lit(1)).alias("rows"),
        F.count(id_col).alias("non_null"),
        F.count_distinct(id_col).alias("distinct"),
    ).first()
    assert totals is not None
    if totals["rows"] == 0 and not ic.allow_empty:
        raise InputError(f"{source}: the input has no rows (set input.allow_empty=true to accept that)")
    if totals["non_null"] < totals["rows"]:
        nulls = raw.where(id_col.isNull()).select(*[F.col(c) for c in raw.columns[:4]]).limit(_SHOW).collect()
        raise InputError(
            f"{source}: id column {ic.id_column!r} has {totals['rows'] - totals['non_null']} null values, "
            f"e.g. in rows {_show(r.asDict() for r in nulls)}"
        )
    if totals["distinct"] < totals["rows"]:
        dups = raw.groupBy(id_col).count().where(F.col("count") > 1).orderBy(id_col).limit(_SHOW).collect()
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


# --- output -------------------------------------------------------------------------------------------


class FileSystem:
    """The few file operations publishing needs, for local paths and any Hadoop file system
    (HDFS, S3A, ...) through the JVM of a classic Spark session."""

    def __init__(self, spark: SparkSession, path: str) -> None:
        scheme = urlparse(path).scheme
        self.local = scheme in ("", "file")
        self._fs: Any = None
        self._jvm: Any = None
        if not self.local:
            jvm = getattr(spark, "_jvm", None)
            if jvm is None:
                raise OutputError(f"{path}: only local output paths are supported without a JVM session")
            self._jvm = jvm
            conf = spark._jsc.hadoopConfiguration()
            self._fs = jvm.org.apache.hadoop.fs.Path(path).getFileSystem(conf)

    @staticmethod
    def _local(path: str) -> str:
        return urlparse(path).path if path.startswith("file:") else path

    def _p(self, path: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(self._local(path)) if self.local else bool(self._fs.exists(self._p(path)))

    def delete(self, path: str) -> None:
        if self.local:
            p = self._local(path)
            if os.path.isdir(p):
                shutil.rmtree(p, ignore_errors=True)
            elif os.path.exists(p):
                os.remove(p)
        else:
            self._fs.delete(self._p(path), True)

    def rename(self, src: str, dst: str) -> None:
        if self.local:
            os.rename(self._local(src), self._local(dst))
        elif not self._fs.rename(self._p(src), self._p(dst)):
            raise OutputError(f"could not rename {src} to {dst}")

    def mkdirs(self, path: str) -> None:
        if self.local:
            os.makedirs(self._local(path), exist_ok=True)
        else:
            self._fs.mkdirs(self._p(path))

    def read_text(self, path: str) -> str:
        if self.local:
            with open(self._local(path), encoding="utf-8") as fh:
                return fh.read()
        stream = self._fs.open(self._p(path))
        try:
            return str(self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
        finally:
            stream.close()

    def list_names(self, path: str) -> list[str]:
        """Names in a folder (empty when it does not exist)."""
        if self.local:
            p = self._local(path)
            return sorted(os.listdir(p)) if os.path.isdir(p) else []
        if not self._fs.exists(self._p(path)):
            return []
        return sorted(str(st.getPath().getName()) for st in self._fs.listStatus(self._p(path)))

    def write_text(self, path: str, text: str) -> None:
        data = text.encode("utf-8")
        if self.local:
            with open(self._local(path), "wb") as fh:
                fh.write(data)
        else:
            out = self._fs.create(self._p(path), True)
            try:
                out.write(bytearray(data))
            finally:
                out.close()


def _join(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name


@dataclass
class Publisher:
    """Writes a run into a hidden staging folder beside OUTPUT, then swaps it in with one rename, so a
    reader sees either the previous complete output or the new complete output, never a partial one."""

    fs: FileSystem
    output: str
    overwrite: bool
    staging: str = ""

    def __post_init__(self) -> None:
        out = self.output.rstrip("/")
        parent, _, name = out.rpartition("/")
        run = uuid.uuid4().hex[:12]
        prefix = (parent + "/") if parent else ""
        self.staging = f"{prefix}.{name}.staging-{run}"
        self._old = f"{prefix}.{name}.old-{run}"

    def prepare(self) -> None:
        """Refuse early (before any work) when OUTPUT exists and overwriting was not asked for, and create
        the staging folder now so an unwritable location fails before hours of computing."""
        if self.fs.exists(self.output) and not self.overwrite:
            raise OutputError(f"output {self.output!r} already exists; pass --overwrite to replace it")
        try:
            self.fs.mkdirs(self.staging)
            self.fs.write_text(self.path("_RUNNING"), "")
        except Exception as e:
            self.abort()
            raise OutputError(f"output {self.output!r} is not writable: {essence(e)}") from None

    def path(self, name: str) -> str:
        return _join(self.staging, name)

    def write_json(self, name: str, obj: Any) -> None:
        self.fs.write_text(
            self.path(name), json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False) + "\n"
        )

    def write_text(self, name: str, text: str) -> None:
        self.fs.write_text(self.path(name), text)

    def publish(self) -> None:
        self.fs.delete(self.path("_RUNNING"))
        self.fs.write_text(self.path("_SUCCESS"), "")
        if self.fs.exists(self.output):
            if not self.overwrite:
                raise OutputError(f"output {self.output!r} appeared during the run; not replacing it")
            self.fs.rename(self.output, self._old)
            self.fs.rename(self.staging, self.output)
            self.fs.delete(self._old)
        else:
            parent = self.output.rstrip("/").rpartition("/")[0]
            if parent:
                self.fs.mkdirs(parent)
            self.fs.rename(self.staging, self.output)
        log.info("published %s", self.output)

    def abort(self) -> None:
        try:
            self.fs.delete(self.staging)
        except Exception:
            log.warning("could not remove staging folder %s", self.staging)


def write_parquet(df: DataFrame, path: str) -> None:
    df.write.mode("error").parquet(path)


OUTPUTS = ("documents", "pairs", "clusters", "deduplicated")


def output_tables(cfg: Config, prefix: str | None) -> dict[str, str]:
    """Output folder name → catalog table name, for ``--output-table-prefix``."""
    if not prefix:
        return {}
    names = [n for n in OUTPUTS if n != "deduplicated" or cfg.output.write_deduplicated]
    return {n: f"{prefix}{n}" for n in names}


def check_tables(spark: SparkSession, tables: dict[str, str], *, overwrite: bool) -> None:
    """Refuse before any work when a target table exists and overwriting was not asked for."""
    for table in tables.values():
        if spark.catalog.tableExists(table) and not overwrite:
            raise OutputError(f"table {table!r} already exists; pass --overwrite to replace it")


def register_tables(spark: SparkSession, tables: dict[str, str], output: str) -> None:
    """Point catalog tables at the published Parquet folders (external tables: dropping one never deletes
    the output). Runs after the files are published, so a table never shows a partial run."""
    for name, table in tables.items():
        spark.sql(f"DROP TABLE IF EXISTS {table}")
        spark.catalog.createTable(table, path=_join(output, name), source="parquet")
        log.info("registered table %s -> %s", table, _join(output, name))
