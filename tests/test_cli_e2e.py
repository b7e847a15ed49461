"""End to end: ``cli.main`` in-process on a generated corpus."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.testing import assertDataFrameEqual

from simhash_spark.cli import main
from simhash_spark.config import load_config
from simhash_spark.core.verify import similarity
from simhash_spark.demo.corpus import write_corpus
from tests.test_candidates_spark import brute_force_pairs
from tests.test_components_spark import union_find

DOCUMENTS_SCHEMA = (
    "struct<id:string,fingerprint:bigint,fingerprint_hex:string,status:string,cluster_id:string,"
    "cluster_size:bigint,is_duplicate:boolean,family:string,variant:string>"
)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.parquet"
    table = write_corpus(path, n_docs=150, seed=3)
    # degenerate rows the job must keep and label
    extra = pa.table(
        {
            "id": ["z-null", "z-empty", "z-html", "z-punct"],
            "title": ["", "", "", ""],
            "text": [None, "   ", "<p>&nbsp;</p>", "，。！？"],
            "family": ["z1", "z2", "z3", "z4"],
            "variant": ["base"] * 4,
        }
    )
    full = pa.concat_tables([table, extra])
    pq.write_table(full, path)
    return path, full


def dedup_args(path, out, *extra):
    """The e2e run: the generated corpus, its family/variant labels carried into documents/; an exact
    band design for the default k (auto may pick sampled LSH tables, which the brute-force check cannot
    hold to exact equality)."""
    return [
        "dedup",
        "--input",
        str(path),
        "--output",
        str(out),
        "--set",
        'input.passthrough_columns=["family","variant"]',
        "--set",
        "bands.scheme=blocks:14",
        *extra,
    ]


@pytest.fixture(scope="module")
def result(spark, corpus, tmp_path_factory):
    path, _ = corpus
    out = tmp_path_factory.mktemp("run") / "out"
    assert main(dedup_args(path, out)) == 0
    return out


def read(spark, out, name):
    return spark.read.parquet(str(out / name))


def test_every_input_row_exactly_once(spark, corpus, result):
    _, table = corpus
    docs = read(spark, result, "documents")
    ids = [r["id"] for r in docs.select("id").collect()]
    assert len(ids) == len(set(ids)) == table.num_rows
    assert set(ids) == set(table.column("id").to_pylist())


def test_output_schemas(spark, result):
    assert read(spark, result, "documents").schema.simpleString() == DOCUMENTS_SCHEMA
    assert (
        read(spark, result, "pairs").schema.simpleString()
        == "struct<id_a:string,id_b:string,distance:int,similarity:double,reason:string>"
    )
    assert (result / "report.html").read_text("utf-8").startswith("<!DOCTYPE html>")
    assert (
        read(spark, result, "clusters").schema.simpleString()
        == "struct<cluster_id:string,size:bigint,member_ids:array<string>>"
    )
    assert read(spark, result, "deduplicated").columns == ["id", "title", "text", "family", "variant"]
    assert (result / "_SUCCESS").exists()


def test_statuses_of_degenerate_rows(spark, result):
    docs = {r["id"]: r for r in read(spark, result, "documents").collect()}
    assert docs["z-null"]["status"] == "null_text"
    assert docs["z-empty"]["status"] == "empty"
    assert docs["z-html"]["status"] == "empty"
    assert docs["z-punct"]["status"] == "no_features"
    for key in ("z-null", "z-empty", "z-html", "z-punct"):
        row = docs[key]
        assert row["fingerprint"] is None and row["fingerprint_hex"] is None
        assert row["cluster_id"] == key and row["cluster_size"] == 1 and row["is_duplicate"] is False


def test_planted_duplicates_clustered_and_nothing_unrelated_merged(spark, result):
    docs = read(spark, result, "documents").collect()
    cluster_of = {r["id"]: r["cluster_id"] for r in docs}
    by_family: dict[str, dict[str, str]] = {}
    for r in docs:
        by_family.setdefault(r["family"], {})[r["variant"]] = r["id"]
    formats = [(f["base"], f["format"]) for f in by_family.values() if "format" in f]
    assert formats, "the corpus must plant format variants"
    for base, variant in formats:
        assert cluster_of[base] == cluster_of[variant]
    families_per_cluster: dict[str, set] = {}
    for r in docs:
        families_per_cluster.setdefault(r["cluster_id"], set()).add(r["family"])
    assert all(len(f) == 1 for f in families_per_cluster.values())


def test_pairs_are_brute_force_pairs_and_clusters_are_union_find(spark, corpus, result):
    """Default config: candidates within 12 bits, kept when their fingerprints are identical or the
    5-gram Jaccard of their own two texts is >= 0.8 (documents with the same fingerprint and the same text
    are checked once, through their group's smallest id, which gives the same answer)."""
    _, table = corpus
    text = dict(zip(table.column("id").to_pylist(), table.column("text").to_pylist(), strict=True))
    summary = json.loads((result / "summary.json").read_text("utf-8"))
    assert summary["bands"]["exact"]
    docs = read(spark, result, "documents").where("fingerprint is not null").collect()
    ids = [r["id"] for r in docs]
    fps = np.array([r["fingerprint"] for r in docs], dtype=np.int64)
    rows = read(spark, result, "pairs").collect()
    pairs = {(r["id_a"], r["id_b"], r["distance"]) for r in rows}
    cfg = load_config()

    def sim_of(a, b):
        return similarity(text[a], text[b], cfg.verify, cfg.normalize)

    expected = {(a, b, d) for a, b, d in brute_force_pairs(ids, fps, 12) if d == 0 or sim_of(a, b) >= 0.8}
    assert pairs == expected
    assert len(expected) > 20, "the corpus must plant duplicates"
    for r in rows:
        if r["distance"] == 0:
            same_text = text[r["id_a"]] == text[r["id_b"]]
            assert r["reason"] == ("identical_fingerprint" if same_text else "fingerprint")
            assert r["similarity"] is None
        else:
            assert r["reason"] == "verified"
            assert r["similarity"] == pytest.approx(sim_of(r["id_a"], r["id_b"]))
    comp = union_find([(a, b) for a, b, _ in pairs])
    clusters = {r["cluster_id"]: r for r in read(spark, result, "clusters").collect()}
    expected: dict[str, list[str]] = {}
    for node, root in comp.items():
        expected.setdefault(root, []).append(node)
    assert {c: sorted(m) for c, m in expected.items()} == {c: r["member_ids"] for c, r in clusters.items()}
    assert all(r["size"] == len(r["member_ids"]) for r in clusters.values())


def test_duplicate_flags_and_deduplicated_rows(spark, corpus, result):
    _, table = corpus
    docs = read(spark, result, "documents").collect()
    for r in docs:
        assert r["is_duplicate"] == (r["cluster_id"] != r["id"])
    dup_ids = {r["id"] for r in docs if r["is_duplicate"]}
    kept = {r["id"] for r in read(spark, result, "deduplicated").select("id").collect()}
    assert kept == set(table.column("id").to_pylist()) - dup_ids
    summary = json.loads((result / "summary.json").read_text("utf-8"))
    assert summary["input_rows"] == table.num_rows
    assert summary["duplicates"] == len(dup_ids)
    assert summary["status"]["null_text"] == 1 and summary["status"]["empty"] == 2
    assert summary["status"]["no_features"] == 1
    assert summary["pairs_accepted"] == read(spark, result, "pairs").count()
    assert summary["candidate_pairs_within_k"] >= summary["representative_pairs_accepted"]
    assert summary["pairs_complete"] is True
    assert summary["dedup_rate"] == pytest.approx(len(dup_ids) / table.num_rows, abs=1e-6)
    assert set(summary["timings_s"]) >= {"fingerprint", "candidates", "clusters", "write", "total"}
    assert summary["config"]["match"]["max_distance"] == 12
    assert summary["versions"]["jieba"] == "0.42.1"


def test_rerun_with_other_partitioning_gives_identical_outputs(spark, corpus, result, tmp_path):
    path, _ = corpus
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "7")
    try:
        out = tmp_path / "again"
        args = dedup_args(path, out, "--set", "spark.min_fingerprint_partitions=5")
        assert main(args) == 0
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
    for name in ("documents", "pairs", "clusters", "deduplicated"):
        assertDataFrameEqual(read(spark, out, name), read(spark, result, name))


def test_output_exists_refused_then_overwritten(spark, corpus, result, capsys):
    path, _ = corpus
    code = main(["dedup", "--input", str(path), "--output", str(result)])
    assert code == 2
    assert "already exists" in capsys.readouterr().err
    before = (result / "summary.json").read_text("utf-8")
    assert json.loads(before)["input_rows"] > 0


def test_report_of_the_run(result):
    from tests.test_report import Checker

    page = (result / "report.html").read_text("utf-8")
    checker = Checker()
    checker.feed(page)
    assert not checker.errors and checker.stack == []
    assert checker.drawings >= 4
    summary = json.loads((result / "summary.json").read_text("utf-8"))
    shown = page.count('class="cluster"')
    assert shown == min(20, summary["clusters"]) and shown > 0
    assert f"<b>{summary['input_rows']}</b>" in page


@pytest.mark.slow
@pytest.mark.parametrize("on", ["driver", "executors"])
def test_under_spark_submit_its_settings_win_and_stdout_is_the_result_line(tmp_path, on):
    """``--name`` and ``--conf`` given to spark-submit are what the job runs with; the job's log lines go to
    stderr, so stdout is one JSON line. Both paths: a small run on the driver, and the same run forced
    through the Spark stages (``cluster.local_max_documents=0``), whose shuffles see Spark's default 200
    partitions."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    corpus = tmp_path / "c.parquet"
    write_corpus(corpus, n_docs=40, seed=2)
    out = tmp_path / "out"
    venv_bin = Path(sys.executable).parent
    env = {
        **os.environ,
        "PATH": f"{venv_bin}{os.pathsep}{os.environ['PATH']}",
        "PYSPARK_PYTHON": sys.executable,
    }
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    job = Path(__file__).resolve().parents[1] / "jobs" / "dedup.py"
    proc = subprocess.run(
        [
            str(venv_bin / "spark-submit"),
            *["--master", "local[2]", "--name", "simhash_dedup_20261129"],
            *[
                "--conf",
                "spark.sql.execution.arrow.maxRecordsPerBatch=5000",
                "--conf",
                "spark.ui.enabled=false",
            ],
            str(job),
            *["--input", str(corpus), "--output", str(out), "--set", "output.write_report=false"],
            *(["--set", "cluster.local_max_documents=0"] if on == "executors" else []),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["input_rows"] > 40, proc.stdout[:2000]
    assert "stage fingerprint: start" in proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["fingerprinted_on"] == on and summary["duplicates"] > 0
    spark_info = summary["spark"]
    assert spark_info["app_name"] == "simhash_dedup_20261129"
    assert spark_info["arrow_max_records_per_batch"] == "5000"
    # Spark's default 200 shuffle partitions (spark-submit sets none here): outputs are sized from the
    # data (at most one file per fingerprinting partition, 2 per core), not one file per shuffle partition
    for name in ("documents", "pairs", "clusters", "deduplicated"):
        assert len(list((out / name).glob("*.parquet"))) <= 4, name


def test_an_existing_output_is_refused_before_spark_starts(tmp_path, capsys, monkeypatch):
    import simhash_spark.session

    def no_spark(*args, **kwargs):
        raise AssertionError("Spark was started")

    monkeypatch.setattr(simhash_spark.session, "build_session", no_spark)
    (tmp_path / "out").mkdir()
    assert main(["dedup", "--input", str(tmp_path / "in"), "--output", str(tmp_path / "out")]) == 2
    assert "already exists; pass --overwrite" in capsys.readouterr().err


def test_version_and_console_script_name(capsys):
    from simhash_spark import __version__

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"simhash-spark {__version__}"
