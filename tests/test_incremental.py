"""Incremental runs against a fingerprint index: consistency with a full run, idempotent reruns, atomic
commits, model checks, monitoring, the online check, stats and compaction."""

import json
import logging
import random
import re
import shutil
import time
import zlib
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyspark.testing import assertDataFrameEqual

from simhash_spark import columns as C
from simhash_spark import pipeline
from simhash_spark.cli import main
from simhash_spark.config import load_config
from simhash_spark.core.index_model import ENTRY_COLUMNS
from simhash_spark.core.normalize import NormalizeOptions
from simhash_spark.core.verify import VerifyOptions, similarity
from simhash_spark.demo.corpus import generate
from simhash_spark.errors import ConfigError
from simhash_spark.index.session import IndexSession
from simhash_spark.pipeline import dedup
from tests.test_components_spark import union_find
from tests.test_pipeline_api import UNBOUNDED_PLANS, plan_chars

# Exact band designs, so "every pair within k" holds on both sides of the comparisons (auto may pick
# sampled LSH tables): the default k = 12 for the large consistency test; k = 3 with few tables and
# partitions elsewhere, which keeps each run short (the logic does not depend on k).
EXACT_DEFAULT_K = ["--set", "bands.scheme=blocks:14"]
SMALL_INDEX = ["--set", "output.write_report=false"]
EXACT = ["--set", "match.max_distance=3", "--set", "bands.scheme=blocks:5", *SMALL_INDEX]
DATES = [f"2026-11-0{d}" for d in range(1, 10)]


def split_corpus(table: pa.Table, n_batches: int, folder: Path) -> list[Path]:
    """Batches by a hash of the id: variants of one article land in different batches."""
    which = pa.array([zlib.crc32(i.encode()) % n_batches for i in table.column("id").to_pylist()])
    paths = []
    for b in range(n_batches):
        path = folder / f"batch{b}.parquet"
        pq.write_table(table.filter(pc.equal(which, b)), path)
        paths.append(path)
    return paths


def incremental(path, out, index, date, *extra, settings=EXACT):
    return main(
        [
            "dedup",
            "--input",
            str(path),
            "--output",
            str(out),
            "--index",
            str(index),
            "--run-date",
            date,
            *settings,
            *extra,
        ]
    )


def rows(spark, folder, name):
    return spark.read.parquet(str(folder / name)).collect()


def check_consistency(spark, tmp: Path, n_docs: int, n_batches: int, settings: list[str]) -> dict:
    """Runs the batches incrementally and the union once in full; for every batch j compares with the
    full run restricted to batches <= j (pairs are a property of the two documents, so the full run's
    pairs among those batches are a full run over them)."""
    table = generate(n_docs, seed=11)
    (tmp / "batches").mkdir()
    batches = split_corpus(table, n_batches, tmp / "batches")
    index = tmp / "index"
    for j, path in enumerate(batches):
        assert incremental(path, tmp / f"inc{j}", index, DATES[j], settings=settings) == 0
    full = tmp / "full"
    assert main(["dedup", "--input", str(tmp / "batches"), "--output", str(full), *settings]) == 0
    summary = json.loads((full / "summary.json").read_text())
    assert summary["pairs_complete"] and summary["bands"]["exact"]
    batch_of = {}
    for j, path in enumerate(batches):
        for i in pq.read_table(path, columns=["id"]).column("id").to_pylist():
            batch_of[i] = j
    full_pairs = {(r["id_a"], r["id_b"], r["distance"]) for r in rows(spark, full, "pairs")}
    checked = {"documents": table.num_rows, "flagged": 0, "matched": 0, "pairs": 0, "beyond_k": 0}
    for j in range(n_batches):
        upto = [(a, b, d) for a, b, d in full_pairs if batch_of[a] <= j and batch_of[b] <= j]
        comp = union_find([(a, b) for a, b, _ in upto])
        members: dict[str, list[str]] = {}
        for node, root in comp.items():
            members.setdefault(root, []).append(node)
        docs = rows(spark, tmp / f"inc{j}", "documents")
        assert {r["id"] for r in docs} == {i for i, b in batch_of.items() if b == j}
        for r in docs:
            d = r["id"]
            group = members.get(comp.get(d), [d])
            earlier = [m for m in group if m != d and (batch_of[m] < j or (batch_of[m] == j and m < d))]
            assert r["is_duplicate"] == bool(earlier), d
            indexed = [m for m in group if batch_of[m] < j]
            if r["matched_index_id"] is None:
                assert not indexed, d
            else:
                assert r["matched_index_id"] in indexed, d
                checked["matched"] += 1
            checked["flagged"] += r["is_duplicate"]
        inc_pairs = {(r["id_a"], r["id_b"], r["distance"]) for r in rows(spark, tmp / f"inc{j}", "pairs")}
        assert inc_pairs == {(a, b, d) for a, b, d in upto if j in (batch_of[a], batch_of[b])}
        checked["pairs"] += len(inc_pairs)
        k = summary["config"]["match"]["max_distance"]
        checked["beyond_k"] += sum(d > k and batch_of[a] != batch_of[b] for a, b, d in inc_pairs)
    print("consistency checked:", checked)
    return checked


SKETCH_BANDS = ["--set", "match.sketch_bands=true"]
NO_SKETCH_BANDS = ["--set", "match.sketch_bands=false"]


@pytest.mark.heavy
def test_incremental_runs_flag_what_a_full_run_over_the_history_does(spark, tmp_path):
    """Without the sketch bands (an index without sketch band tables): pairs within k only."""
    checked = check_consistency(spark, tmp_path, n_docs=150, n_batches=3, settings=[*EXACT, *NO_SKETCH_BANDS])
    assert checked["matched"] > 10 and checked["pairs"] > 20 and checked["beyond_k"] == 0
    assert manifest(tmp_path / "index")["layout"] == {"sketch_bands": False}


@pytest.mark.parametrize(
    "where", [pytest.param("driver", marks=pytest.mark.heavy), pytest.param("spark", marks=pytest.mark.slow)]
)
def test_with_sketch_bands_incremental_runs_flag_and_pair_what_a_full_run_does(spark, tmp_path, where):
    """The index stores each entry's sketch band keys and its sketch: a batch touches the entries that
    share a sketch band with it beyond k, and pairs them as a full run over everything does — on the
    driver (small batches, pyarrow) and in Spark."""
    on_spark = ["--set", "cluster.local_max_documents=0"] if where == "spark" else []
    settings = [*EXACT, *on_spark]  # match.sketch_bands = "auto": on for a new index
    checked = check_consistency(spark, tmp_path, n_docs=150, n_batches=3, settings=settings)
    assert checked["matched"] > 10 and checked["beyond_k"] > 0
    summary = json.loads((tmp_path / "inc2" / "summary.json").read_text())
    assert summary["index"]["looked_up_on"] == where
    assert manifest(tmp_path / "index")["layout"] == {"sketch_bands": True}


@pytest.mark.slow
def test_consistency_on_20k_documents_in_five_daily_batches(spark, tmp_path):
    checked = check_consistency(spark, tmp_path, n_docs=12_500, n_batches=5, settings=EXACT_DEFAULT_K)
    assert checked["documents"] >= 20_000
    assert checked["matched"] > 1000


# --- one index built from three daily batches, shared by the tests below (each copies it to change it)


@pytest.fixture(scope="module")
def history(spark, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("history")
    table = generate(120, seed=5)
    batches = split_corpus(table, 4, tmp)
    index = tmp / "index"
    for j in range(3):
        if j == 2:
            shutil.copytree(index, tmp / "index_before_day3")
        assert incremental(batches[j], tmp / f"out{j}", index, DATES[j]) == 0
    return tmp, batches, index


def manifest(index: Path) -> dict:
    versions = sorted((index / "_manifest").glob("v*.json"))
    return json.loads(versions[-1].read_text())


def test_summary_shows_what_the_lookup_read(history):
    tmp, _, index = history
    s = json.loads((tmp / "out2" / "summary.json").read_text())
    ix = s["index"]
    m = manifest(index)
    assert ix["version_before"] == 2 and ix["version_after"] == 3 == m["version"]
    assert ix["entries_after"] == sum(sn["docs_rows"] for sn in m["snapshots"])
    assert ix["appended"] == s["fingerprinted"]
    assert ix["key_rows_read"] <= ix["key_rows_total"]
    assert ix["entry_rows_read"] > 0 and ix["format"] == 4 and ix["exact_to_bits"] >= 3
    assert ix["batch_documents_matched"] > 0
    assert s["monitor"]["dedup_rate"] == s["dedup_rate"]
    docs = rows_of(tmp / "out2" / "documents")
    assert "matched_index_id" in docs.column_names


def rows_of(path: Path) -> pa.Table:
    return pq.read_table(path)


def test_rerun_of_a_date_appends_nothing_twice_and_gives_the_same_outputs(spark, history, tmp_path):
    tmp, batches, index = history
    idx = tmp_path / "index"
    shutil.copytree(index, idx)
    before = manifest(idx)
    out = tmp_path / "again"
    assert incremental(batches[2], out, idx, DATES[2]) == 0
    after = manifest(idx)
    assert after["version"] == before["version"] + 1
    assert [s["docs_rows"] for s in after["snapshots"]] == [s["docs_rows"] for s in before["snapshots"]]
    assert len(list((idx / "snapshots").iterdir())) == 3  # the replaced snapshot's folder is gone
    for name in ("documents", "pairs", "clusters", "deduplicated"):
        assertDataFrameEqual(
            spark.read.parquet(str(out / name)), spark.read.parquet(str(tmp / "out2" / name))
        )


def test_a_failed_run_leaves_the_index_as_it_was(history, tmp_path, monkeypatch):
    """The commit fails after the batch's snapshot folder was written: nothing is published, the manifest is
    unchanged, and the next run removes the folder nobody lists."""
    _tmp, batches, index = history
    idx = tmp_path / "index"
    shutil.copytree(index, idx)
    before = manifest(idx)
    from simhash_spark.index.store import IndexStore

    def fail(self, manifest, before_link=None):
        raise OSError("disk full")

    monkeypatch.setattr(IndexStore, "commit", fail)
    assert incremental(batches[3], tmp_path / "out", idx, DATES[3]) == 1
    monkeypatch.undo()
    assert manifest(idx) == before
    assert not (tmp_path / "out").exists()
    assert len(list((idx / "snapshots").iterdir())) == 4  # the failed run's snapshot, listed nowhere
    assert incremental(batches[3], tmp_path / "out", idx, DATES[3]) == 0
    assert manifest(idx)["version"] == before["version"] + 1
    assert len(list((idx / "snapshots").iterdir())) == 4  # the failed run's folder was tidied away


@pytest.mark.heavy
def test_a_publish_failing_after_the_commit_publishes_nothing_and_the_rerun_repairs_it(
    spark, history, tmp_path, monkeypatch
):
    """After the commit the batch is in the index; if publishing then fails the run exits 1 with nothing
    published, and the rerun of the date (Airflow's retry) replaces its entries and publishes the same
    output a clean run gives."""
    _tmp, batches, index = history
    idx, clean = tmp_path / "index", tmp_path / "clean_index"
    shutil.copytree(index, idx)
    shutil.copytree(index, clean)
    before = manifest(idx)
    from simhash_spark.publish import Publisher

    def fail(self):
        raise RuntimeError("disk full")

    monkeypatch.setattr(Publisher, "publish", fail)
    assert incremental(batches[3], tmp_path / "out", idx, DATES[3]) == 1
    monkeypatch.undo()
    assert not (tmp_path / "out").exists()
    assert manifest(idx)["version"] == before["version"] + 1
    assert incremental(batches[3], tmp_path / "out", idx, DATES[3]) == 0
    assert incremental(batches[3], tmp_path / "clean_out", clean, DATES[3]) == 0
    after = manifest(idx)
    assert [r["run_date"] for r in after["runs"]] == DATES[:4]
    assert [s["docs_rows"] for s in after["snapshots"]] == [
        s["docs_rows"] for s in manifest(clean)["snapshots"]
    ]
    for name in ("documents", "pairs", "clusters", "deduplicated"):
        assertDataFrameEqual(
            spark.read.parquet(str(tmp_path / "out" / name)),
            spark.read.parquet(str(tmp_path / "clean_out" / name)),
        )


def test_ids_seen_before_are_reported_not_indexed_twice(spark, history, tmp_path):
    _tmp, batches, index = history
    idx = tmp_path / "index"
    shutil.copytree(index, idx)
    again = pq.read_table(batches[0])
    # a day of nothing but known ids is a rate jump: the monitor would (rightly) stop it
    assert incremental(batches[0], tmp_path / "out", idx, DATES[5], "--set", "monitor.max_factor=0") == 0
    docs = {r["id"]: r for r in rows(spark, tmp_path / "out", "documents")}
    assert len(docs) == again.num_rows
    assert all(
        r["status"] == "already_indexed" and r["matched_index_id"] == i and r["is_duplicate"]
        for i, r in docs.items()
    )
    assert manifest(idx)["snapshots"][-1]["docs_rows"] == 0


@pytest.mark.heavy
def test_a_resent_id_with_another_text_is_linked_once_with_the_indexed_text(tmp_path):
    """The index's entry is the id's document: the batch's new text and title for it are neither checked
    nor paired (with and without the prefix filter)."""
    rng = random.Random(5)
    chars = [chr(c) for c in range(0x4E00, 0x4E00 + 3000)]

    def text(n: int = 600) -> str:
        return "".join(rng.choice(chars) for _ in range(n))

    def edited(t: str, at: int) -> str:
        return t[:at] + text(8) + t[at + 8 :]

    indexed = text()
    near = edited(edited(indexed, 400), 200)
    resent = edited(near, 100)  # nearer to the new document than the indexed text is
    title = "今日新闻联播要闻"
    days = [{"id": ["A", "C"], "text": [indexed, text()]}, {"id": ["A", "B"], "text": [resent, near]}]
    for day, columns in enumerate(days):
        pq.write_table(pa.table({**columns, "title": [title, title]}), tmp_path / f"day{day}.parquet")
    # the pair is 7 bits apart: an exact design for k = 8 keeps the index to 9 tables
    exact_k8 = ["--set", "match.max_distance=8", "--set", "bands.scheme=blocks:9"]
    # the prefix filter replaces the sketches the sketch bands need: an index without them serves both
    settings = [*exact_k8, *SMALL_INDEX, *NO_SKETCH_BANDS, "--set", "input.title_column=title"]
    assert (
        incremental(
            tmp_path / "day0.parquet", tmp_path / "out0", tmp_path / "index", DATES[0], settings=settings
        )
        == 0
    )
    expected = similarity(indexed, near, VerifyOptions(), NormalizeOptions())
    assert similarity(resent, near, VerifyOptions(), NormalizeOptions()) > expected >= 0.8
    for on in ("false", "true"):
        idx, out = tmp_path / f"index{on}", tmp_path / f"out{on}"
        shutil.copytree(tmp_path / "index", idx)
        extra = ["--set", f"verify.prefix_filter={on}"]
        assert incremental(tmp_path / "day1.parquet", out, idx, DATES[1], *extra, settings=settings) == 0
        pairs = pq.read_table(out / "pairs").to_pylist()
        assert [(p["id_a"], p["id_b"], p["similarity"]) for p in pairs] == [
            ("A", "B", pytest.approx(expected))
        ]
        docs = {r["id"]: r for r in pq.read_table(out / "documents").to_pylist()}
        assert docs["A"]["status"] == "already_indexed" and docs["B"]["matched_index_id"] == "A"


def test_another_model_is_refused_unless_rebuilt(history, tmp_path, capsys):
    _tmp, batches, index = history
    idx = tmp_path / "index"
    shutil.copytree(index, idx)
    before = manifest(idx)
    assert incremental(batches[3], tmp_path / "out", idx, DATES[3], "--set", "features.ngram_size=4") == 2
    err = capsys.readouterr().err
    assert "different fingerprint model" in err and "body.features.ngram_size: index 5, this run 4" in err
    assert manifest(idx) == before
    assert (
        incremental(
            batches[3], tmp_path / "out", idx, DATES[3], "--set", "features.ngram_size=4", "--rebuild-index"
        )
        == 0
    )
    after = manifest(idx)
    assert after["model"]["body"]["features"]["ngram_size"] == 4
    assert after["version"] == before["version"] + 1
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert s["index"]["rebuilt_from_version"] == before["version"]
    rebuilt = [x for x in after["snapshots"] if x["runs"] != [DATES[3]]]
    assert sum(x["docs_rows"] for x in rebuilt) == sum(x["docs_rows"] for x in before["snapshots"])
    # each earlier date keeps a snapshot of its own, so it stays rerunnable
    assert sorted(x["runs"] for x in rebuilt) == [[d] for d in DATES[:3]]
    assert [r["run_date"] for r in after["runs"]] == DATES[:4]


@pytest.mark.slow
def test_a_jump_in_the_dedup_rate_fails_the_run_before_publishing(history, tmp_path, capsys):
    _tmp, batches, index = history
    idx = tmp_path / "index"
    shutil.copytree(index, idx)
    before = manifest(idx)
    # a day of reprints: every text of day one again under new ids
    day1 = pq.read_table(batches[0])
    reprints = day1.set_column(0, "id", pa.array([f"r-{i}" for i in day1.column("id").to_pylist()]))
    path = tmp_path / "reprints.parquet"
    pq.write_table(reprints, path)
    code = incremental(
        path,
        tmp_path / "out",
        idx,
        DATES[3],
        "--set",
        "monitor.min_runs=2",
        "--set",
        "monitor.max_factor=1.5",
    )
    assert code == 3
    assert "outside the monitoring band" in capsys.readouterr().err
    assert not (tmp_path / "out").exists() and manifest(idx) == before
    assert incremental(path, tmp_path / "out", idx, DATES[3], "--set", "monitor.max_factor=0") == 0


def test_check_finds_what_the_job_paired_with_the_index(spark, history, capsys):
    """The online check of day three's texts against the index as it was before day three: exactly the
    indexed documents the job paired them with."""
    tmp, batches, _ = history
    day3 = pq.read_table(batches[2])
    texts = tmp / "day3.jsonl"
    texts.write_text(
        "".join(
            json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n"
            for i, t in zip(day3.column("id").to_pylist(), day3.column("text").to_pylist(), strict=True)
        )
    )
    capsys.readouterr()
    assert (
        main(["check", "--index", str(tmp / "index_before_day3"), "--file", str(texts), "--jsonl", *EXACT])
        == 0
    )
    results = {r["input"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert set(results) == set(day3.column("id").to_pylist())
    day3_ids = set(results)
    paired: dict[str, set] = {}
    for p in rows(spark, tmp / "out2", "pairs"):
        a, b = p["id_a"], p["id_b"]
        if (a in day3_ids) != (b in day3_ids):
            new, old = (a, b) if a in day3_ids else (b, a)
            paired.setdefault(new, set()).add((old, p["distance"]))
    for i, r in results.items():
        assert {(m["id"], m["distance"]) for m in r["matches"]} == paired.get(i, set()), i
        assert r["duplicate"] == bool(paired.get(i))
    assert sum(r["duplicate"] for r in results.values()) > 3
    assert (
        main(["check", "--index", str(tmp / "index_before_day3"), *EXACT, "完全无关的一句话，没有任何重复。"])
        == 0
    )
    (only,) = map(json.loads, capsys.readouterr().out.splitlines())
    assert only["duplicate"] is False and len(only["fingerprint"]) == 16


@pytest.mark.slow
def test_stats_and_compaction_with_retention(spark, history, tmp_path, capsys):
    _tmp, batches, index = history
    idx = tmp_path / "index"
    shutil.copytree(index, idx)
    capsys.readouterr()
    assert main(["index", "stats", str(idx)]) == 0
    stats = json.loads(capsys.readouterr().out)
    before = manifest(idx)
    assert stats["entries"] == sum(s["docs_rows"] for s in before["snapshots"]) and stats["snapshots"] == 3
    assert stats["bytes"] > 0 and stats["last_run"] == DATES[2]
    assert main(["index", "compact", str(idx), "--keep-recent", "1", *EXACT]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["compacted"] and report["merged_snapshots"] == 2 and report["snapshots_after"] == 2
    assert report["entries_after"] == stats["entries"]
    assert len(list((idx / "snapshots").iterdir())) == 2
    # the compacted index answers as before
    day4 = pq.read_table(batches[3])
    out_a, out_b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(index, tmp_path / "plain")
    assert incremental(batches[3], out_a, tmp_path / "plain", DATES[3]) == 0
    assert incremental(batches[3], out_b, idx, DATES[3]) == 0
    assertDataFrameEqual(
        spark.read.parquet(str(out_a / "documents")), spark.read.parquet(str(out_b / "documents"))
    )
    assert day4.num_rows == spark.read.parquet(str(out_b / "documents")).count()
    # a merged date cannot be rerun; the recent one can
    assert incremental(batches[0], tmp_path / "c", idx, DATES[0]) == 2
    assert "compacted into snapshot" in capsys.readouterr().err
    # retention: entries more than one day before the latest run (day four) go
    assert (
        main(
            [
                "index",
                "compact",
                str(idx),
                "--keep-recent",
                "0",
                "--retention-days",
                "1",
                "--min-snapshots",
                "1",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    kept = manifest(idx)
    assert sorted(d for s in kept["snapshots"] for d in s["runs"]) == DATES[2:4]
    assert report["dropped_entries"] == sum(r["appended"] for r in before["runs"] if r["run_date"] < DATES[2])
    assert [r["run_date"] for r in kept["runs"]] == DATES[:4]  # monitoring history stays


def test_tiered_compaction_merges_the_smallest_group_of_like_sized_snapshots(history, tmp_path, capsys):
    _tmp, _batches, index = history
    sizes = [s["docs_rows"] for s in manifest(index)["snapshots"]]
    assert max(sizes) <= 1.5 * min(sizes)  # three like-sized days

    def compact(idx: Path, *args: str) -> dict:
        capsys.readouterr()
        assert main(["index", "compact", str(idx), *args, *EXACT]) == 0
        return json.loads(capsys.readouterr().out)

    idx = tmp_path / "index"
    shutil.copytree(index, idx)
    tiered = ["--keep-recent", "0", "--tier-ratio", "1.5"]
    assert not compact(idx, *tiered, "--min-snapshots", "4")["compacted"]  # a group of three only
    report = compact(idx, *tiered, "--min-snapshots", "3")
    assert report["merged_snapshots"] == 3 and report["snapshots_after"] == 1
    # a merged pair of days is twice a day's size: not like-sized with the third day
    idx2 = tmp_path / "index2"
    shutil.copytree(index, idx2)
    assert compact(idx2, "--keep-recent", "1", "--min-snapshots", "2")["snapshots_after"] == 2
    assert not compact(idx2, *tiered, "--min-snapshots", "2")["compacted"]
    assert compact(idx2, "--keep-recent", "0", "--min-snapshots", "2")["snapshots_after"] == 1  # ratio 0


@pytest.mark.heavy
def test_a_small_batch_reads_only_the_key_row_groups_its_probes_meet(tmp_path, monkeypatch):
    """The bar: a batch reads the key rows its probes can meet and the entries they touched, not the index
    (row groups of 16 key rows here, so that 200 entries make many of them)."""
    from simhash_spark.index import local_files

    monkeypatch.setattr(local_files, "KEY_GROUP_ROWS", 16)
    table = generate(200, seed=21)
    big, small = table.slice(0, table.num_rows - 3), table.slice(table.num_rows - 3)
    pq.write_table(big, tmp_path / "big.parquet")
    pq.write_table(small, tmp_path / "small.parquet")
    idx = tmp_path / "index"
    k3 = ["--set", "match.max_distance=3", "--set", "bands.scheme=4x16", *NO_SKETCH_BANDS]
    for name, date in (("big", DATES[0]), ("small", DATES[1])):
        args = ["dedup", "--input", str(tmp_path / f"{name}.parquet"), "--output", str(tmp_path / name)]
        assert main([*args, "--index", str(idx), "--run-date", date, *k3]) == 0
    ix = json.loads((tmp_path / "small" / "summary.json").read_text())["index"]
    assert ix["looked_up_on"] == "driver" and ix["probe_radius"] == 0 and ix["key_tables"] == 5
    # three documents probe the id table and four segment tables once each: at most 15 row groups
    assert 0 < ix["key_rows_read"] <= 15 * 16 < ix["key_rows_total"] / 3
    assert ix["entry_rows_read"] < ix["entries_before"]


# --- data safety of the index ---------------------------------------------------------------------------


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_a_missing_manifest_folder_is_refused_and_nothing_is_deleted(history, tmp_path, capsys):
    _tmp, batches, index = history
    idx = tmp_path / "index"
    shutil.copytree(index, idx)
    shutil.rmtree(idx / "_manifest")
    before = listing(idx)
    assert incremental(batches[3], tmp_path / "out", idx, DATES[3]) == 2
    err = capsys.readouterr().err
    assert "holds snapshots but no manifest version" in err and "nothing was changed" in err
    assert listing(idx) == before and not (tmp_path / "out").exists()


@pytest.mark.parametrize(("content", "kind"), [("[]", "file"), ("", "folder")])
def test_a_manifest_that_is_not_ours_is_exit_2_naming_the_file(history, tmp_path, capsys, content, kind):
    _tmp, batches, index = history
    idx = tmp_path / "index"
    shutil.copytree(index, idx)
    bad = idx / "_manifest" / "v00000004.json"
    if kind == "folder":
        bad.mkdir()
    else:
        bad.write_text(content)
    assert incremental(batches[3], tmp_path / "out", idx, DATES[3]) == 2
    assert "v00000004.json is not a manifest of this tool" in capsys.readouterr().err


def test_an_index_path_that_cannot_be_written_is_refused_before_any_work(history, tmp_path, capsys):
    _tmp, batches, _index = history
    (tmp_path / "a_file").write_text("x")
    started = time.perf_counter()
    assert incremental(batches[3], tmp_path / "out", tmp_path / "a_file" / "index", DATES[3]) == 2
    assert "not writable" in capsys.readouterr().err and time.perf_counter() - started < 30
    assert not (tmp_path / "out").exists()


@pytest.mark.heavy
def test_rerunning_an_earlier_date_sees_only_earlier_dates_and_gives_its_first_answer(
    spark, history, tmp_path
):
    """Dates 1-3 are indexed; rerunning date 1 must not find date 2's reprints as its originals."""
    tmp, batches, index = history
    idx = tmp_path / "index"
    shutil.copytree(index, idx)
    for day in (0, 1):
        out = tmp_path / f"again{day}"
        assert incremental(batches[day], out, idx, DATES[day]) == 0
        for name in ("documents", "pairs", "clusters", "deduplicated"):
            assertDataFrameEqual(
                spark.read.parquet(str(out / name)), spark.read.parquet(str(tmp / f"out{day}" / name))
            )
    m = manifest(idx)
    assert [r["run_date"] for r in m["runs"]] == DATES[:3]
    assert sorted(d for s in m["snapshots"] for d in s["runs"]) == DATES[:3]
    from simhash_spark.index.admin import stats

    assert stats(str(idx))["last_run"] == DATES[2]


def test_run_dates_far_ahead_or_empty_are_refused(tmp_path, capsys):
    for date, message in (("2062-01-07", "more than one day after today"), ("", "--run-date: empty value")):
        code = incremental(tmp_path / "in.parquet", tmp_path / "out", tmp_path / "index", date)
        assert code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "index").exists()


def test_retention_cutoff_ignores_a_run_date_typed_years_ahead():
    from datetime import date

    from simhash_spark.index.admin import retention_cutoff

    dates = ["2026-11-01", "2026-11-02", "2062-01-07"]
    assert retention_cutoff(dates, 365, date(2026, 11, 30)) == "2025-12-01"
    assert retention_cutoff(dates[:2], 1, date(2026, 11, 30)) == "2026-11-01"
    assert retention_cutoff(dates, 0, date(2026, 11, 30)) is None


@pytest.mark.slow
def test_compaction_refuses_to_drop_most_of_the_index(history, tmp_path, capsys):
    _tmp, _batches, index = history
    idx = tmp_path / "index"
    shutil.copytree(index, idx)
    before = manifest(idx)
    args = [
        "index",
        "compact",
        str(idx),
        "--keep-recent",
        "0",
        "--retention-days",
        "1",
        "--min-snapshots",
        "1",
    ]
    assert main([*args, "--max-drop-fraction", "0.3"]) == 2
    assert "more than --max-drop-fraction 0.3" in capsys.readouterr().err
    assert manifest(idx) == before
    assert main(args) == 0  # day 1, about a third of the entries: within the default 0.5
    report = json.loads(capsys.readouterr().out)
    assert (
        report["dropped_entries"]
        == sum(r["appended"] for r in before["runs"] if r["run_date"] < DATES[1])
        > 0
    )


@pytest.mark.slow
def test_rebuild_of_a_date_inside_a_compacted_snapshot_keeps_every_other_date(history, tmp_path, capsys):
    _tmp, batches, index = history
    idx = tmp_path / "index"
    shutil.copytree(index, idx)
    assert main(["index", "compact", str(idx), "--keep-recent", "1", *EXACT]) == 0
    before = manifest(idx)
    assert sorted(before["snapshots"][0]["runs"]) == DATES[:2]
    code = incremental(
        batches[0], tmp_path / "out", idx, DATES[0], "--set", "features.ngram_size=4", "--rebuild-index"
    )
    assert code == 0, capsys.readouterr().err
    after = manifest(idx)
    assert sum(s["docs_rows"] for s in after["snapshots"]) == sum(s["docs_rows"] for s in before["snapshots"])
    assert sorted(d for s in after["snapshots"] for d in s["runs"]) == DATES[:3]
    assert [r["run_date"] for r in after["runs"]] == DATES[:3]


def test_check_reports_a_null_text_and_prints_valid_json(history, tmp_path, capsys):
    tmp, _batches, _index = history
    f = tmp_path / "q.jsonl"
    f.write_text('{"id": "n", "text": null}\n{"id": 7, "text": "完全无关的一句话，没有任何重复。"}\n')
    capsys.readouterr()
    assert (
        main(["check", "--index", str(tmp / "index_before_day3"), "--file", str(f), "--jsonl", *EXACT]) == 0
    )
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (out[0]["input"], out[0]["status"], out[0]["fingerprint"]) == ("n", "null_text", None)
    assert out[1]["input"] == 7 and out[1]["status"] == "ok"


def _checked(index: Path, table: pa.Table, settings: list[str], capsys, tmp: Path) -> dict:
    """``check`` of every text of ``table`` against ``index``: id → its result."""
    texts = tmp / "queries.jsonl"
    texts.write_text(
        "".join(
            json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n"
            for i, t in zip(table.column("id").to_pylist(), table.column("text").to_pylist(), strict=True)
        )
    )
    capsys.readouterr()
    assert main(["check", "--index", str(index), "--file", str(texts), "--jsonl", *settings]) == 0
    return {r["input"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}


def _cross_pairs(spark, out: Path, new_ids: set) -> dict:
    """new id → {(indexed id, distance)} of the pairs a run wrote between its batch and the index."""
    paired: dict = {}
    for p in rows(spark, out, "pairs"):
        a, b = p["id_a"], p["id_b"]
        if (a in new_ids) != (b in new_ids):
            new, old = (a, b) if a in new_ids else (b, a)
            paired.setdefault(new, set()).add((old, p["distance"]))
    return paired


@pytest.mark.heavy
def test_an_index_with_sketch_tables_answers_checks_compacts_and_keeps_its_setting(
    spark, tmp_path, capsys, caplog, monkeypatch
):
    """With ``match.sketch_bands`` the index keeps sketch band tables: ``check`` finds the indexed
    documents the job paired beyond k, compaction carries the tables, and the setting is the index's for
    its life ("auto" takes it, another explicit setting is refused; ``--rebuild-index`` changes it)."""
    sketched = [*EXACT, *SKETCH_BANDS]
    plain_settings = [*EXACT, *NO_SKETCH_BANDS]
    batches = split_corpus(generate(150, seed=11), 3, tmp_path)
    idx = tmp_path / "index"
    assert incremental(batches[0], tmp_path / "d1", idx, DATES[0], settings=sketched) == 0
    shutil.copytree(idx, tmp_path / "index_day1")
    assert incremental(batches[1], tmp_path / "d2", idx, DATES[1]) == 0  # "auto": the index's setting
    day2 = pq.read_table(batches[1])
    paired = _cross_pairs(spark, tmp_path / "d2", set(day2.column("id").to_pylist()))
    assert any(d > 3 for pairs in paired.values() for _, d in pairs)  # beyond k = 3
    results = _checked(tmp_path / "index_day1", day2, sketched, capsys, tmp_path)
    for i, r in results.items():
        assert {(m["id"], m["distance"]) for m in r["matches"]} == paired.get(i, set()), i
    # compaction carries the sketch tables: the check of day three's texts answers as before
    day3 = pq.read_table(batches[2])
    before = _checked(idx, day3, EXACT, capsys, tmp_path)
    assert any(m["distance"] > 3 for r in before.values() for m in r["matches"])
    assert main(["index", "compact", str(idx), "--keep-recent", "0", "--min-snapshots", "1", *sketched]) == 0
    assert len(manifest(idx)["snapshots"]) == 1 and manifest(idx)["layout"] == {"sketch_bands": True}
    assert _checked(idx, day3, sketched, capsys, tmp_path) == before
    capsys.readouterr()
    assert main(["index", "verify", str(idx)]) == 0
    assert json.loads(capsys.readouterr().out)["ok"]
    # the setting is the index's: refused when set otherwise, run and check, or when "auto" cannot apply
    assert incremental(batches[2], tmp_path / "plain", idx, DATES[2], settings=plain_settings) == 2
    assert "holds sketch band tables and this run has match.sketch_bands = false" in capsys.readouterr().err
    assert main(["check", "--index", str(idx), *plain_settings, "一句话"]) == 2
    assert "holds sketch band tables" in capsys.readouterr().err
    edit = [*EXACT, "--set", "verify.measure=edit"]
    assert incremental(batches[2], tmp_path / "edit", idx, DATES[2], settings=edit) == 2
    assert "cannot compute the sketches: needs verify.measure" in capsys.readouterr().err
    # an index without them stays so under "auto", refuses true, and gains them by a rebuild, then
    # pairs as the sketched index did
    plain = tmp_path / "plain_index"
    assert incremental(batches[0], tmp_path / "p1", plain, DATES[0], settings=plain_settings) == 0
    # the job's logger does not propagate to the root logger that caplog watches
    logging.getLogger("simhash_spark.index.session").addHandler(caplog.handler)
    try:
        assert incremental(batches[1], tmp_path / "p2auto", plain, DATES[1]) == 0
    finally:
        logging.getLogger("simhash_spark.index.session").removeHandler(caplog.handler)
    assert "has no sketch band tables" in caplog.text and "--rebuild-index adds them" in caplog.text
    with monkeypatch.context() as connect:  # a Spark Connect session: its fingerprint pass keeps no sketches
        connect.setattr(pipeline, "spark_context", lambda session: None)
        refused = f"index {re.escape(str(idx))} holds sketch band tables.*Spark Connect cannot"
        with pytest.raises(ConfigError, match=refused):
            pipeline.for_session(spark, load_config(), index_path=str(idx))
        index_cfg = load_config(overrides=EXACT[1::2])  # the index's model and k
        opened = IndexSession.open(spark, index_cfg, path=str(idx), run_date=DATES[2], rebuild=False)
        try:  # dedup() given an opened index, as library users call it
            with pytest.raises(ConfigError, match=refused):
                pipeline.for_session(spark, index_cfg, opened)
        finally:
            opened.abort()
        for runs_without in (plain, tmp_path / "no_index_yet"):
            assert not pipeline.for_session(spark, load_config(), index_path=str(runs_without)).sketch_bands
    assert manifest(plain)["format"] == 4 and not manifest(plain)["layout"]["sketch_bands"]
    summary = json.loads((tmp_path / "p2auto" / "summary.json").read_text())
    assert summary["config"]["match"]["sketch_bands"] == "false" and "sketch_bands" not in summary
    assert incremental(batches[1], tmp_path / "p2", plain, DATES[1], settings=sketched) == 2
    assert "holds no sketch band tables" in capsys.readouterr().err
    args = ("--rebuild-index",)
    assert incremental(batches[1], tmp_path / "p2", plain, DATES[1], *args, settings=sketched) == 0
    assert manifest(plain)["format"] == 4 and manifest(plain)["layout"]["sketch_bands"]
    assert _cross_pairs(spark, tmp_path / "p2", set(day2.column("id").to_pylist())) == paired
    # "auto" rebuilds with them too (they apply): an index created without them gets them
    auto_plain = tmp_path / "auto_plain"
    assert incremental(batches[0], tmp_path / "ap1", auto_plain, DATES[0], settings=plain_settings) == 0
    snapshot_ids_before = [s["id"] for s in manifest(auto_plain)["snapshots"]]
    assert incremental(batches[1], tmp_path / "ap2", auto_plain, DATES[1], *args) == 0
    assert manifest(auto_plain)["layout"]["sketch_bands"]
    assert len({s["id"] for s in manifest(auto_plain)["snapshots"]} & set(snapshot_ids_before)) == 0
    capsys.readouterr()
    assert incremental(batches[2], tmp_path / "ap3", auto_plain, DATES[2], settings=plain_settings) == 2
    assert "holds sketch band tables" in capsys.readouterr().err


VOLATILE = {"index": ("version_before", "version_after", "snapshot", "entries_after", "created")}


def stable_summary(folder: Path) -> dict:
    s = json.loads((folder / "summary.json").read_text())
    s.pop("timings_s")  # wall times
    s.pop("stages")
    s.pop("spark_jobs")  # adaptive execution may start a different number of jobs
    for key in VOLATILE["index"]:
        s["index"].pop(key)
    return s


@pytest.mark.slow
def test_rerunning_every_date_in_random_order_reproduces_the_first_runs(spark, tmp_path):
    import random

    batches = split_corpus(generate(200, seed=17), 5, tmp_path)
    index = tmp_path / "index"
    for j, path in enumerate(batches):
        assert incremental(path, tmp_path / f"first{j}", index, DATES[j]) == 0
    order = list(range(5))
    random.Random(3).shuffle(order)
    for j in order:
        assert incremental(batches[j], tmp_path / f"again{j}", index, DATES[j]) == 0, j
        for name in ("documents", "pairs", "clusters", "deduplicated"):
            assertDataFrameEqual(
                spark.read.parquet(str(tmp_path / f"again{j}" / name)),
                spark.read.parquet(str(tmp_path / f"first{j}" / name)),
            )
        assert stable_summary(tmp_path / f"again{j}") == stable_summary(tmp_path / f"first{j}"), j
    m = manifest(index)
    assert [r["run_date"] for r in m["runs"]] == DATES[:5]
    assert sorted(d for s in m["snapshots"] for d in s["runs"]) == DATES[:5]


# --- small batches are linked and assembled on the driver -------------------------------------------------

LINKING_STAGES = ("candidates", "verify", "titles", "clusters", "assemble")


def _second_day(tmp: Path, name: str, settings: list[str]) -> dict:
    """The second daily run of a split corpus, against a copy of the first day's index: its outputs
    and summary."""
    shutil.copytree(tmp / "index_day1", tmp / f"{name}_index")
    out = tmp / name
    assert (
        incremental(
            tmp / "batches" / "batch1.parquet", out, tmp / f"{name}_index", DATES[1], settings=settings
        )
        == 0
    )
    tables = {
        t: sorted(json.dumps(r, sort_keys=True, default=str) for r in pq.read_table(out / t).to_pylist())
        for t in ("documents", "pairs", "clusters", "deduplicated")
    }
    return {"tables": tables, "summary": json.loads((out / "summary.json").read_text())}


@pytest.mark.heavy
def test_a_small_incremental_batch_is_linked_and_assembled_on_the_driver_like_spark_does(tmp_path):
    """A batch and the entries it touches, few enough for the driver, are linked and clustered there (no
    Spark job per linking step) with the outputs of the Spark paths: components labelled on the driver
    from a Spark linking, and the distributed components."""
    longest = [*EXACT, "--set", "cluster.representative=longest_text"]
    (tmp_path / "batches").mkdir()
    batches = split_corpus(generate(80, seed=13, dup_share=0.5), 2, tmp_path / "batches")
    assert (
        incremental(batches[0], tmp_path / "day1", tmp_path / "index_day1", DATES[0], settings=longest) == 0
    )
    # the second day also sends three of the first day's documents again (already_indexed)
    resent = pq.read_table(batches[0]).slice(0, 3)
    pq.write_table(pa.concat_tables([pq.read_table(batches[1]), resent]), batches[1])
    spark_linked = [*longest, "--set", "cluster.local_max_documents=0"]
    runs = {
        "driver": _second_day(tmp_path, "driver", longest),
        "labelled": _second_day(tmp_path, "labelled", spark_linked),
        "distributed": _second_day(
            tmp_path, "distributed", [*spark_linked, "--set", "cluster.local_max_edges=0"]
        ),
    }
    methods = {name: run["summary"]["components_method"] for name, run in runs.items()}
    assert methods == {"driver": "local", "labelled": "local", "distributed": "distributed"}
    driver = runs["driver"]
    for name in ("labelled", "distributed"):
        assert runs[name]["tables"] == driver["tables"], name
        for key in ("duplicates", "clusters", "largest_cluster", "pairs_accepted", "dedup_rate"):
            assert runs[name]["summary"][key] == driver["summary"][key], (name, key)
        matched = runs[name]["summary"]["index"]["batch_documents_matched"]
        assert matched == driver["summary"]["index"]["batch_documents_matched"], name
    assert driver["summary"]["index"]["batch_documents_matched"] > 3 and driver["summary"]["clusters"] > 0
    assert driver["summary"]["index"]["already_indexed"] == 3
    docs = [json.loads(r) for r in driver["tables"]["documents"]]
    smallest = {}
    for r in docs:
        smallest[r["cluster_id"]] = min(smallest.get(r["cluster_id"], r["id"]), r["id"])
    assert any(cid != first for cid, first in smallest.items())  # longest_text moved a representative
    # linking and assembly on the driver start a handful of Spark jobs, not one per step
    jobs = {
        name: sum(run["summary"]["stages"].get(s, {}).get("jobs", 0) for s in LINKING_STAGES)
        for name, run in runs.items()
    }
    assert jobs["driver"] <= 6 < jobs["labelled"], jobs
    # and the index is read and written there with pyarrow (the Spark runs read what the driver wrote)
    looked_up = {name: run["summary"]["index"]["looked_up_on"] for name, run in runs.items()}
    assert looked_up == {"driver": "driver", "labelled": "spark", "distributed": "spark"}
    stages = driver["summary"]["stages"]
    assert stages["index_lookup"]["jobs"] == 0 and stages["index_write"]["jobs"] == 0, stages


@pytest.mark.parametrize("title", [None, "title"])
def test_the_driver_takes_into_the_index_the_rows_spark_would(spark, tmp_path, title):
    """What a batch looked up on the driver commits (``index_pass.local_entries``) against its Spark twin
    (``snapshots.entries_of_batch``): the same rows, ids the index holds already left out, titles and
    their fingerprints kept."""
    (tmp_path / "batches").mkdir()
    batches = split_corpus(generate(30, seed=21, dup_share=0.5), 2, tmp_path / "batches")
    settings = [*EXACT, *(["--set", f"input.title_column={title}"] if title else [])]
    assert incremental(batches[0], tmp_path / "day1", tmp_path / "index", DATES[0], settings=settings) == 0
    resent = pq.read_table(batches[0]).slice(0, 3)
    batch = pa.concat_tables([pq.read_table(batches[1]), resent])
    cfg = load_config(overrides=[s for s in settings if s != "--set"])
    index = IndexSession.open(spark, cfg, path=str(tmp_path / "index"), run_date=DATES[1], rebuild=False)
    try:
        result = dedup(spark, spark.createDataFrame(batch.to_pandas()), cfg, index=index)
        assert result.stats["index"]["looked_up_on"] == "driver" and result.index_rows is not None
        assert result.index_entries is not None
        on_driver, on_spark = result.index_rows, result.index_entries.toPandas()
        result.unpersist()
    finally:
        index.abort()

    def rows(df: pd.DataFrame) -> list[tuple]:
        return sorted(
            tuple(None if pd.isna(v) else v for v in r)
            for r in df[list(ENTRY_COLUMNS)].itertuples(index=False)
        )

    assert rows(on_driver) == rows(on_spark)
    assert len(on_driver) == pq.read_table(batches[1]).num_rows  # every new document, none re-sent
    assert not set(on_driver[C.ID]) & set(resent.column("id").to_pylist())
    assert on_driver[C.TITLE].notna().all() == bool(title)
    assert on_driver[C.TITLE_FINGERPRINT].notna().all() == bool(title)


def test_the_plans_of_incremental_runs_linked_by_spark_fit_the_bound_whole(spark, tmp_path, monkeypatch):
    """The entries a batch touches carry the plans of the keys and entries they were found with, and every
    step of the linking reads them: persisted, the plans of the second date's linking ran to megabytes and
    its verify stage rendered one the driver had no memory for. Every frame the runs keep has a plan whose
    whole text fits the bound a run sets on rendered plans (here lifted, so nothing is truncated)."""
    from simhash_spark import context
    from simhash_spark.session import PLAN_STRING_CHARS, PLAN_STRING_LIMIT

    sizes: list[int] = []

    def measured(keep):
        def keep_and_measure(self, df):
            kept = keep(self, df)
            sizes.append(plan_chars(kept))
            # fail the run here, before it renders a plan larger still
            assert sizes[-1] <= PLAN_STRING_CHARS, f"a plan of {sizes[-1]:,} characters"
            return kept

        return keep_and_measure

    for name in ("persist", "materialize"):
        monkeypatch.setattr(context.RunContext, name, measured(getattr(context.RunContext, name)))
    batches = split_corpus(generate(120, seed=5), 3, tmp_path)
    shuffled = ["cluster.local_max_documents=0", "bands.in_task_max_fingerprints=0"]
    spark.conf.set(PLAN_STRING_LIMIT, UNBOUNDED_PLANS)
    try:
        for j in range(3):
            out, idx = tmp_path / f"out{j}", tmp_path / "index"
            rc = incremental(batches[j], out, idx, DATES[j], *(a for s in shuffled for a in ("--set", s)))
            assert rc == 0, f"date {j + 1}: the largest plan {max(sizes):,} characters"
    finally:
        spark.conf.unset(PLAN_STRING_LIMIT)
    assert json.loads((tmp_path / "out2" / "summary.json").read_text())["bands"]["join"] == "shuffled"


def test_an_empty_day_is_recorded_with_allow_empty_input_and_a_missing_one_is_not(tmp_path, capsys):
    """A day without a crawl (its folder holds no data file): exit 2 by default; with
    --allow-empty-input, exit 0, empty outputs, nothing indexed, the run recorded, no monitor check, and
    the next day's monitor leaves it out of the history. A day whose folder does not exist is no empty
    day: exit 2 whatever the flag."""
    table = generate(60, seed=3)
    day1, day3 = tmp_path / "d1", tmp_path / "d3"
    for folder, part in ((day1, table.slice(0, 30)), (day3, table.slice(30))):
        folder.mkdir()
        pq.write_table(part, folder / "part-0.parquet")
    empty = tmp_path / "d2"
    empty.mkdir()
    (empty / "_SUCCESS").write_text("")
    index = tmp_path / "index"
    assert incremental(day1, tmp_path / "o1", index, DATES[0]) == 0
    capsys.readouterr()
    assert incremental(empty, tmp_path / "o2", index, DATES[1]) == 2
    assert "cannot read input" in capsys.readouterr().err
    assert incremental(tmp_path / "missing", tmp_path / "o2", index, DATES[1], "--allow-empty-input") == 2
    assert len(manifest(index)["runs"]) == 1
    assert incremental(empty, tmp_path / "o2", index, DATES[1], "--allow-empty-input") == 0
    s = json.loads((tmp_path / "o2" / "summary.json").read_text())
    assert s["input_rows"] == 0 and s["index"]["appended"] == 0 and s["monitor"]["checked"] is False
    for name in ("documents", "pairs", "clusters", "deduplicated"):
        assert pq.read_table(tmp_path / "o2" / name).num_rows == 0
    assert pq.read_table(tmp_path / "o2" / "documents").schema.field("id").type == pa.string()
    m = manifest(index)
    assert [(r["run_date"], r["input_rows"]) for r in m["runs"]][1] == (DATES[1], 0)
    monitored = ["--set", "monitor.min_runs=1", "--set", "monitor.max_factor=100"]
    assert incremental(day3, tmp_path / "o3", index, DATES[2], *monitored) == 0
    s3 = json.loads((tmp_path / "o3" / "summary.json").read_text())
    assert s3["monitor"]["checked"] and s3["monitor"]["runs_considered"] == 1  # the empty day has no rate
