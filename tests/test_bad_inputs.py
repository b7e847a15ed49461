"""Bad input and configuration: a clear message naming the column/value/file and exit code 2."""

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from simhash_spark.cli import main

TEXT = "北京市政府今天发布了城市更新方案，计划覆盖一百二十个项目，涉及多个街道。"


def write(tmp_path, table: pa.Table, name="in.parquet"):
    path = tmp_path / name
    pq.write_table(table, path)
    return str(path)


def run(args, capsys):
    code = main(args)
    return code, capsys.readouterr().err


def dedup(inp, out, *extra):
    return ["dedup", "--input", inp, "--output", str(out), *extra]


@pytest.mark.parametrize(
    ("table", "extra", "message"),
    [
        (pa.table({"id": ["a"], "body": [TEXT]}), [], "column 'text' not found (columns: id, body)"),
        (pa.table({"doc": ["a"], "text": [TEXT]}), [], "column 'id' not found"),
        (
            pa.table({"id": ["a"], "text": [TEXT.encode()]}),
            [],
            "text column 'text' has type binary; expected string",
        ),
        (pa.table({"id": ["a"], "text": [5]}), [], "text column 'text' has type bigint; expected string"),
        (pa.table({"id": [1.5], "text": [TEXT]}), [], "id column 'id' has type double"),
        (
            pa.table({"id": ["a", None, None], "text": [TEXT, "x", "y"]}),
            [],
            "id column 'id' has 2 null values",
        ),
        (
            pa.table({"id": ["a", "b", "a", "c", "c"], "text": [TEXT] * 5}),
            [],
            "id column 'id' has duplicate values, e.g. 'a' (2 rows), 'c' (2 rows)",
        ),
        (
            pa.table({"id": pa.array([], pa.string()), "text": pa.array([], pa.string())}),
            [],
            "the input has no rows",
        ),
        (
            pa.table({"id": ["a"], "text": [TEXT]}),
            ["--set", 'input.passthrough_columns=["status"]'],
            "input.passthrough_columns: 'status' would overwrite columns the job writes",
        ),
        (
            pa.table({"id": ["a"], "text": [TEXT]}),
            ["--set", 'input.passthrough_columns=["text"]'],
            "input.passthrough_columns: 'text' would overwrite columns the job writes or uses internally",
        ),
        (
            pa.table({"id": ["a"], "text": [TEXT], "title_text": ["t"]}),
            ["--set", 'input.passthrough_columns=["title_text"]'],
            "input.passthrough_columns: 'title_text' would overwrite columns",
        ),
        (
            pa.table({"id": ["a"], "text": [TEXT]}),
            ["--set", 'input.passthrough_columns=["source"]'],
            "column 'source' not found",
        ),
        (
            pa.table({"id": ["a"], "text": [TEXT]}),
            ["--set", "cluster.representative=min:published"],
            "column 'published' not found",
        ),
    ],
    ids=[
        "missing-text",
        "missing-id",
        "binary-text",
        "integer-text",
        "float-id",
        "null-ids",
        "duplicate-ids",
        "empty",
        "passthrough-clash",
        "passthrough-text",
        "passthrough-title",
        "passthrough-missing",
        "missing-policy-column",
    ],
)
def test_bad_input_exit_2_with_message(spark, tmp_path, capsys, table, extra, message):
    inp = write(tmp_path, table)
    code, err = run(dedup(inp, tmp_path / "out", *extra), capsys)
    assert code == 2, err
    assert message in err
    assert not (tmp_path / "out").exists()
    assert not [p for p in os.listdir(tmp_path) if ".staging-" in p]


def test_missing_input_path(spark, tmp_path, capsys):
    code, err = run(dedup(str(tmp_path / "nope.parquet"), tmp_path / "out"), capsys)
    assert code == 2
    assert "cannot read input" in err and "nope.parquet" in err


def test_not_parquet(spark, tmp_path, capsys):  # a single file that is not Parquet
    bad = tmp_path / "bad.parquet"
    bad.write_text("this is not parquet", encoding="utf-8")
    code, err = run(dedup(str(bad), tmp_path / "out"), capsys)
    assert code == 2
    assert "bad.parquet" in err
    assert not (tmp_path / "out").exists()


def test_bad_config_value(spark, tmp_path, capsys):
    inp = write(tmp_path, pa.table({"id": ["a"], "text": [TEXT]}))
    code, err = run(
        dedup(inp, tmp_path / "out", "--set", "bands.scheme=4x16", "--set", "match.max_distance=9"), capsys
    )
    assert code == 2 and "match.max_distance" in err


def test_bad_config_file(spark, tmp_path, capsys):
    inp = write(tmp_path, pa.table({"id": ["a"], "text": [TEXT]}))
    conf = tmp_path / "c.toml"
    conf.write_text("[features]\ntop_k = -3\n", encoding="utf-8")
    code, err = run(dedup(inp, tmp_path / "out", "--config", str(conf)), capsys)
    assert code == 2 and "features.top_k: must be >= 0" in err and "c.toml" in err


def test_bad_arguments_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["dedup", "--output", "x"])
    assert e.value.code == 2


def test_unwritable_output(spark, tmp_path, capsys):
    if os.geteuid() == 0:
        target = "/proc/simhash-out"  # not writable even for root
    else:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        target = str(ro / "out")
    inp = write(tmp_path, pa.table({"id": ["a"], "text": [TEXT]}))
    code, err = run(dedup(inp, target), capsys)
    assert code == 2 and "not writable" in err


def test_empty_allowed_writes_empty_outputs(spark, tmp_path, capsys):
    inp = write(tmp_path, pa.table({"id": pa.array([], pa.string()), "text": pa.array([], pa.string())}))
    code, err = run(dedup(inp, tmp_path / "out", "--set", "input.allow_empty=true"), capsys)
    assert code == 0, err
    assert spark.read.parquet(str(tmp_path / "out" / "documents")).count() == 0


def test_null_and_empty_texts_get_statuses_not_errors(spark, tmp_path, capsys):
    table = pa.table(
        {"id": [1, 2, 3, 4], "title": [None, None, "标题", None], "body": [None, "", None, TEXT]}
    )
    inp = write(tmp_path, table)
    code, err = run(dedup(inp, tmp_path / "out", "--set", 'input.text_columns=["title","body"]'), capsys)
    assert code == 0, err
    rows = {r["id"]: r["status"] for r in spark.read.parquet(str(tmp_path / "out" / "documents")).collect()}
    assert rows == {1: "null_text", 2: "empty", 3: "ok", 4: "ok"}


def test_row_level_matrix_one_run(spark, tmp_path, capsys):
    """Awkward rows get a defined status and stay in the output, one row each."""
    good = "北京市政府今天发布了城市更新方案，计划在三年内改造一百二十个老旧小区。"
    texts = {
        "ctrl": "北京\x00市政府\x07今天\u200b发布了\ufeff城市更新方案，计划在三年内改造一百二十个老旧小区。",
        "huge": "新闻联播" * 12_500_000,  # 50 MB of UTF-8
        "latin": "a" * 1_000_000,  # one unbroken 1 MB token
        "html": "<html><head><style>p{}</style></head><body><p></p><br/>&nbsp;</body></html>",
        "mixed": "Apple 发布了新款 iPhone，售价 5999 元；Samsung 随后跟进。これは日本語です。",
        "good": good,
    }
    ids = list(texts)
    bad_utf8 = pa.array([b"\xed\xa0\x80" + good.encode()], pa.binary()).view(pa.string())
    col = pa.concat_arrays([pa.array([texts[i] for i in ids], pa.string()), bad_utf8])
    inp = write(tmp_path, pa.table({"id": [*ids, "badutf8"], "text": col}))
    code, err = run(dedup(inp, tmp_path / "out"), capsys)
    assert code == 0, err
    rows = {r["id"]: r for r in spark.read.parquet(str(tmp_path / "out" / "documents")).collect()}
    assert len(rows) == 7
    assert {k: v["status"] for k, v in rows.items()} == {
        "ctrl": "ok",
        "huge": "truncated",
        "latin": "truncated",
        "html": "empty",
        "mixed": "ok",
        "good": "ok",
        "badutf8": "invalid_utf8",
    }
    # control characters do not change the fingerprint; the repaired row still matches its clean twin
    assert rows["ctrl"]["fingerprint"] == rows["good"]["fingerprint"]
    assert rows["badutf8"]["cluster_id"] == rows["good"]["cluster_id"] == "badutf8"


def test_corrupt_parquet_among_good_files(spark, tmp_path, capsys):
    folder = tmp_path / "in"
    folder.mkdir()
    pq.write_table(pa.table({"id": ["a"], "text": [TEXT]}), folder / "part-0.parquet")
    (folder / "part-1.parquet").write_bytes(b"PAR1 not really a parquet file PAR1")
    code, err = run(dedup(str(folder), tmp_path / "out"), capsys)
    assert code == 2
    assert "part-1.parquet" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("bad_row", ["not_fingerprinted", "fingerprinted"])
def test_texts_read_again_for_the_check_are_valid_utf8(spark, tmp_path, capsys, bad_row):
    """The texts the text check, the report and the index read again are taken as read when no
    fingerprinted document needed a UTF-8 repair: a row holding invalid bytes that was not fingerprinted
    must then never reach them, and one that was must reach them repaired."""
    story = "".join(f"第{i}段：{TEXT}" for i in range(6))
    edited = story + "记者随后补充了采访内容。"
    if bad_row == "fingerprinted":  # the pair's second text holds invalid bytes: the check reads it repaired
        raw = [story.encode(), b"\xed\xa0\x80" + edited.encode(), "。".encode()]
        statuses = {"a": "ok", "b": "invalid_utf8", "junk": "no_features"}
    else:  # the pair is clean; the row with invalid bytes has no letters
        raw = [story.encode(), edited.encode(), b"\xff\xfe" + "。".encode()]
        statuses = {"a": "ok", "b": "ok", "junk": "no_features"}
    text = pa.array(raw, pa.binary()).view(pa.string())
    inp = write(tmp_path, pa.table({"id": ["a", "b", "junk"], "text": text}))
    out, index = tmp_path / "out", tmp_path / "index"
    executors = ["--set", "cluster.local_max_documents=0"]
    code, err = run(dedup(inp, out, "--index", str(index), *executors), capsys)
    assert code == 0, err
    rows = {r["id"]: r for r in spark.read.parquet(str(out / "documents")).collect()}
    assert {k: v["status"] for k, v in rows.items()} == statuses
    assert rows["a"]["cluster_id"] == rows["b"]["cluster_id"] == "a"
    pairs = spark.read.parquet(str(out / "pairs")).collect()
    assert [(p["id_a"], p["id_b"]) for p in pairs] == [("a", "b")]
    assert pairs[0]["reason"] == "verified" and pairs[0]["similarity"] >= 0.8
    assert "第0段" in (out / "report.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("int_ids", [False, True])
def test_ids_are_counted_by_their_hashes_and_duplicates_confirmed_by_the_ids(spark, int_ids):
    """The Spark pass counts distinct hashes of the ids; fewer than rows is confirmed on the ids
    themselves: duplicates are an error naming them, two ids whose hashes collide are not."""
    from pyspark.sql import functions as F

    from simhash_spark.config import load_config
    from simhash_spark.errors import InputError
    from simhash_spark.io import id_totals, validate_ids

    cfg = load_config()
    ids = list(range(40)) if int_ids else [f"d{i}" for i in range(40)]
    schema = f"id {'bigint' if int_ids else 'string'}, text string"
    unique = spark.createDataFrame([(i, TEXT) for i in ids], schema)
    with_null = unique.union(spark.createDataFrame([(None, TEXT)], schema))
    totals = with_null.agg(*id_totals(F.col("id"))).first()
    assert (totals["rows"], totals["non_null"], totals["distinct"]) == (41, 40, 40)
    twice = unique.union(unique.where(F.col("id").isin(ids[3], ids[7])))
    totals = twice.agg(*id_totals(F.col("id"))).first()
    assert (totals["rows"], totals["distinct"]) == (42, 40)
    with pytest.raises(InputError, match=f"duplicate values, e.g. {ids[3]!r} \\(2 rows\\), {ids[7]!r}"):
        validate_ids(totals, twice, cfg, source="in")
    # as if two distinct ids had hashed alike: the ids show no duplicate, so nothing is wrong
    validate_ids({"rows": 40, "non_null": 40, "distinct": 39}, unique, cfg, source="in")


def test_a_table_format_the_session_lacks_is_refused_before_any_work(tmp_path, capsys):
    """Delta without its package: the run used to fail at the table write, after all the work."""
    inp = write(tmp_path, pa.table({"id": ["a", "b"], "text": [TEXT, TEXT + "。"]}))
    extra = [
        "--output-table-prefix",
        "nodelta_",
        "--run-date",
        "2026-11-01",
        "--set",
        "output.table_layout=partitioned",
        "--set",
        "output.table_format=delta",
    ]
    code, err = run(dedup(inp, tmp_path / "out", *extra), capsys)
    assert code == 2 and "output.table_format: 'delta' is not a data source this Spark session has" in err
    assert not (tmp_path / "out").exists() and "stage fingerprint" not in err
