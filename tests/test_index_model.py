"""The index as data: layout, manifest versions and formats, model signatures, the rate monitor."""

import dataclasses
import json
import random

import pytest

from simhash_spark.config import load_config
from simhash_spark.core.index_model import (
    IndexLayout,
    Manifest,
    MonitorOptions,
    OldFormat,
    RunRecord,
    Snapshot,
    compaction_plan,
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


def _simulate_year(tier_ratio: float, days: int = 365, per_day: int = 1000) -> tuple[int, float, int]:
    """A daily run and a compaction after it (keep 7 recent, merge at 7): (snapshots at the end, entries
    rewritten per entry stored, the most snapshots at any time)."""
    snaps: list[Snapshot] = []
    rewritten = most = 0
    for d in range(days):
        date = f"2026-{1 + d // 28:02d}-{1 + d % 28:02d}" if d < 336 else f"2027-01-{1 + d - 336:02d}"
        rng = random.Random(d)
        snaps.append(Snapshot(f"s{d}", (date,), 0, per_day // 2 + rng.randrange(per_day), "t"))
        plan = compaction_plan(snaps, keep_recent=7, min_snapshots=7, tier_ratio=tier_ratio, cutoff=None)
        if plan.merge:
            merged = Snapshot(
                f"c{d}",
                tuple(sorted(r for s in plan.merge for r in s.runs)),
                0,
                sum(s.docs_rows for s in plan.merge),
                "t",
            )
            rewritten += merged.docs_rows
            snaps = [merged, *plan.keep]
        most = max(most, len(snaps))
    stored = sum(s.docs_rows for s in snaps)
    return len(snaps), rewritten / stored, most


def test_size_tiered_compaction_keeps_a_year_to_a_few_dozen_snapshots_rewriting_each_entry_a_few_times():
    n_all, rewrites_all, _ = _simulate_year(0)
    _, rewrites_tiered, most = _simulate_year(4)
    assert n_all <= 14 and rewrites_all > 20  # all older into one: each entry rewritten every week
    assert most <= 40 and rewrites_tiered < 4  # tiered: days into weeks into quarters


def test_compaction_plan_keeps_recent_dates_drops_expired_snapshots_and_rewrites_straddling_ones():
    def snap(i: str, *runs: str, rows: int = 10) -> Snapshot:
        return Snapshot(i, runs, 0, rows, "t")

    snaps = [
        snap("old", "2026-01-01", "2026-01-02", rows=100),
        snap("mid", "2026-01-03", "2026-01-09", rows=100),
        snap("a", "2026-01-10"),
        snap("b", "2026-01-11"),
        snap("c", "2026-01-12"),
        snap("recent", "2026-01-13"),
    ]
    plan = compaction_plan(snaps, keep_recent=1, min_snapshots=3, tier_ratio=4, cutoff="2026-01-05")
    assert [s.id for s in plan.drop] == ["old"]  # every date expired: gone without a rewrite
    assert sorted(s.id for s in plan.merge) == ["a", "b", "c", "mid"]  # a tier of three, and the straddler
    assert [s.id for s in plan.keep] == ["recent"]
    whole = compaction_plan(snaps, keep_recent=1, min_snapshots=2, tier_ratio=0, cutoff=None)
    assert sorted(s.id for s in whole.merge) == ["a", "b", "c", "mid", "old"] and not whole.drop
    small = compaction_plan(snaps, keep_recent=1, min_snapshots=4, tier_ratio=4, cutoff=None)
    assert not small.merge and len(small.keep) == 6
