"""Data safety of inputs, outputs and catalog tables: nothing the user did not name is deleted, dropped or
silently left out (docs/reliability.md)."""

import json
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from simhash_spark.cli import main
from simhash_spark.config import load_config
from simhash_spark.core.fingerprint import Fingerprinter
from simhash_spark.errors import OutputError
from simhash_spark.io import quote_identifier
from simhash_spark.tables import OutputTables

TEXT = "新华社北京电 国务院总理今天主持召开常务会议，部署进一步做好稳就业工作，会议指出就业是最大的民生。" * 3


def corpus(path, n=6, start=0, **extra_columns):
    ids = [f"d{i}" for i in range(start, start + n)]
    texts = [f"{TEXT} 第{i}篇，编号{i * 7919}。" for i in range(start, start + n)]
    pq.write_table(pa.table({"id": ids, "text": texts, **extra_columns}), path)
    return path


def run(capsys, *args):
    code = main(list(args))
    return code, capsys.readouterr().err


# --- where the job writes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("layout", "expected"),
    [
        # an output folder that holds the input is not an output of this job: that rule refuses it first
        ("output-is-input", r"holds part\.parquet, which this job does not write"),
        ("output-inside-input", r"--output \S+ and --input \S+ overlap"),
        ("output-holds-input", r"holds data, which this job does not write"),
        ("index-is-input", r"--index \S+ and --input \S+ overlap"),
        ("output-inside-index", r"--index \S+ and --output \S+ overlap"),
    ],
)
def test_an_output_or_index_overlapping_the_input_is_refused_and_the_input_kept(
    spark, tmp_path, capsys, layout, expected
):
    data = tmp_path / "data"
    data.mkdir()
    corpus(data / "part.parquet")
    index = None
    output = {
        "output-is-input": data,
        "output-inside-input": data / "out",
        "output-holds-input": tmp_path,
        "index-is-input": tmp_path / "out",
        "output-inside-index": tmp_path / "index" / "out",
    }[layout]
    if layout == "index-is-input":
        index = data
    if layout == "output-inside-index":
        index = tmp_path / "index"
    extra = ["--index", str(index), "--run-date", "2026-01-01"] if index else []
    code, err = run(capsys, "dedup", "--input", str(data), "--output", str(output), "--overwrite", *extra)
    assert code == 2 and re.search(expected, err), err
    assert pq.read_table(data / "part.parquet").num_rows == 6


@pytest.fixture
def no_spark(monkeypatch):
    """Fails the test if the command starts Spark: what it refuses, it refuses before any work."""
    import simhash_spark.session

    def refuse(*args, **kwargs):
        raise AssertionError("Spark was started")

    monkeypatch.setattr(simhash_spark.session, "build_session", refuse)


def a_job_output(folder):
    folder.mkdir()
    for name in ("documents", "pairs", "clusters", "deduplicated"):
        (folder / name).mkdir()
        (folder / name / "part-0.parquet").write_bytes(b"PAR1")
    (folder / "summary.json").write_text("{}")
    (folder / "_SUCCESS").write_text("20261102T101010-0123456789\n")
    return folder


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("thesis", "holds thesis.txt, which this job does not write"),
        ("file", "is a file, not an output folder of this job"),
        ("output-and-thesis", "holds thesis.txt, which this job does not write"),
        ("output-without-success", "has no _SUCCESS marker of this job"),
        ("link-to-output", "is a symbolic link"),
        ("dangling-link", "is a symbolic link"),
    ],
)
def test_overwrite_replaces_only_an_output_of_this_job(tmp_path, capsys, no_spark, target, message):
    out = tmp_path / "out"
    if target == "thesis":
        out.mkdir()
        (out / "thesis.txt").write_text("years of work")
    elif target == "file":
        out.write_text("years of work")
    elif target == "output-and-thesis":
        a_job_output(out)
        (out / "thesis.txt").write_text("years of work")
    elif target == "output-without-success":
        a_job_output(out)
        (out / "_SUCCESS").unlink()
    elif target == "link-to-output":
        out.symlink_to(a_job_output(tmp_path / "real"))
    else:
        out.symlink_to(tmp_path / "nowhere")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    code, err = run(capsys, "dedup", "--input", "in.parquet", "--output", str(out), "--overwrite")
    assert code == 2 and message in err and "othing was changed" in err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    if target in ("thesis", "output-and-thesis"):
        assert (out / "thesis.txt").read_text() == "years of work"


def test_overwrite_replaces_an_output_of_this_job_or_an_empty_folder(spark, tmp_path, capsys):
    inp = corpus(tmp_path / "c.parquet")
    for out in (a_job_output(tmp_path / "old"), tmp_path / "empty"):
        out.mkdir(exist_ok=True)
        code, _ = run(capsys, "dedup", "--input", str(inp), "--output", str(out), "--overwrite")
        assert code == 0 and json.loads((out / "summary.json").read_text())["input_rows"] == 6


def test_refusals_on_other_file_systems_happen_before_any_work(spark, tmp_path, capsys):
    # the same rule once Spark is up, for a path the command line cannot check before (file:// URI)
    out = tmp_path / "out"
    out.mkdir()
    (out / "thesis.txt").write_text("years of work")
    code, err = run(
        capsys,
        "dedup",
        "--input",
        str(corpus(tmp_path / "c.parquet")),
        "--output",
        f"file://{out}",
        "--overwrite",
    )
    assert code == 2 and "holds thesis.txt" in err
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging, no lease


def test_a_dangling_link_as_index_is_refused_before_any_work(spark, tmp_path, capsys):
    (tmp_path / "index").symlink_to(tmp_path / "gone")
    out = tmp_path / "out"
    code, err = run(
        capsys,
        "dedup",
        "--input",
        str(corpus(tmp_path / "c.parquet")),
        "--output",
        str(out),
        "--index",
        str(tmp_path / "index"),
        "--run-date",
        "2026-11-02",
    )
    assert code == 2 and "is a symbolic link to" in err and "which does not exist" in err
    assert not out.exists() and not (tmp_path / "gone").exists()


def test_a_missing_database_is_refused_before_any_work(spark, tmp_path, capsys):
    out = tmp_path / "out"
    code, err = run(
        capsys,
        "dedup",
        "--input",
        str(corpus(tmp_path / "c.parquet")),
        "--output",
        str(out),
        "--output-table-prefix",
        "nosuchdb.t_",
    )
    assert code == 2 and "database 'nosuchdb' does not exist" in err
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == ["c.parquet"]


@pytest.mark.parametrize("name", ["a[1]", "b#c", "d%20e", "f{g,h}"])
def test_an_input_folder_whose_name_holds_pattern_or_url_characters_is_read_as_named(tmp_path, capsys, name):
    """A folder that exists as written is the input, whatever characters its name holds: not a pattern
    (``a[1]`` matched nothing, or another folder), not a URL (``#`` began a fragment, ``%20`` was decoded)."""
    folder = tmp_path / name
    folder.mkdir()
    corpus(folder / "part-0.parquet")
    (tmp_path / "a1").mkdir()  # what "a[1]" matches as a pattern: never read instead
    corpus(tmp_path / "a1" / "part-0.parquet", n=2, start=50)
    code, err = run(capsys, "dedup", "--input", str(folder), "--output", str(tmp_path / "out"))
    assert code == 0, err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["input_rows"] == 6


def test_a_passthrough_timestamp_with_a_time_zone_comes_back_as_the_same_instant(tmp_path, capsys):
    """Spark wrote timestamps as INT96 (zone-less nanoseconds to every reader): the instant was lost."""
    import datetime

    instant = datetime.datetime(2026, 1, 1, 8, 0, tzinfo=datetime.UTC)
    ts = pa.array([instant] * 6, pa.timestamp("us", tz="Asia/Shanghai"))
    inp = corpus(tmp_path / "in.parquet", ts=ts)
    code, err = run(
        capsys,
        "dedup",
        "--input",
        str(inp),
        "--output",
        str(tmp_path / "out"),
        "--set",
        'input.passthrough_columns=["ts"]',
    )
    assert code == 0, err
    for name in ("documents", "deduplicated"):
        column = pq.read_table(tmp_path / "out" / name).column("ts")
        assert column.type.tz is not None and column.type.unit == "us", (name, column.type)
        assert {v.astimezone(datetime.UTC) for v in column.to_pylist()} == {instant}


def test_an_index_path_with_pattern_characters_is_read_literally(spark, tmp_path, capsys):
    # Spark reads "[1]" in a path as a pattern: the index's folders are read literally on the Spark path
    index = tmp_path / "index[1]"
    spark_path = ["--set", "cluster.local_max_documents=0"]
    for day, start in (("2026-11-02", 0), ("2026-11-03", 3)):
        code, err = run(
            capsys,
            "dedup",
            "--input",
            str(corpus(tmp_path / f"{day}.parquet", start=start)),
            "--output",
            str(tmp_path / f"out-{day}"),
            "--index",
            str(index),
            "--run-date",
            day,
            *spark_path,
        )
        assert code == 0, err
    summary = json.loads((tmp_path / "out-2026-11-03" / "summary.json").read_text())
    assert summary["index"]["looked_up_on"] == "spark" and summary["status"]["already_indexed"] == 3


def test_an_output_path_hadoop_cannot_parse_is_exit_2(spark, tmp_path, capsys):
    code, err = run(capsys, "dedup", "--input", str(corpus(tmp_path / "c.parquet")), "--output", "x:y/out")
    assert code == 2 and "x:y/out" in err


def test_a_set_value_spanning_lines_is_exit_2(tmp_path, capsys):
    code, err = run(
        capsys,
        "dedup",
        "--input",
        "x",
        "--output",
        str(tmp_path / "o"),
        "--set",
        "match.max_distance=3\nbands.scheme=4x16",
    )
    assert code == 2 and "must be on one line" in err


# --- what the job reads ----------------------------------------------------------------------------------


def test_files_in_subfolders_spark_would_skip_are_named_not_dropped(spark, tmp_path, capsys):
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    corpus(data / "top.parquet")
    corpus(data / "sub" / "deep.parquet", start=100)
    code, err = run(capsys, "dedup", "--input", str(data), "--output", str(tmp_path / "out"))
    assert code == 2 and "1 file(s) under it would not be read" in err and "sub/deep.parquet" in err


def test_partition_folders_and_differing_schemas_are_read_whole(spark, tmp_path, capsys):
    data = tmp_path / "data"
    (data / "dt=2026-01-01").mkdir(parents=True)
    (data / "dt=2026-01-02").mkdir()
    corpus(data / "dt=2026-01-01" / "a.parquet")
    corpus(data / "dt=2026-01-02" / "b.parquet", start=100, source=["wire"] * 6)
    code, err = run(capsys, "dedup", "--input", str(data), "--output", str(tmp_path / "out"))
    assert code == 0, err
    kept = spark.read.parquet(str(tmp_path / "out" / "deduplicated"))
    assert {"dt", "source"} <= set(kept.columns)
    docs = spark.read.parquet(str(tmp_path / "out" / "documents"))
    assert docs.count() == 12
    assert {r["source"] for r in kept.collect()} == {None, "wire"}


# --- catalog tables ------------------------------------------------------------------------------------


def test_table_prefixes_are_validated_and_quoted():
    cfg = load_config()
    for bad in ("victim --", "a;DROP TABLE b;", "db.`x`", "1abc_", "a.b.c.d_"):
        with pytest.raises(OutputError, match="is not a table name this job writes"):
            OutputTables.from_config(cfg, bad, None)
    assert OutputTables.from_config(cfg, "dedup.news_", None).names["documents"] == "dedup.news_documents"
    partitioned = load_config(overrides=["output.table_layout=partitioned"])
    with pytest.raises(OutputError, match="needs the run's date"):
        OutputTables.from_config(partitioned, "dedup.news_", None)
    assert quote_identifier("db.news_documents") == "`db`.`news_documents`"
    assert quote_identifier("we`ird") == "`we``ird`"


def test_a_table_the_job_did_not_create_is_never_dropped(spark, tmp_path, capsys):
    spark.createDataFrame([(1, "precious")], "k int, v string").write.saveAsTable("safety_documents")
    inp = corpus(tmp_path / "c.parquet")
    try:
        code, err = run(
            capsys,
            "dedup",
            "--input",
            str(inp),
            "--output",
            str(tmp_path / "out"),
            "--overwrite",
            "--output-table-prefix",
            "safety_",
        )
        assert code == 2 and "table 'safety_documents' exists and it is a managed table" in err
        assert spark.table("safety_documents").collect()[0]["v"] == "precious"
        assert not (tmp_path / "out").exists()
        code, err = run(
            capsys,
            "dedup",
            "--input",
            str(inp),
            "--output",
            str(tmp_path / "out"),
            "--output-table-prefix",
            "victim --",
        )
        assert code == 2 and "is not a table name" in err
    finally:
        spark.sql("DROP TABLE IF EXISTS safety_documents")


def test_tables_the_job_registered_are_replaced_on_overwrite(spark, tmp_path, capsys):
    inp = corpus(tmp_path / "c.parquet")
    args = [
        "dedup",
        "--input",
        str(inp),
        "--output-table-prefix",
        "owned_",
        "--set",
        "output.write_report=false",
    ]
    try:
        assert main([*args, "--output", str(tmp_path / "a")]) == 0
        assert main([*args, "--output", str(tmp_path / "b"), "--overwrite"]) == 0
        assert spark.table("owned_documents").count() == 6
        location = [
            r for r in spark.sql("DESCRIBE TABLE EXTENDED owned_documents").collect() if r[0] == "Location"
        ]
        assert location[0][1].rstrip("/").endswith("b/documents")
    finally:
        for name in ("documents", "pairs", "clusters", "deduplicated"):
            spark.sql(f"DROP TABLE IF EXISTS owned_{name}")
    assert (tmp_path / "b" / "documents").is_dir()  # dropping the external tables kept the files


def distinct_corpus(path, n=5):
    """Documents that share no n-grams: no pairs."""
    chars = [chr(0x4E00 + i) for i in range(n * 200)]
    texts = ["".join(chars[i * 200 : (i + 1) * 200]) for i in range(n)]
    pq.write_table(pa.table({"id": [f"u{i}" for i in range(n)], "text": texts}), path)
    return path


def test_partitioned_tables_replace_only_the_run_date(spark, tmp_path, capsys):
    tables = {name: f"daily_{name}" for name in ("documents", "pairs", "clusters", "deduplicated")}
    days = {
        "2026-11-01": corpus(tmp_path / "d1.parquet", n=6),
        "2026-11-02": corpus(tmp_path / "d2.parquet", n=8),
    }
    days["2026-11-03"] = corpus(tmp_path / "d3.parquet", n=4)

    def run_day(day, inp, *extra, out=None):
        args = ["dedup", "--input", str(inp), "--output", str(tmp_path / (out or day)), "--run-date", day]
        args += ["--output-table-prefix", "daily_", "--set", "output.table_layout=partitioned", *extra]
        return run(capsys, *args, "--set", "output.write_report=false")

    def by_date(table):
        rows = spark.table(table).groupBy("run_date").count().collect()
        return {r["run_date"]: r["count"] for r in rows}

    def folder(day, name):
        return spark.read.parquet(str(tmp_path / day / name)).count()

    try:
        for day, inp in days.items():
            assert run_day(day, inp)[0] == 0
        first = {name: by_date(t) for name, t in tables.items()}
        for day in days:
            for name, table in tables.items():
                assert first[name].get(day, 0) == folder(day, name), (table, day)
        # a rerun without --overwrite is refused before any work, naming the partition
        code, err = run_day("2026-11-02", days["2026-11-02"], out="elsewhere")
        assert code == 2 and "already holds run_date = 2026-11-02" in err, err
        assert not (tmp_path / "elsewhere").exists()
        # rerun of the middle date with other input (no pairs at all): only that date changes
        rerun = distinct_corpus(tmp_path / "r.parquet")
        assert run_day("2026-11-02", rerun, "--overwrite")[0] == 0
        after = {name: by_date(t) for name, t in tables.items()}
        for name in tables:
            for day in ("2026-11-01", "2026-11-03"):
                assert after[name].get(day) == first[name].get(day), (name, day)
            assert after[name].get("2026-11-02", 0) == folder("2026-11-02", name), name
        assert after["documents"]["2026-11-02"] == 5 and "2026-11-02" not in after["pairs"]
        ids = {r["id"] for r in spark.table("daily_documents").where("run_date = '2026-11-02'").collect()}
        assert ids == {f"u{i}" for i in range(5)}
        props = dict(spark.sql("SHOW TBLPROPERTIES daily_pairs").collect())
        assert props["simhash_spark.output"] == "pairs" and props["simhash_spark.layout"] == "partitioned"
    finally:
        for table in tables.values():
            spark.sql(f"DROP TABLE IF EXISTS {table}")


def test_partitioned_layout_refuses_tables_it_did_not_create(spark, tmp_path, capsys):
    spark.createDataFrame(
        [(1, "precious", "2026-11-01")], "k int, v string, run_date string"
    ).write.partitionBy("run_date").saveAsTable("theirs_pairs")
    inp = corpus(tmp_path / "c.parquet")
    try:
        code, err = run(
            capsys,
            "dedup",
            "--input",
            str(inp),
            "--output",
            str(tmp_path / "out"),
            "--overwrite",
            "--run-date",
            "2026-11-01",
            "--output-table-prefix",
            "theirs_",
            "--set",
            "output.table_layout=partitioned",
        )
        assert code == 2 and "'theirs_pairs' exists and was not created by this job" in err, err
        assert spark.table("theirs_pairs").collect()[0]["v"] == "precious"
        assert not (tmp_path / "out").exists() and not spark.catalog.tableExists("theirs_documents")
    finally:
        spark.sql("DROP TABLE IF EXISTS theirs_pairs")


# --- crawled HTML --------------------------------------------------------------------------------------


def test_an_unterminated_comment_does_not_make_two_articles_one():
    head = "<p>今日要闻：本报记者从有关部门获悉，以下为全文。</p><!-- 广告位 "
    a = head + "第一篇文章讲的是农业生产和粮食安全，今年夏粮再获丰收，产量创下历史新高。" * 2
    b = head + "第二篇文章讲的是城市交通，地铁新线路开通运营，市民出行更加便利快捷。" * 2
    batch = Fingerprinter(load_config().model).batch([a, b])
    assert int(batch.fingerprint[0]) != int(batch.fingerprint[1])


# --- check ---------------------------------------------------------------------------------------------


def test_check_rejects_input_that_is_not_utf8_or_not_text(tmp_path, capsys):
    gbk = tmp_path / "gbk.txt"
    gbk.write_bytes("第一行\n新闻正文".encode("gb18030"))
    code, err = run(capsys, "check", "--index", str(tmp_path / "none"), "--file", str(gbk))
    assert code == 2 and "not UTF-8 (line 1" in err and str(gbk) in err
    for line, message in (
        ('{"id": 1, "text": 5}', '"text" is int'),
        ('{"id": 2, "text": ["a"]}', '"text" is list'),
        ('{"id": NaN, "text": "x"}', '"id" is nan'),
        ("[1, 2]", 'expected a JSON object with a "text" key'),
    ):
        f = tmp_path / "q.jsonl"
        f.write_text('{"id": 0, "text": "ok"}\n' + line + "\n")
        code, err = run(capsys, "check", "--index", str(tmp_path / "none"), "--file", str(f), "--jsonl")
        assert code == 2 and message in err and "line 2" in err, err


# --- what the command line refuses before any work ----------------------------------------------------


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--retention-days", "-1", "--retention-days: index.retention_days: must be 0..365000"),
        ("--retention-days", "100000000", "must be 0..365000"),
        ("--max-drop-fraction", "nan", "--max-drop-fraction: index.max_drop_fraction: expected a finite"),
        ("--max-drop-fraction", "2", "index.max_drop_fraction: must be between 0 and 1"),
        ("--keep-recent", "-2", "--keep-recent: index.keep_recent: must be >= 0"),
        ("--min-snapshots", "0", "index.compact_min_snapshots: must be >= 1"),
    ],
)
def test_compaction_options_are_validated_as_the_configuration_is(tmp_path, capsys, option, value, message):
    # refused before Spark starts and before the index is opened: it does not even have to exist
    code, err = run(capsys, "index", "compact", str(tmp_path / "index"), option, value)
    assert code == 2 and message in err
    assert not (tmp_path / "index").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["dedup", "--input", "x", "--output", "o", "--index", "", "--run-date", "2026-11-02"],
        ["dedup", "--input", "x", "--output", ""],
        ["check", "--index", " ", "text"],
        ["index", "stats", ""],
    ],
)
def test_an_empty_path_is_named_as_empty(capsys, args):
    code, err = run(capsys, *args)
    empty = next(a for a in args[1:] if not a.strip())
    option = args[args.index(empty) - 1] if args[0] != "index" else "--path"
    assert code == 2 and f"{option}: empty value" in err and "--run-date" not in err.split("error:")[1]


def test_hidden_input_files_are_named_in_the_log_and_summary(spark, tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    corpus(data / "part-0.parquet")
    corpus(data / "_backfill.parquet", start=10)  # Spark skips names starting with _ or .
    (data / "_SUCCESS").write_text("")  # Spark's own marker: not data
    out = tmp_path / "out"
    code, err = run(capsys, "dedup", "--input", str(data), "--output", str(out))
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["input_rows"] == 6
    assert summary["skipped_files"] == {"count": 1, "files": ["_backfill.parquet"]}
    assert "1 hidden file(s) not read" in err and "_backfill.parquet" in err
