"""Catalog tables for the outputs (``--output-table-prefix PREFIX``): ``PREFIX{documents,pairs,clusters,
deduplicated}``, in one of two layouts (``output.table_layout``):

- ``external``: each table is an external table over one run's published folder; a run re-points it.
- ``partitioned``: each table holds every run, partitioned by ``run_date``; a run replaces its own date's
  partition and leaves every other date as it was. Created on first use with the outputs' schema.

The job touches only tables it created: each carries ``OWNER_PROPERTY`` = the output's name (and, for the
partitioned layout, ``LAYOUT_PROPERTY`` = ``partitioned``). Anything else is refused before any work.
Tables are written after the folder is published (and the index committed), from the published files, so a
table never shows what the output folder does not (docs/deploy.md, "Catalog tables").
"""

from __future__ import annotations

import contextlib
import logging
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from simhash_spark import columns as C
from simhash_spark.config import Config
from simhash_spark.errors import OutputError, essence
from simhash_spark.io import OUTPUTS, describe_table, quote_identifier, sql_string
from simhash_spark.storage import join, literal

log = logging.getLogger(__name__)

OWNER_PROPERTY = "simhash_spark.output"  # set on every table the job creates: the tables it may write
LAYOUT_PROPERTY = "simhash_spark.layout"
PARTITIONED = "partitioned"
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class OutputTables:
    """Where a run's outputs go in the catalog: ``names`` maps output folder name → table name."""

    names: dict[str, str]
    layout: str = "external"
    table_format: str = "parquet"
    run_date: str | None = None

    @classmethod
    def from_config(cls, cfg: Config, prefix: str | None, run_date: str | None) -> OutputTables:
        """``prefix`` is ``[catalog.][db.]prefix``, every part letters, digits and underscores."""
        if not prefix:
            return cls({})
        wanted = [n for n in OUTPUTS if n != "deduplicated" or cfg.output.write_deduplicated]
        names = {n: f"{prefix}{n}" for n in wanted}
        for table in names.values():
            parts = table.split(".")
            if len(parts) > 3 or not all(_IDENTIFIER.match(p) for p in parts):
                raise OutputError(
                    f"--output-table-prefix {prefix!r}: {table!r} is not a table name this job writes "
                    "([catalog.][database.]name, each part letters, digits and underscores, not starting with a "
                    "digit)"
                )
        layout = cfg.output.table_layout
        if layout == PARTITIONED and run_date is None:
            raise OutputError("output.table_layout = 'partitioned' needs the run's date (--run-date)")
        return cls(names, layout, cfg.output.table_format, run_date)

    @property
    def partitioned(self) -> bool:
        return self.layout == PARTITIONED

    def check(self, spark: SparkSession, *, overwrite: bool) -> None:
        """Before any work: every existing target is one this job created in this layout, and (without
        ``overwrite``) holds nothing the run would replace; the database the tables go in exists; the
        session can create tables in ``output.table_format``."""
        if self.partitioned and self.names:
            _check_format(spark, self.table_format)
        for database in sorted({t.rpartition(".")[0] for t in self.names.values()} - {""}):
            if not spark.catalog.databaseExists(database):
                raise OutputError(
                    f"--output-table-prefix: database {database!r} does not exist; create it first "
                    f"(CREATE DATABASE {quote_identifier(database)}) or name another"
                )
        for name, table in self.names.items():
            if not spark.catalog.tableExists(table):
                continue
            if not self.partitioned:
                if not overwrite:
                    raise OutputError(f"table {table!r} already exists; pass --overwrite to replace it")
                why = _owned(spark, table, name)
                if why:
                    raise OutputError(f"table {table!r} exists and {why}; refusing to replace it")
                continue
            _check_partitioned(spark, table, name)
            if not overwrite and _holds_date(spark, table, self.run_date):
                raise OutputError(
                    f"table {table!r} already holds {C.RUN_DATE} = {self.run_date}; pass --overwrite to replace "
                    "that partition"
                )

    def prepare(self, spark: SparkSession, folders: dict[str, str]) -> None:
        """After the outputs are staged, before anything is committed: partitioned tables are created if
        absent and must take the staged outputs' columns (a mismatch is refused before the index commit)."""
        if not self.partitioned:
            return
        for name, table in self.names.items():
            schema = spark.read.parquet(literal(folders[name])).schema
            if C.RUN_DATE in schema.names:
                raise OutputError(
                    f"output {name!r} has a column {C.RUN_DATE!r} (from the input), the partition column of "
                    f"table {table!r}; rename it in the input or use output.table_layout = 'external'"
                )
            _create_if_absent(spark, table, name, schema, self.table_format)
            _check_partitioned(spark, table, name)
            _check_columns(spark, table, schema)

    def write(self, spark: SparkSession, output: str) -> None:
        """After the output folder is published: point the external tables at it, or replace the run
        date's partition of each partitioned table with the published rows."""
        if not self.partitioned:
            _register_external(spark, self.names, output)
            return
        assert self.run_date is not None
        for name, table in self.names.items():
            rows = spark.read.parquet(literal(join(output, name))).withColumn(
                C.RUN_DATE, F.lit(self.run_date)
            )
            _replace_date(spark, table, rows, self.run_date)
            log.info("wrote %s partition %s=%s from %s", table, C.RUN_DATE, self.run_date, join(output, name))


def _properties(spark: SparkSession, table: str) -> dict[str, str]:
    rows = spark.sql(f"SHOW TBLPROPERTIES {quote_identifier(table)}").collect()
    return {str(r[0]): str(r[1]) for r in rows}


def _check_partitioned(spark: SparkSession, table: str, name: str) -> None:
    props = _properties(spark, table)
    if props.get(OWNER_PROPERTY) != name or props.get(LAYOUT_PROPERTY) != PARTITIONED:
        raise OutputError(
            f"table {table!r} exists and was not created by this job as the partitioned {name!r} output (no "
            f"{OWNER_PROPERTY}={name}, {LAYOUT_PROPERTY}={PARTITIONED} properties); refusing to write into it"
        )
    partitions = [c.name for c in spark.catalog.listColumns(table) if c.isPartition]
    if partitions != [C.RUN_DATE]:
        raise OutputError(f"table {table!r} is partitioned by {partitions}, not [{C.RUN_DATE!r}]")


def _holds_date(spark: SparkSession, table: str, run_date: str | None) -> bool:
    return not spark.read.table(table).where(F.col(C.RUN_DATE) == F.lit(run_date)).limit(1).isEmpty()


def _check_format(spark: SparkSession, table_format: str) -> None:
    """The session has a data source for ``table_format`` (Delta, Iceberg and Hudi need their packages and
    catalog settings), else exit 2 before any work instead of failing at the write."""
    jvm = getattr(spark, "_jvm", None)
    session = getattr(spark, "_jsparkSession", None)
    if jvm is None or session is None:  # Spark Connect: the server checks it when the table is created
        return
    try:
        jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
            table_format, session.sessionState().conf()
        )
    except Exception as e:
        raise OutputError(
            f"output.table_format: {table_format!r} is not a data source this Spark session has ({essence(e)}); "
            "add its package and catalog settings (docs/deploy.md, Catalog tables) or use 'parquet'"
        ) from None


def _create_if_absent(
    spark: SparkSession, table: str, name: str, schema: T.StructType, table_format: str
) -> None:
    if spark.catalog.tableExists(table):
        return
    declared = T.StructType([*schema.fields, T.StructField(C.RUN_DATE, T.StringType())])
    empty = spark.createDataFrame([], declared)
    try:
        (
            empty.writeTo(table)
            .using(table_format)
            .partitionedBy(F.col(C.RUN_DATE))
            .tableProperty(OWNER_PROPERTY, name)
            .tableProperty(LAYOUT_PROPERTY, PARTITIONED)
            .create()
        )
        log.info("created table %s (%s, partitioned by %s)", table, table_format, C.RUN_DATE)
    except AnalysisException:
        if not spark.catalog.tableExists(table):
            raise
        # another run created it first: its properties and columns are checked next, as for any table


def _check_columns(spark: SparkSession, table: str, schema: T.StructType) -> None:
    have = {f.name: f.dataType for f in spark.read.table(table).schema.fields if f.name != C.RUN_DATE}
    want = {f.name: f.dataType for f in schema.fields}
    missing = [n for n in want if n not in have]
    extra = [n for n in have if n not in want]
    changed = [n for n in want if n in have and have[n] != want[n]]
    if missing or extra or changed:
        raise OutputError(
            f"table {table!r} does not take this run's columns (not in the table: {missing}; not in this run's "
            f"output: {extra}; other types: {changed}); write to a new --output-table-prefix or alter the table"
        )


def _replace_date(spark: SparkSession, table: str, rows: DataFrame, run_date: str) -> None:
    """Replace one date's rows. Catalogs with their own table format (Iceberg, Delta) take it as one
    commit through DataFrameWriterV2: ``overwrite(run_date = D)`` rather than ``overwritePartitions()``,
    which would keep the old rows of a date whose new output is empty. Spark's built-in (v1) tables do
    not take v2 writes: a dynamic partition overwrite there, or dropping the partition when it is empty."""
    try:
        rows.writeTo(table).overwrite(F.col(C.RUN_DATE) == F.lit(run_date))
        return
    except AnalysisException as e:
        if "v1 table" not in str(e).lower():
            raise
    if rows.isEmpty():
        spark.sql(
            f"ALTER TABLE {quote_identifier(table)} DROP IF EXISTS PARTITION ({C.RUN_DATE} = {sql_string(run_date)})"
        )
        return
    order = [c.name for c in spark.catalog.listColumns(table)]
    view = f"simhash_spark_rows_{uuid.uuid4().hex}"
    rows.select(*order).createOrReplaceTempView(view)
    try:
        with _session_conf(spark, "spark.sql.sources.partitionOverwriteMode", "dynamic"):
            # dynamic: the date's files are swapped in when the write commits, not deleted before it starts
            spark.sql(
                f"INSERT OVERWRITE TABLE {quote_identifier(table)} PARTITION ({C.RUN_DATE}) SELECT * FROM {view}"
            )
    finally:
        spark.catalog.dropTempView(view)


@contextlib.contextmanager
def _session_conf(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    before = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


def _owned(spark: SparkSession, table: str, name: str) -> str | None:
    """None if ``table`` is the external table this job registered for output ``name``, else why not."""
    info = describe_table(spark, table)
    kind = info.get("Type", "").upper()
    props = info.get("Table Properties", "")
    if kind != "EXTERNAL":
        return f"it is a {kind.lower() or 'non-external'} table"
    if f"{OWNER_PROPERTY}={name}" not in props.replace(" ", ""):
        return f"it has no {OWNER_PROPERTY}={name} property (it was not registered by this job)"
    location = info.get("Location", "")
    if not location.rstrip("/").endswith("/" + name):
        return f"its location {location} is not an output folder {name}/"
    return None


def _register_external(spark: SparkSession, names: dict[str, str], output: str) -> None:
    """Point external tables at the published folders (dropping one never deletes the output)."""
    for name, table in names.items():  # checked again: the catalog may have changed during the run
        if spark.catalog.tableExists(table):
            why = _owned(spark, table, name)
            if why:
                raise OutputError(f"table {table!r} exists and {why}; refusing to replace it")
    for name, table in names.items():
        location = join(output, name)
        spark.sql(f"DROP TABLE IF EXISTS {quote_identifier(table)}")
        spark.sql(
            f"CREATE TABLE {quote_identifier(table)} USING parquet LOCATION {sql_string(location)} "
            f"TBLPROPERTIES ({sql_string(OWNER_PROPERTY)} = {sql_string(name)})"
        )
        log.info("registered table %s -> %s", table, location)
