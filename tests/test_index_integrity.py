"""The index answers from everything its manifest promises or not at all: a damaged index (a snapshot folder
removed, a file truncated or foreign) is refused with exit 2 naming what is wrong, by every reader
(incremental runs on both lookup paths, ``check``, compaction, ``index verify``); an index of format 1 is
upgraded once; an id lives in the index once, whatever order dates run in; a rebuild keeps the recent dates
rerunnable."""

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from simhash_spark.cli import main

TEXT = "新华社北京电 国务院总理今天主持召开常务会议，部署进一步做好稳就业工作，会议指出就业是最大的民生。" * 3
SETTINGS = [
    "--set",
    "index.partitions=16",
    "--set",
    "index.doc_buckets=4",
    "--set",
    "output.write_report=false",
]
SPARK_PATH = ["--set", "cluster.local_max_documents=0"]


def day_file(folder: Path, date: str, ids: list[str]) -> Path:
    """Near-duplicate texts (one article with a changed tail), one per id."""
    path = folder / f"{date}.parquet"
    texts = [f"{TEXT} 第{sum(map(ord, i)) % 7}篇。" for i in ids]
    pq.write_table(pa.table({"id": ids, "text": texts}), path)
    return path


def run_day(tmp: Path, index: Path, date: str, ids: list[str], *extra: str, out: str | None = None) -> int:
    return main(
        [
            "dedup",
            "--input",
            str(day_file(tmp, date, ids)),
            "--output",
            str(tmp / (out or f"out-{date}")),
            "--overwrite",
            "--index",
            str(index),
            "--run-date",
            date,
            *SETTINGS,
            *extra,
        ]
    )


def manifest(index: Path) -> dict:
    return json.loads(sorted((index / "_manifest").glob("v*.json"))[-1].read_text())


def summary(tmp: Path, name: str) -> dict:
    return json.loads((tmp / name / "summary.json").read_text())


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """An index of three dates, each holding near-duplicates of the others."""
    tmp = tmp_path_factory.mktemp("history")
    index = tmp / "index"
    for n, date in enumerate(("2026-11-01", "2026-11-02", "2026-11-03")):
        assert run_day(tmp, index, date, [f"d{n}-{i}" for i in range(4)]) == 0
    return tmp, index


def copy_of(history, tmp_path: Path) -> Path:
    index = tmp_path / "index"
    shutil.copytree(history[1], index)
    return index


def snapshot_of(index: Path, date: str) -> Path:
    snap = next(s for s in manifest(index)["snapshots"] if s["runs"] == [date])
    return index / "snapshots" / snap["id"]


def damage(index: Path, how: str) -> str:
    """Damage the snapshot of 2026-11-02 as a partial copy, a lifecycle rule or another tool would; returns
    the name the error must show."""
    snap = snapshot_of(index, "2026-11-02")
    if how == "snapshot-removed":
        shutil.rmtree(snap)
        return snap.name
    bucket = sorted((snap / "docs").glob("bucket=*"))[0]
    if how == "bucket-removed":
        shutil.rmtree(bucket)
        return f"{bucket.name}/ is missing"
    data = next(bucket.glob("*.parquet"))
    if how == "file-truncated":
        data.write_bytes(data.read_bytes()[:100])
        return f"{data.name} has 100 bytes"
    assert how == "foreign-file"
    pq.write_table(pa.table({"x": [1]}), bucket / "part-99999-foreign.parquet")
    return "part-99999-foreign.parquet is not a file of this snapshot"


DAMAGES = ["snapshot-removed", "bucket-removed", "file-truncated", "foreign-file"]


@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("path", ["driver", "spark"])
def test_a_damaged_index_is_refused_by_a_run_naming_what_is_wrong(history, tmp_path, capsys, how, path):
    index = copy_of(history, tmp_path)
    named = damage(index, how)
    before = manifest(index)
    capsys.readouterr()
    extra = SPARK_PATH if path == "spark" else []
    code = run_day(tmp_path, index, "2026-11-04", ["n0", "n1"], *extra)
    err = capsys.readouterr().err
    assert code == 2 and "is damaged" in err and named in err, err
    assert manifest(index) == before  # nothing committed
    assert not (tmp_path / "out-2026-11-04").exists()  # nothing published


@pytest.mark.parametrize("path", ["driver", "spark"])
def test_a_file_changed_in_place_at_its_size_is_named_as_the_index_s(history, tmp_path, capsys, path):
    """Sizes match, so the contents check passes; reading the file fails, and that names the index file
    (exit 2), not the run's input. `index verify` reads every file and finds it too."""
    index = copy_of(history, tmp_path)
    bucket = sorted((snapshot_of(index, "2026-11-02") / "docs").glob("bucket=*"))[0]
    data = next(bucket.glob("*.parquet"))
    data.write_bytes(bytes(data.stat().st_size))
    before = manifest(index)
    capsys.readouterr()
    code = run_day(tmp_path, index, "2026-11-04", ["n0", "n1"], *(SPARK_PATH if path == "spark" else []))
    err = capsys.readouterr().err
    assert code == 2 and "is damaged" in err and data.name in err and "cannot read input" not in err, err
    assert manifest(index) == before and not (tmp_path / "out-2026-11-04").exists()
    assert main(["index", "verify", str(index)]) == 2
    assert data.name in capsys.readouterr().out


@pytest.mark.parametrize("how", DAMAGES)
def test_check_verify_and_compaction_refuse_a_damaged_index(history, tmp_path, capsys, how):
    index = copy_of(history, tmp_path)
    assert main(["index", "verify", str(index)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["checked"]["snapshots"] == 3 and report["checked"]["entries"] == 12
    named = damage(index, how)
    before = manifest(index)
    assert main(["index", "verify", str(index)]) == 2
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert not report["ok"] and any(named in p for p in report["first_problems"]) and "damaged" in err
    assert main(["check", "--index", str(index), TEXT]) == 2
    assert named in capsys.readouterr().err
    assert main(["index", "stats", str(index)]) == (2 if how == "snapshot-removed" else 0)
    capsys.readouterr()
    assert main(["index", "compact", str(index), "--keep-recent", "0", *SETTINGS[:4]]) == 2
    assert named in capsys.readouterr().err
    assert manifest(index) == before


def test_a_backfilled_date_does_not_store_an_id_twice_and_pairs_stay_unique(tmp_path, capsys):
    index = tmp_path / "index"
    # 11-02 runs first; 11-01 (a failed day, rerun later) holds "shared" too; then 11-03
    assert run_day(tmp_path, index, "2026-11-02", ["shared", "b1", "b2"]) == 0
    for path in ("driver", "spark"):
        idx = tmp_path / f"index-{path}"
        shutil.copytree(index, idx)
        extra = SPARK_PATH if path == "spark" else []
        assert run_day(tmp_path, idx, "2026-11-01", ["shared", "a1"], *extra, out=f"a-{path}") == 0
        assert (
            summary(tmp_path, f"a-{path}")["index"]["appended"] == 1
        )  # a1 only: shared is stored under 11-02
        assert run_day(tmp_path, idx, "2026-11-03", ["c1"], *extra, out=f"c-{path}") == 0
        pairs = [(r["id_a"], r["id_b"]) for r in pq.read_table(tmp_path / f"c-{path}" / "pairs").to_pylist()]
        assert sorted(pairs) == [("a1", "c1"), ("b1", "c1"), ("b2", "c1"), ("c1", "shared")]
        assert summary(tmp_path, f"c-{path}")["pairs_accepted"] == 4
        capsys.readouterr()
        assert main(["index", "verify", str(idx)]) == 0
        assert json.loads(capsys.readouterr().out)["ids_stored_twice"] == 0
        # rerunning the backfilled date reproduces its first run, and stores nothing twice either
        first = pq.read_table(tmp_path / f"a-{path}" / "documents").to_pylist()
        assert run_day(tmp_path, idx, "2026-11-01", ["shared", "a1"], *extra, out=f"a2-{path}") == 0
        assert pq.read_table(tmp_path / f"a2-{path}" / "documents").to_pylist() == first
        assert sum(s["docs_rows"] for s in manifest(idx)["snapshots"]) == 5


def test_dates_stay_rerunnable_after_a_rebuild(history, tmp_path, capsys):
    index = copy_of(history, tmp_path)
    rebuild = ["--set", "features.ngram_size=4"]
    assert run_day(tmp_path, index, "2026-11-04", ["r0", "r1"], *rebuild, "--rebuild-index") == 0
    assert sorted(s["runs"] for s in manifest(index)["snapshots"]) == [
        [f"2026-11-0{d}"] for d in (1, 2, 3, 4)
    ]
    capsys.readouterr()
    assert (
        run_day(tmp_path, index, "2026-11-02", ["d1-0", "d1-1", "d1-2", "d1-3"], *rebuild, out="again") == 0
    )
    assert main(["index", "verify", str(index)]) == 0


def test_an_index_of_format_1_is_upgraded_once_and_a_damaged_one_is_not(history, tmp_path, capsys):
    index = copy_of(history, tmp_path)
    old = manifest(index)
    # as simhash_spark 0.1 left it: format 1, no contents records
    for snap in old["snapshots"]:
        del snap["contents_sha256"]
        (index / "snapshots" / snap["id"] / "_contents.json").unlink()
    old["format"] = 1
    latest = sorted((index / "_manifest").glob("v*.json"))[-1]
    latest.write_text(json.dumps(old))
    damaged = tmp_path / "damaged"
    shutil.copytree(index, damaged)
    shutil.rmtree(sorted((snapshot_of(damaged, "2026-11-02") / "keys").glob("part=*"))[0])

    assert run_day(tmp_path, index, "2026-11-04", ["n0"]) == 2
    assert "index upgrade" in capsys.readouterr().err
    assert main(["index", "upgrade", str(damaged), *SETTINGS[:2]]) == 2
    assert "holds 4 entries and" in capsys.readouterr().err and manifest(damaged)["format"] == 1
    assert main(["index", "upgrade", str(index), *SETTINGS[:2]]) == 0
    # the format its layout needs: 3, as the history has sketch band tables (the default)
    assert old["layout"]["sketch_bands"]
    assert manifest(index)["format"] == 3 and manifest(index)["version"] == old["version"] + 1
    assert main(["index", "verify", str(index)]) == 0
    assert run_day(tmp_path, index, "2026-11-04", ["n0"]) == 0
    assert summary(tmp_path, "out-2026-11-04")["index"]["touched_entries"] == 12
