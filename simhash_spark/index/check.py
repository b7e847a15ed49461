"""The online check (``simhash_spark check --index PATH``): texts in, for each its fingerprint and the
indexed documents within k, the way the job would pair them. Starts no Spark: reads the manifest, of each
key table only the row groups the texts' probes can meet, and the entries they touched, with pyarrow."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from simhash_spark import columns as C
from simhash_spark.config import Config, index_sketch_bands_problem
from simhash_spark.core import index_keys as K
from simhash_spark.core.fingerprint import FINGERPRINTED, FingerprintBatch, Fingerprinter, check_filter
from simhash_spark.core.index_model import (
    ENTRIES,
    ENTRY_COLUMNS,
    Manifest,
    model_differences,
    model_signature,
)
from simhash_spark.core.rules import PairRule
from simhash_spark.core.simhash import popcount, to_hex
from simhash_spark.core.sketch_bands import stored_share_band
from simhash_spark.errors import FingerprintIndexError
from simhash_spark.index import local_files
from simhash_spark.index.store import IndexStore
from simhash_spark.storage import ArrowFiles

_M64 = (1 << 64) - 1
SHARES_BAND = "shares_band"


@dataclass(frozen=True)
class Query:
    id: str | int | None
    text: str | None  # None: checked as ``null_text``


def _open(index_path: str, cfg: Config) -> tuple[ArrowFiles, IndexStore, Manifest]:
    """The index, checked against the configuration: same body model, sketch band tables as
    ``match.sketch_bands`` allows (as a run against it needs)."""
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
    problem = index_sketch_bands_problem(cfg, manifest.layout.sketch_bands, f"index {index_path}")
    if problem is not None:
        raise FingerprintIndexError(problem)
    return files, store, manifest


def _candidates(
    batch: FingerprintBatch,
    queries: np.ndarray,
    entries: pd.DataFrame,
    pairs: tuple[np.ndarray, np.ndarray],
    rule: PairRule,
) -> dict[int, dict[Any, dict[str, Any]]]:
    """Query → indexed id → its entry, distance and whether they share a sketch band, for the entries of
    the fingerprints its probes touched that are within the pair's k or share a sketch band with it."""
    by_fp: dict[int, list[dict[str, Any]]] = {}
    for r in entries.to_dict("records"):
        by_fp.setdefault(int(r[C.FINGERPRINT]), []).append(r)
    found: dict[int, dict[Any, dict[str, Any]]] = {}
    for q, stored in zip(*pairs, strict=True):
        qi = int(queries[q])
        fp = int(batch.fingerprint[qi])
        for r in by_fp.get(int(stored), ()):
            d = int(popcount(np.array([fp ^ r[C.FINGERPRINT]], dtype=np.int64))[0])
            sketch = batch.check_summary[qi] if batch.check_summary is not None else None
            shares = (
                bool(stored_share_band([sketch], [r[C.CHECK_SUMMARY]])[0]) if sketch is not None else False
            )
            if shares or d <= rule.k(int(batch.n_chars[qi]), int(r[C.N_CHARS])):
                found.setdefault(qi, {})[r[C.ID]] = {**r, "distance": d, SHARES_BAND: shares}
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


def _touched(
    files: ArrowFiles,
    store: IndexStore,
    manifest: Manifest,
    batch: FingerprintBatch,
    queries: np.ndarray,
    k: int,
    plan: K.SegmentPlan,
    reads: local_files.Reads,
) -> tuple[pd.DataFrame, tuple[np.ndarray, np.ndarray]]:
    """The entries (every run date, each id its earliest) the queries' probes touched, and the (query,
    fingerprint) pairs that touched them."""
    snapshots = list(manifest.snapshots)
    fps = np.asarray(batch.fingerprint, dtype=np.int64)[queries]
    sketches = None
    if manifest.layout.sketch_bands:
        assert batch.check_summary is not None  # computed with the sketch filter (``check``)
        sketches = [batch.check_summary[int(qi)] for qi in queries]
    probes, keys = local_files.batch_probes(fps, plan, manifest.layout, sketches)
    probes = [p for p in probes if len(p.value)]
    rows = local_files.key_lookup(files, store, snapshots, probes, reads)
    met = [K.touched(r, p, fps, k, keys) for r, p in zip(rows, probes, strict=True)]
    q = np.concatenate([m[0] for m in met]) if met else np.zeros(0, np.int64)
    f = np.concatenate([m[1] for m in met]) if met else np.zeros(0, np.int64)
    pairs = np.unique(np.stack([q, f], axis=1), axis=0) if len(q) else np.zeros((0, 2), np.int64)
    table, n = local_files.read_entries(
        files, store.partition_dirs(snapshots, ENTRIES, None), pairs[:, 1], ENTRY_COLUMNS, None
    )
    reads.entry_rows_read += n
    ordered = table.sort_by([(C.ID, "ascending"), (C.RUN_DATE, "ascending")])
    entries = ordered.to_pandas(integer_object_nulls=True).drop_duplicates(C.ID, ignore_index=True)
    return entries, (pairs[:, 0], pairs[:, 1])


def check(
    index_path: str, cfg: Config, queries: Sequence[Query]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One result per query, and what was read (``key_rows_read``, ``entry_rows_read``)."""
    files, store, manifest = _open(index_path, cfg)
    rule = PairRule(cfg.policy, cfg.verify, cfg.normalize, short=cfg.short_texts)
    sketch = check_filter(cfg.model, cfg.verify) if manifest.layout.sketch_bands else None
    batch = Fingerprinter(cfg.model, sketch).batch([q.text for q in queries])
    fingerprinted = np.array([qi for qi, s in enumerate(batch.status) if s in FINGERPRINTED], dtype=np.int64)
    k = cfg.policy.largest
    plan = K.plan_segments(k, manifest.entries, len(fingerprinted), cfg.index.lookup_rows_per_document)
    reads = local_files.Reads()
    with store.reading():
        entries, pairs = _touched(files, store, manifest, batch, fingerprinted, k, plan, reads)
    candidates = _candidates(batch, fingerprinted, entries, pairs, rule)
    texts = {r[C.ID]: r[C.TEXT] for r in entries.to_dict("records")} if rule.verify.enabled else {}
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
        "key_rows_read": reads.key_rows_read,
        "entry_rows_read": reads.entry_rows_read,
        **plan.describe(k),
    }
    return results, read
