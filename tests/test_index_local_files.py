"""The index lookup of a batch the driver holds (``index.local_files``, pyarrow) against the Spark lookup:
the same ids seen before, the same touched entries, the same statistics."""

import dataclasses
import random

import pandas as pd
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.config import load_config, with_overrides
from simhash_spark.context import RunContext
from simhash_spark.core.index_model import ENTRY_COLUMNS, Manifest, RunRecord
from simhash_spark.core.simhash import hamming
from simhash_spark.core.sketch_bands import stored_share_band
from simhash_spark.index.local_files import write_snapshot_files
from simhash_spark.index.session import HeldBatch, IndexSession, _signature, new_layout
from simhash_spark.index.snapshots import entry_schema, write_snapshot
from simhash_spark.index.store import IndexStore, open_store
from simhash_spark.storage import ArrowFiles

K = 3
SETTINGS = {"match.max_distance": K, "bands.scheme": "blocks:5"}
D1, D2, RUN, LATER = "2026-11-01", "2026-11-02", "2026-11-03", "2026-11-04"


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _flip(fp: int, bits: int, rng: random.Random) -> int:
    for b in rng.sample(range(64), bits):
        fp ^= 1 << b
    return _signed(fp & ((1 << 64) - 1))


def _sketch(rng: random.Random) -> bytes | None:
    """A random sketch, now and then none or one with an empty bin (no key in that band)."""
    if rng.random() < 0.1:
        return None
    sketch = bytearray(rng.randrange(1, 256) for _ in range(32))
    if rng.random() < 0.2:
        sketch[rng.randrange(32)] = 0
    return bytes(sketch)


def _near_sketch(sketch: bytes | None, rng: random.Random) -> bytes | None:
    """``sketch`` with every band changed but (now and then) one."""
    if sketch is None:
        return None
    out = bytearray(sketch)
    kept = rng.randrange(8) if rng.random() < 0.6 else None
    for band in range(8):
        if band != kept:
            out[band * 4] = out[band * 4] % 255 + 1
    return bytes(out)


def _entries(spark, rows: list[tuple], id_type: str):
    pdf = pd.DataFrame(rows, columns=list(ENTRY_COLUMNS), dtype=object)  # 64-bit values, nulls
    return spark.createDataFrame(pdf, entry_schema(id_type))


def _index(spark, path, cfg, id_type: str, rng: random.Random):
    """Entries of D1; D2 and LATER compacted into one snapshot (its LATER rows invisible to RUN); RUN's
    own (invisible). Returns the visible entries and all entries."""
    layout = new_layout(cfg)
    store = open_store(spark, str(path))
    manifest = Manifest(version=0, model=_signature(cfg), layout=layout, id_type=id_type)
    assert store.create(manifest)
    make_id = (lambda n: f"doc-{n:04d}") if id_type == "string" else (lambda n: 10_000 + n)
    days = {(D1,): [D1], (D2, LATER): [D2, LATER], (RUN,): [RUN]}
    snapshots, all_rows, n = [], [], 0
    for runs, dates in days.items():
        rows = []
        for _ in range(60):
            title_fp = _signed(rng.getrandbits(64)) if rng.random() < 0.5 else None
            rows.append(
                (
                    make_id(n),
                    _signed(rng.getrandbits(64)),
                    rng.randrange(30, 900),
                    title_fp,
                    f"text {n}",
                    None,
                    rng.choice(dates),
                    _sketch(rng),
                )
            )
            n += 1
        snap_id = store.new_snapshot(runs[0], "tests")
        snapshots.append(write_snapshot(store, layout, _entries(spark, rows, id_type), snap_id, runs))
        all_rows += rows
    records = tuple(RunRecord(d, "", 60, 60, 0, 0.0, 0, "t") for d in (D1, D2, RUN, LATER))
    store.commit(dataclasses.replace(manifest, version=1, snapshots=tuple(snapshots), runs=records))
    return [r for r in all_rows if r[6] < RUN], all_rows


def _batch(all_rows: list[tuple], id_type: str, rng: random.Random) -> pd.DataFrame:
    """Near copies of indexed entries (0 to K + 2 bits away, of visible and invisible dates; sketches
    sharing a band with theirs now and then), fresh documents, ids the index holds (one of them not
    fingerprinted) and one of an invisible date."""
    make_id = (lambda n: f"new-{n:04d}") if id_type == "string" else (lambda n: 50_000 + n)
    rows = []
    for n, entry in enumerate(rng.sample(all_rows, 70)):
        fp = _flip(entry[1], rng.randrange(0, K + 3), rng)
        rows.append((make_id(n), fp, 500, "ok", _near_sketch(entry[7], rng)))
    for n in range(70, 90):
        rows.append((make_id(n), _signed(rng.getrandbits(64)), 500, "ok", _sketch(rng)))
    visible = [r for r in all_rows if r[6] < RUN]
    resent = [*rng.sample(visible, 4), next(r for r in all_rows if r[6] == RUN)]
    for i, entry in enumerate(resent):
        rows.append((entry[0], _flip(entry[1], 1, rng), 500, "null_text" if i == 0 else "ok", entry[7]))
    return pd.DataFrame(rows, columns=[C.ID, C.FINGERPRINT, C.N_CHARS, C.STATUS, C.CHECK_SUMMARY])


def _touched_rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.select(*ENTRY_COLUMNS).collect())


SKETCHED = {**SETTINGS, "match.sketch_bands": True}
PLAIN = {**SETTINGS, "match.sketch_bands": False}  # an index without sketch band tables


@pytest.mark.parametrize(
    ("id_type", "settings"), [("string", PLAIN), ("bigint", PLAIN), ("string", SKETCHED)]
)
def test_the_driver_lookup_finds_what_the_spark_lookup_finds(spark, tmp_path, id_type, settings):
    rng = random.Random(7 if id_type == "string" else 8)
    cfg = with_overrides(load_config(), settings)
    sketched = cfg.sketch_bands
    # Hadoop's spelling of a local path, "file:/...", once: the driver must read the folder Spark reads
    path = str(tmp_path / "index") if id_type == "string" else f"file:{tmp_path / 'index'}"
    visible, all_rows = _index(spark, path, cfg, id_type, rng)
    batch = _batch(all_rows, id_type, rng)
    schema = f"{C.ID} {id_type}, {C.FINGERPRINT} bigint, {C.N_CHARS} int, {C.STATUS} string"
    fps = spark.createDataFrame(batch.drop(columns=[C.CHECK_SUMMARY]), schema).cache()
    summaries = spark.createDataFrame(
        batch[[C.ID, C.CHECK_SUMMARY]], f"{C.ID} {id_type}, {C.CHECK_SUMMARY} binary"
    ).where(F.col(C.CHECK_SUMMARY).isNotNull())
    session = IndexSession.open(spark, cfg, path=path, run_date=RUN, rebuild=False)
    try:
        ctx = RunContext()
        documents = int((batch[C.STATUS] == "ok").sum())
        on_spark = session.lookup(fps, K, ctx, summaries=summaries, documents=documents)
        keyed = batch[batch[C.STATUS] == "ok"]
        if not sketched:
            keyed = keyed.drop(columns=[C.CHECK_SUMMARY])
        held = HeldBatch(batch[C.ID].tolist(), keyed)
        on_driver = session.lookup(fps, K, ctx, held, documents=documents)
    finally:
        session.abort()
    assert on_spark.stats["looked_up_on"] == "spark" and on_driver.stats["looked_up_on"] == "driver"
    assert on_driver.local is not None
    statuses = [
        sorted(tuple(r) for r in x.fps.select(C.ID, C.STATUS).collect()) for x in (on_spark, on_driver)
    ]
    assert statuses[0] == statuses[1]
    resent = batch[C.ID].tolist()[-5:]  # four visible ids (the first not fingerprinted), one of RUN
    assert on_driver.local.known_ids == sorted(resent[:4]) and on_spark.stats["already_indexed"] == 4
    marked = on_spark.fps.where(F.col(C.STATUS) == "already_indexed").collect()
    assert sorted(r[C.ID] for r in marked) == sorted(resent[1:4])
    touched = _touched_rows(on_spark.touched)
    assert touched == _touched_rows(on_driver.touched)
    local = on_driver.local.touched
    assert (
        sorted(tuple(None if pd.isna(v) else v for v in r) for r in local.itertuples(index=False)) == touched
    )
    # the brute force: visible entries within K of a linked batch document (fingerprinted, not re-sent)
    # or, with sketch tables, sharing a sketch band with one
    linked = [
        (int(f), sk)
        for i, f, s, sk in zip(
            batch[C.ID], batch[C.FINGERPRINT], batch[C.STATUS], batch[C.CHECK_SUMMARY], strict=True
        )
        if s == "ok" and i not in set(resent[:4])
    ]

    def pairs(r, f, sk):
        return hamming(r[1], f) <= K or (sketched and bool(stored_share_band([r[7]], [sk])[0]))

    near = sorted(r for r in visible if any(pairs(r, f, sk) for f, sk in linked))
    assert [t[0] for t in touched] == [r[0] for r in near] and len(near) > 10
    assert any(hamming(r[1], f) <= K for r in all_rows if r[6] >= RUN for f, _ in linked)  # invisible, near
    beyond = [r for r in near if all(hamming(r[1], f) > K for f, _ in linked)]
    assert bool(beyond) == sketched  # entries only a shared sketch band touches
    for key in ("touched_entries", "already_indexed", "entries_before", "probe_radius", "key_rows_total"):
        assert on_driver.stats[key] == on_spark.stats[key], key
    # both read the row groups (the driver) or key ranges (Spark) the probes can meet: at most the index
    assert 0 < on_driver.stats["key_rows_read"] <= on_spark.stats["key_rows_total"]
    assert 0 < on_spark.stats["key_rows_read"] <= on_spark.stats["key_rows_total"]


def _snapshot_rows(spark, folder) -> dict:
    out = {}
    for kind in ("keys", "entries"):
        frame = spark.read.parquet(str(folder / kind))
        out[kind] = (frame.dtypes, sorted(tuple(r) for r in frame.collect()))
        out[kind + "_folders"] = sorted(p.name for p in (folder / kind).iterdir() if p.is_dir())
    return out


@pytest.mark.parametrize(("id_type", "settings"), [("string", PLAIN), ("int", PLAIN), ("int", SKETCHED)])
def test_the_driver_writes_the_snapshot_files_spark_writes(spark, tmp_path, id_type, settings):
    cfg = with_overrides(load_config(), settings)
    layout = new_layout(cfg)
    rng = random.Random(11)
    rows = [
        (
            f"doc-{n}" if id_type == "string" else n,
            _signed(rng.getrandbits(64)),
            rng.randrange(30, 900),
            _signed(rng.getrandbits(64)) if n % 3 else None,
            f"text {n} ä",
            None if n % 2 else f"title {n}",
            RUN,
            _sketch(rng),
        )
        for n in range(150)
    ]
    store = open_store(spark, str(tmp_path))
    by_spark, by_driver = store.new_snapshot("a", "tests"), store.new_snapshot("b", "tests")
    sealed = write_snapshot(store, layout, _entries(spark, rows, id_type), by_spark, (RUN,))
    files = ArrowFiles(str(tmp_path))
    folder = IndexStore(files, files.root).snapshot_dir(by_driver)
    entries = pd.DataFrame(rows, columns=list(ENTRY_COLUMNS), dtype=object)  # as the driver holds them
    written = write_snapshot_files(files, folder, layout, entries, id_type)
    # the same folders with the same rows as the contents record of Spark's snapshot
    assert written == {name: f.rows for name, f in store.contents(sealed).folders.items()}
    assert written["entries"] == 150
    snaps = tmp_path / "snapshots"
    assert _snapshot_rows(spark, snaps / by_driver) == _snapshot_rows(spark, snaps / by_spark)
    for by in (by_driver, by_spark):
        for path in (snaps / by / "keys").glob("*/*.parquet"):
            keys = pq.read_table(path).column(C.INDEX_KEY).to_pylist()
            assert keys == sorted(keys)  # row groups prune on key ranges
        for path in (snaps / by / "entries").glob("*.parquet"):
            fps = pq.read_table(path).column(C.FINGERPRINT).to_pylist()
            assert fps == sorted(fps)  # and on fingerprint ranges
