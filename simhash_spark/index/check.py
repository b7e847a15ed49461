"""The online check (``simhash_spark check --index PATH``): texts in, for each its fingerprint and the
indexed documents within k, the way the job would pair them. Starts no Spark: reads the manifest and
only the key partitions the texts' band keys select, with pyarrow."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from simhash_spark import columns as C
from simhash_spark.config import Config, index_sketch_bands_problem
from simhash_spark.core.fingerprint import FINGERPRINTED, FingerprintBatch, Fingerprinter, check_filter
from simhash_spark.core.index_model import (
    IndexLayout,
    Manifest,
    Snapshot,
    doc_bucket,
    model_differences,
    model_signature,
)
from simhash_spark.core.rules import PairRule
from simhash_spark.core.simhash import to_hex
from simhash_spark.errors import FingerprintIndexError
from simhash_spark.index.local_files import KEY_COLUMNS, QUERY, batch_keys, key_rows
from simhash_spark.index.store import IndexStore
from simhash_spark.storage import ArrowFiles

_M64 = (1 << 64) - 1
SHARES_BAND = "shares_band"


@dataclass(frozen=True)
class Query:
    id: str | int | None
    text: str | None  # None: checked as ``null_text``


def _table(files: ArrowFiles, dirs: list[str], columns: list[str], filt: Any) -> pa.Table:
    paths = [f"{d}/{n}" for d in dirs for n in files.list_names(d) if n.endswith(".parquet")]
    if not paths:
        return pa.table({c: [] for c in columns})
    dataset = ds.dataset(paths, filesystem=files.fs, format="parquet")
    return dataset.to_table(columns=columns, filter=filt)


def _open(index_path: str, cfg: Config) -> tuple[ArrowFiles, IndexStore, Manifest]:
    """The index, checked against the configuration: same body model, k within its tables, sketch band
    tables as ``match.sketch_bands`` allows (as a run against it needs)."""
    files = ArrowFiles(index_path)
    store = IndexStore(files, files.root)
    manifest = store.manifest()
    if manifest is None:
        raise FingerprintIndexError(f"no index at {index_path} (no _manifest/ folder)")
    # the check has no titles: the body model is what must match
    current = model_signature(cfg.model, None)
    diffs = model_differences(
        {k: manifest.model.get(k) for k in ("code_version", "body")},
        {k: current[k] for k in ("code_version", "body")},
    )
    if diffs:
        raise FingerprintIndexError(
            f"index {index_path} was built with a different fingerprint model: {'; '.join(diffs[:6])}"
        )
    if cfg.policy.largest > manifest.layout.max_distance:
        raise FingerprintIndexError(
            f"index {index_path}: its tables find pairs up to {manifest.layout.max_distance} bits, the "
            f"configuration asks for {cfg.policy.largest} (match.max_distance / match.length_steps); use the "
            "index's k"
        )
    problem = index_sketch_bands_problem(cfg, manifest.layout.sketch_bands, f"index {index_path}")
    if problem is not None:
        raise FingerprintIndexError(problem)
    return files, store, manifest


def _wanted_keys(batch: FingerprintBatch, layout: IndexLayout) -> dict[int, list[tuple[int, int, int]]]:
    """Key partition → (query, band, key) of every fingerprinted query's band keys."""
    queries = np.array([qi for qi, s in enumerate(batch.status) if s in FINGERPRINTED], dtype=np.int64)
    sketches = None
    if layout.sketch_bands:
        assert batch.check_summary is not None  # computed with the sketch filter (``check``)
        sketches = [batch.check_summary[int(qi)] for qi in queries]
    keys = batch_keys(np.asarray(batch.fingerprint, dtype=np.int64)[queries], layout, sketches)
    wanted: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for part, q, band, key in zip(keys[C.PART], keys[QUERY], keys[C.BAND], keys[C.KEY], strict=True):
        wanted[int(part)].append((int(queries[q]), int(band), int(key)))
    return wanted


def _candidates(
    batch: FingerprintBatch,
    wanted: dict[int, list[tuple[int, int, int]]],
    rows: list[dict[str, Any]],
    rule: PairRule,
    first_sketch_table: int | None,
) -> dict[int, dict[Any, dict[str, Any]]]:
    """Query → indexed id → its key row, distance and whether they share a sketch band, for entries
    sharing a key and within the pair's k, or sharing a sketch band key (tables from
    ``first_sketch_table`` on)."""
    by_key: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_key[(r[C.BAND], r[C.KEY])].append(r)
    found: dict[int, dict[Any, dict[str, Any]]] = defaultdict(dict)
    for items in wanted.values():
        for qi, band, key in items:
            fp = int(batch.fingerprint[qi])
            sketch = first_sketch_table is not None and band >= first_sketch_table
            for r in by_key.get((band, key), ()):
                d = ((fp ^ r[C.FINGERPRINT]) & _M64).bit_count()
                if sketch or d <= rule.k(int(batch.n_chars[qi]), r[C.N_CHARS]):
                    before = found[qi].get(r[C.ID], {}).get(SHARES_BAND, False)
                    found[qi][r[C.ID]] = {**r, "distance": d, SHARES_BAND: before or sketch}
    return found


def _matches(
    text: str | None,
    n_chars: int,
    candidates: dict[Any, dict[str, Any]],
    texts: dict[Any, str],
    rule: PairRule,
) -> list[dict[str, Any]]:
    """The candidates the pair rule accepts, as the job would label them, nearest first."""
    out = []
    for cand in candidates.values():
        d, stored = cand["distance"], texts.get(cand[C.ID])
        within_k = d <= rule.k(n_chars, cand[C.N_CHARS])
        needs = rule.needs_text_check(d, within_k=within_k)
        sim = rule.similarity(text or "", stored or "") if needs else None
        reason = rule.reason(
            d,
            n_chars,
            cand[C.N_CHARS],
            same_text=text == stored,
            similarity=sim,
            shares_band=cand[SHARES_BAND],
        )
        if reason is not None:
            out.append(
                {
                    "id": cand[C.ID],
                    "distance": d,
                    "similarity": sim,
                    "reason": reason,
                    "run_date": cand[C.RUN_DATE],
                }
            )
    return sorted(out, key=lambda m: (m["distance"], m["run_date"], str(m["id"])))


def check(
    index_path: str, cfg: Config, queries: Sequence[Query]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One result per query, and what was read (``partitions_read``, ``key_rows_read``)."""
    files, store, manifest = _open(index_path, cfg)
    layout = manifest.layout
    rule = PairRule(cfg.policy, cfg.verify, cfg.normalize, short=cfg.short_texts)
    sketch = check_filter(cfg.model, cfg.verify) if layout.sketch_bands else None
    batch = Fingerprinter(cfg.model, sketch).batch([q.text for q in queries])
    wanted = _wanted_keys(batch, layout)
    snapshots = list(manifest.snapshots)
    dirs = store.partition_dirs(snapshots, "keys", set(wanted))
    rows: list[dict[str, Any]] = []
    for d in dirs:
        keys = {key for _, _, key in wanted[int(d.rsplit("=", 1)[1])]}
        table, _ = key_rows(files, d, KEY_COLUMNS, keys)
        rows += table.to_pylist() if table is not None else []
    first_sketch = layout.first_sketch_table if layout.sketch_bands else None
    candidates = _candidates(batch, wanted, rows, rule, first_sketch)
    texts = _texts(files, store, snapshots, layout.doc_bits, candidates) if rule.verify.enabled else {}
    results = []
    for qi, q in enumerate(queries):
        matches = _matches(q.text, int(batch.n_chars[qi]), candidates.get(qi, {}), texts, rule)
        earliest = min(matches, key=lambda m: (m["run_date"], str(m["id"])), default=None)
        has_fp = batch.status[qi] in FINGERPRINTED
        results.append(
            {
                "input": q.id if q.id is not None else qi,
                "fingerprint": to_hex(int(batch.fingerprint[qi]) & _M64) if has_fp else None,
                "status": batch.status[qi],
                "duplicate": bool(matches),
                "earliest": earliest["id"] if earliest else None,
                "matches": matches,
            }
        )
    read = {
        "index_entries": manifest.entries,
        "key_rows_total": manifest.key_rows,
        "partition_folders_read": len(dirs),
        "key_rows_read_after_filter": len(rows),
    }
    return results, read


def _texts(
    files: ArrowFiles,
    store: IndexStore,
    snapshots: list[Snapshot],
    doc_bits: int,
    candidates: dict[int, dict[Any, dict[str, Any]]],
) -> dict[Any, str]:
    need = {c[C.ID]: c[C.FINGERPRINT] for per in candidates.values() for c in per.values()}
    if not need:
        return {}
    buckets = {doc_bucket(fp, doc_bits) for fp in need.values()}
    dirs = store.partition_dirs(snapshots, "docs", buckets)
    table = _table(files, dirs, [C.ID, C.TEXT], pc.field(C.ID).isin(list(need)))
    return {r[C.ID]: r[C.TEXT] for r in table.to_pylist()}
