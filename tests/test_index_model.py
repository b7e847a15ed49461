"""The index as data: layout, manifest versions and formats, model signatures, the rate monitor."""

import dataclasses
import json

import pytest

from simhash_spark.config import load_config
from simhash_spark.core.index_model import (
    IndexLayout,
    Manifest,
    MonitorOptions,
    OldFormat,
    RunRecord,
    Snapshot,
    model_differences,
    model_signature,
    rate_check,
)
from simhash_spark.errors import FingerprintIndexError
from simhash_spark.index.store import IndexStore
from simhash_spark.storage import ArrowFiles


def test_a_manifest_of_an_older_format_is_read_by_the_upgrade_only():
    m = _manifest()
    legacy = json.loads(m.to_json())
    legacy["format"] = 3
    legacy["layout"] = {
        "scheme": "lsh:387,18",
        "max_distance": 12,
        "prefix_bits": 0,
        "doc_bits": 6,
        "sketch_bands": True,
    }
    with pytest.raises(OldFormat, match="index upgrade"):
        Manifest.from_json(json.dumps(legacy))
    old = Manifest.from_json(json.dumps(legacy), old_format=True)
    assert old.format == 3 and old.layout == IndexLayout(sketch_bands=True)
    assert old.legacy_layout["scheme"] == "lsh:387,18"
    written = json.loads(old.to_json())
    assert (
        written["format"] == 4
        and written["layout"] == {"sketch_bands": True}
        and "legacy_layout" not in written
    )


def _manifest() -> Manifest:
    cfg = load_config()
    layout = IndexLayout(sketch_bands=False)
    return Manifest(version=0, model=model_signature(cfg.model, None), layout=layout, id_type="string")


def _record(date: str, snap: str, rate: float = 0.1) -> RunRecord:
    return RunRecord(date, snap, 10, 9, 1, rate, 0, "t")


def test_manifest_roundtrip_and_rerun_replaces_its_snapshot():
    m = _manifest()
    m1 = m.with_run(Snapshot("s1", ("2026-11-01",), 40, 10, "t"), _record("2026-11-01", "s1"))
    m2 = m1.with_run(Snapshot("s2", ("2026-11-02",), 40, 10, "t"), _record("2026-11-02", "s2"))
    again = m2.with_run(Snapshot("s3", ("2026-11-02",), 44, 11, "t"), _record("2026-11-02", "s3", 0.2))
    assert [s.id for s in again.snapshots] == ["s1", "s3"] and again.entries == 21 and again.version == 3
    assert [r.snapshot for r in again.runs] == ["s1", "s3"]
    assert Manifest.from_json(again.to_json()) == again
    merged = dataclasses.replace(again, snapshots=(Snapshot("c", ("2026-11-01", "2026-11-02"), 84, 21, "t"),))
    with pytest.raises(ValueError, match="compacted"):
        merged.with_run(Snapshot("s4", ("2026-11-02",), 1, 1, "t"), _record("2026-11-02", "s4"))


def test_model_differences_name_the_setting_and_ignore_the_backend(tmp_path):
    cfg = load_config()
    base = model_signature(cfg.model, None)
    assert model_differences(base, base) == []
    other = model_signature(
        load_config(overrides=["features.ngram_size=4", "tokenizer.backend=jieba"]).model, None
    )
    assert model_differences(base, other) == ["body.features.ngram_size: index 5, this run 4"]
    stop = tmp_path / "stop.txt"
    stop.write_text("的\n", "utf-8")
    with_file = model_signature(load_config(overrides=[f"features.stop_words_path={stop}"]).model, None)
    stop.write_text("了\n", "utf-8")
    changed = model_signature(load_config(overrides=[f"features.stop_words_path={stop}"]).model, None)
    assert [d.split(":")[0] for d in model_differences(with_file, changed)] == [
        "body.features.stop_words_sha256"
    ]


def test_rate_monitor_band():
    opts = MonitorOptions(max_factor=3.0, window=3, min_runs=2, min_delta=0.01)
    assert rate_check(0.9, [0.1], opts)["checked"] is False
    res = rate_check(0.2, [0.5, 0.1, 0.1, 0.1], opts)
    assert res["ok"] and res["recent_median"] == 0.1 and res["change"] == 2.0
    assert not rate_check(0.35, [0.1, 0.1, 0.1], opts)["ok"]
    assert not rate_check(0.0, [0.3, 0.3, 0.3], opts)["ok"]
    assert rate_check(0.005, [0.0, 0.0, 0.0], opts)["ok"]  # quiet days near zero do not alarm
    assert rate_check(0.9, [0.1, 0.1, 0.1], dataclasses.replace(opts, max_factor=0))["ok"]


def test_store_commits_numbered_versions_and_refuses_a_stale_base(tmp_path):
    files = ArrowFiles(str(tmp_path / "idx"))
    store = IndexStore(files, files.root)
    assert store.manifest() is None
    assert store.create(_manifest()) and not store.create(_manifest())
    m1 = _manifest().with_run(Snapshot("s1", ("2026-11-01",), 4, 1, "t"), _record("2026-11-01", "s1"))
    store.commit(m1)
    assert store.manifest() == m1
    with pytest.raises(FingerprintIndexError, match="another writer committed version 1 first"):
        store.commit(m1)
    m2 = m1.with_run(Snapshot("s2", ("2026-11-02",), 4, 1, "t"), _record("2026-11-02", "s2"))
    store.commit(m2)
    assert store.manifest() == m2
    assert sorted(p.name for p in (tmp_path / "idx" / "_manifest").iterdir()) == [
        "v00000000.json",
        "v00000001.json",
        "v00000002.json",
    ]


def test_a_folder_that_is_not_an_index_is_refused(tmp_path):
    (tmp_path / "data.parquet").write_bytes(b"x")
    files = ArrowFiles(str(tmp_path))
    with pytest.raises(FingerprintIndexError, match=r"holds data.parquet but no manifest version"):
        IndexStore(files, files.root).manifest()
