"""The index answers from everything its manifest promises or not at all: a damaged index (a snapshot folder
removed, a file truncated or foreign) is refused with exit 2 naming what is wrong, by every reader
(incremental runs on both lookup paths, ``check``, compaction, ``index verify``); an index of formats 1–3 is
upgraded to format 4 once, and a damaged one is not; an id lives in the index once, whatever order dates run in; a rebuild keeps the recent dates
rerunnable."""

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from simhash_spark.cli import main

TEXT = "新华社北京电 国务院总理今天主持召开常务会议，部署进一步做好稳就业工作，会议指出就业是最大的民生。" * 3
SETTINGS = ["--set", "output.write_report=false"]
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
    folder = snap / "entries"
    if how == "folder-removed":
        shutil.rmtree(folder)
        return "entries/ is missing"
    data = next(folder.glob("*.parquet"))
    if how == "file-truncated":
        data.write_bytes(data.read_bytes()[:100])
        return f"{data.name} has 100 bytes"
    assert how == "foreign-file"
    pq.write_table(pa.table({"x": [1]}), folder / "part-99999-foreign.parquet")
    return "part-99999-foreign.parquet is not a file of this snapshot"


DAMAGES = ["snapshot-removed", "folder-removed", "file-truncated", "foreign-file"]


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
    data = next((snapshot_of(index, "2026-11-02") / "entries").glob("*.parquet"))
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
    assert main(["index", "compact", str(index), "--keep-recent", "0", *SETTINGS]) == 2
    assert named in capsys.readouterr().err
    assert manifest(index) == before


@pytest.mark.heavy
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


def _legacy_snapshot(snap: Path, rows: list[dict], fmt: int) -> dict:
    """Rewrite a snapshot folder as formats 1–3 laid it out: texts in docs/bucket=B, one key row per
    (document, band table) in keys/part=P (their contents do not matter to an upgrade, which derives the
    keys again), a contents record from format 2 on. Returns the contents record (format 2 and 3)."""
    for kind in ("entries", "keys"):
        shutil.rmtree(snap / kind)
    (snap / "_contents.json").unlink()
    columns = [c for c in rows[0] if fmt == 3 or c != "check_summary"]
    folders = {}
    for bucket in (0, 1):
        part = [r for r in rows if r["fingerprint"] % 2 == bucket]
        if not part:
            continue
        path = snap / "docs" / f"bucket={bucket}"
        path.mkdir(parents=True)
        pq.write_table(pa.table({c: [r[c] for r in part] for c in columns}), path / "part-0.parquet")
        folders[f"docs/bucket={bucket}"] = {
            "rows": len(part),
            "files": {"part-0.parquet": (path / "part-0.parquet").stat().st_size},
        }
    keys = snap / "keys" / "part=0"
    keys.mkdir(parents=True)
    pq.write_table(
        pa.table({"band": [0] * len(rows), "band_key": [r["fingerprint"] for r in rows]}), keys / "k.parquet"
    )
    folders["keys/part=0"] = {"rows": len(rows), "files": {"k.parquet": (keys / "k.parquet").stat().st_size}}
    return {"snapshot": snap.name, "folders": folders}


def _as_legacy(index: Path, fmt: int) -> dict:
    """The index as an earlier version left it, in format ``fmt`` (1: no contents records)."""
    import hashlib

    m = manifest(index)
    for snap in m["snapshots"]:
        folder = index / "snapshots" / snap["id"]
        rows = pq.read_table(folder / "entries").to_pylist()
        contents = _legacy_snapshot(folder, rows, fmt)
        snap["keys_rows"] = len(rows)
        if fmt == 1:
            del snap["contents_sha256"]
        else:
            text = json.dumps(contents)
            (folder / "_contents.json").write_text(text)
            snap["contents_sha256"] = hashlib.sha256(text.encode()).hexdigest()
    m["format"] = fmt
    m["layout"] = {
        "scheme": "lsh:387,18",
        "max_distance": 12,
        "prefix_bits": 0,
        "doc_bits": 1,
        "sketch_bands": fmt == 3,
    }
    sorted((index / "_manifest").glob("v*.json"))[-1].write_text(json.dumps(m))
    return m


@pytest.mark.parametrize("fmt", [1, 2, 3])
def test_an_index_of_an_earlier_format_is_upgraded_once_and_a_damaged_one_is_not(
    history, tmp_path, capsys, fmt
):
    index = copy_of(history, tmp_path)
    old = _as_legacy(index, fmt)
    damaged = tmp_path / "damaged"
    shutil.copytree(index, damaged)
    bucket = sorted((snapshot_of(damaged, "2026-11-02") / "docs").glob("bucket=*"))[0]
    shutil.rmtree(bucket)

    assert run_day(tmp_path, index, "2026-11-04", ["n0"]) == 2
    assert "index upgrade" in capsys.readouterr().err
    assert main(["index", "upgrade", str(damaged)]) == 2
    err = capsys.readouterr().err
    assert ("where its manifest records 4" if fmt == 1 else f"{bucket.name}/ is missing") in err, err
    assert (
        manifest(damaged) == json.loads(json.dumps(manifest(damaged))) and manifest(damaged)["format"] == fmt
    )
    assert main(["index", "upgrade", str(index)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["upgraded"] and report["from_format"] == fmt and report["entries"] == 12
    new = manifest(index)
    assert new["format"] == 4 and new["version"] == old["version"] + 1
    assert new["layout"] == {"sketch_bands": fmt == 3}
    assert [s["runs"] for s in new["snapshots"]] == [s["runs"] for s in old["snapshots"]]
    assert sorted(p.name for p in (index / "snapshots").iterdir()) == sorted(
        s["id"] for s in new["snapshots"]
    )
    assert main(["index", "verify", str(index)]) == 0
    capsys.readouterr()
    assert main(["index", "upgrade", str(index)]) == 0  # once: a second upgrade changes nothing
    assert json.loads(capsys.readouterr().out)["upgraded"] is False
    settings = [] if fmt == 3 else ["--set", "match.sketch_bands=false"]
    assert run_day(tmp_path, index, "2026-11-04", ["n0"], *settings) == 0
    assert summary(tmp_path, "out-2026-11-04")["index"]["touched_entries"] == 12
