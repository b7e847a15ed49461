"""The persistent fingerprint index, as data (pure Python): its layout, its manifest, the fingerprint model
it was built with, and the dedup-rate monitor.

Layout on storage (``INDEX/``), format 4::

    _manifest/v00000001.json ...                one file per committed version; the highest one is current
    snapshots/<snapshot>/entries/*.parquet      one row per entry (``ENTRY_COLUMNS``: id, fingerprint, n_chars,
                                                title fingerprint, text, title, run date, sketch), sorted by
                                                fingerprint over the files, in small row groups; texts zstd
    snapshots/<snapshot>/keys/key_table=<T>/    one row per distinct (key, fingerprint) of key table T
                                                (``core.index_keys``: ids, four fingerprint segments, the
                                                sketch bands), sorted by key, in small row groups
    snapshots/<snapshot>/_contents.json         what the snapshot holds: per folder its row count and its
                                                files with their sizes; the manifest records its SHA-256

Each entry is stored once; a lookup computes its documents' probes, reads of each key table only the row
groups whose key range holds a probe, and of the entries only the row groups whose fingerprint range
holds a fingerprint it touched. A snapshot written by a run is invisible until a manifest version lists
it: a failed run leaves the index exactly as it was. Every reader checks what it reads against what the
manifest promises (the contents record's checksum, then each folder's files and sizes) and refuses a
damaged index instead of answering from less history (``simhash_spark.index.store``).

Formats 1–3 (0.1–0.3: one key row per (document, band table) in ``keys/part=P``, texts in
``docs/bucket=B``) are read only by ``index upgrade``, which rewrites them as format 4.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from simhash_spark import columns as C
from simhash_spark.core import index_keys
from simhash_spark.core.fingerprint import ModelOptions
from simhash_spark.core.normalize import variants_signature

# 4: entries stored once, a few sorted key tables (``core.index_keys``). 1–3 are upgraded by `index upgrade`:
# 2 had contents records, 3 was 2 with sketch band tables; 1 had neither.
FORMAT = 4
OLD_FORMATS = (1, 2, 3)
# Bumped whenever the code that maps a text to its fingerprint changes in a way options do not capture.
# 2: unterminated HTML comments, CDATA sections and ">" inside attribute values (normalize.strip_html).
# 3: a tied bit vote takes the bit of the document's smallest feature hash instead of 0 (core.simhash).
FINGERPRINT_CODE_VERSION = 3
_M64 = (1 << 64) - 1
# the columns of an entries/ row: what a run needs of an indexed document (``check_summary``: its sketch,
# null in an index without sketch bands)
ENTRY_COLUMNS = (
    C.ID,
    C.FINGERPRINT,
    C.N_CHARS,
    C.TITLE_FINGERPRINT,
    C.TEXT,
    C.TITLE,
    C.RUN_DATE,
    C.CHECK_SUMMARY,
)
KEY_COLUMNS = (C.INDEX_KEY, C.FINGERPRINT)  # the columns of a keys/key_table=T row


def _file_sha256(path: str) -> str | None:
    if not path:
        return None
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _options(obj: Any) -> dict[str, Any]:
    return json.loads(json.dumps(dataclasses.asdict(obj)))


def model_signature(model: ModelOptions, title_model: ModelOptions | None) -> dict[str, Any]:
    """Everything that decides a fingerprint: options, the contents (not the paths) of the dictionary, IDF
    and stop-word files, and the fingerprint code version. Two runs may share an index iff these are equal."""

    def one(m: ModelOptions) -> dict[str, Any]:
        fp = _options(m.fingerprint)
        fp.pop("memo_size", None)  # a cache size: results are identical whatever it is
        tok = _options(m.tokenizer)
        feats = _options(m.features)
        tok["user_dict_sha256"] = _file_sha256(tok.pop("user_dict_path"))
        feats["idf_sha256"] = _file_sha256(feats.pop("idf_path"))
        feats["stop_words_sha256"] = _file_sha256(feats.pop("stop_words_path"))
        norm = _options(m.normalize)
        norm["variants_model"] = variants_signature(m.normalize.variants)
        return {
            "normalize": norm,
            "tokenizer": tok,
            "features": feats,
            "fingerprint": fp,
            "short_texts": _options(m.short_texts),
        }

    return {
        "code_version": FINGERPRINT_CODE_VERSION,
        "body": one(model),
        "title": one(title_model) if title_model is not None else None,
    }


# Recorded but not compared: both tokenizer backends produce the same tokens (tests/test_tokenizer_parity.py).
_INFORMATIONAL = ("tokenizer.backend",)


def model_differences(stored: Any, current: Any, prefix: str = "") -> list[str]:
    """Dotted paths where two signatures differ, with both values."""
    if prefix.rstrip(".").endswith(_INFORMATIONAL):
        return []
    if isinstance(stored, dict) and isinstance(current, dict):
        out: list[str] = []
        for key in sorted(set(stored) | set(current)):
            out += model_differences(stored.get(key), current.get(key), f"{prefix}{key}.")
        return out
    if stored != current:
        return [f"{prefix.rstrip('.')}: index {stored!r}, this run {current!r}"]
    return []


# --- layout ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexLayout:
    """What a format-4 index stores besides its entries: the key tables (``core.index_keys``). Whether it
    has sketch band tables is fixed for the index's life (its entries must be found the way a batch's
    documents are)."""

    sketch_bands: bool = False

    def tables(self) -> list[int]:
        return index_keys.tables(self.sketch_bands)

    @property
    def format(self) -> int:
        return FORMAT


def legacy_layout(layout: dict[str, Any]) -> IndexLayout:
    """The format-4 layout an index of formats 1–3 (its manifest's ``layout``) is upgraded to."""
    return IndexLayout(sketch_bands=bool(layout.get("sketch_bands", False)))


# --- manifest ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    id: str
    runs: tuple[str, ...]  # run dates whose documents it holds
    keys_rows: int
    docs_rows: int  # entries
    created: str
    contents_sha256: str = ""  # of its _contents.json ("" only while a format-1 index is upgraded)


CONTENTS = "_contents.json"
ENTRIES = "entries"  # a snapshot's folder of entries
KEYS = "keys"  # its folders of key rows: keys/key_table=T
LEGACY_DOCS = "docs"  # formats 1–3: the entries' folders, docs/bucket=B


@dataclass(frozen=True)
class FolderContents:
    rows: int
    files: dict[str, int]  # file name → bytes


@dataclass(frozen=True)
class SnapshotContents:
    """What one snapshot holds: per folder (``entries``, ``keys/key_table=3``; formats 1–3:
    ``docs/bucket=5``, ``keys/part=3``) its rows and its files with their sizes. Written beside the data,
    checksummed in the manifest."""

    snapshot: str
    folders: dict[str, FolderContents]

    def rows(self, kind: str) -> int:
        return sum(f.rows for name, f in self.select(kind, None))

    def select(self, kind: str, wanted: set[int] | None) -> list[tuple[str, FolderContents]]:
        """The folders of ``kind`` (``entries``, or ``keys`` whose table number is in ``wanted``; None:
        all), by name."""
        out = []
        for name in sorted(self.folders):
            head, _, number = name.partition("=")
            if name == kind or (
                head.startswith(kind + "/") and (wanted is None or not number or int(number) in wanted)
            ):
                out.append((name, self.folders[name]))
        return out

    def entry_rows(self) -> int:
        """The entries it holds (formats 1–3: in ``docs/bucket=B``)."""
        return self.rows(ENTRIES) + self.rows(LEGACY_DOCS)

    def bytes(self) -> int:
        return sum(size for f in self.folders.values() for size in f.files.values())

    def files(self) -> int:
        return sum(len(f.files) for f in self.folders.values())

    def to_json(self) -> str:
        folders = {
            name: {"rows": f.rows, "files": dict(sorted(f.files.items()))}
            for name, f in sorted(self.folders.items())
        }
        return json.dumps({"snapshot": self.snapshot, "folders": folders}, indent=1, sort_keys=True) + "\n"

    @staticmethod
    def from_json(text: str) -> SnapshotContents:
        d = json.loads(text)
        return SnapshotContents(
            d["snapshot"],
            {
                name: FolderContents(int(f["rows"]), {n: int(b) for n, b in f["files"].items()})
                for name, f in d["folders"].items()
            },
        )


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class OldFormat(ValueError):
    """A manifest of formats 1–3: readable by ``index upgrade`` only."""


@dataclass(frozen=True)
class RunRecord:
    run_date: str
    snapshot: str
    input_rows: int
    appended: int
    duplicates: int
    dedup_rate: float
    matched_index: int
    finished: str


@dataclass(frozen=True)
class Manifest:
    version: int
    model: dict[str, Any]
    layout: IndexLayout
    id_type: str  # Spark simple type name of the ids (every batch must match)
    snapshots: tuple[Snapshot, ...] = ()
    runs: tuple[RunRecord, ...] = ()  # every committed run in run-date order (kept through compaction)
    format: int = FORMAT  # as read; always written as ``FORMAT`` (1–3 only until ``index upgrade``)
    extra: dict[str, Any] = field(default_factory=dict)
    # formats 1–3, read by ``index upgrade``: the manifest's own layout (band tables, partitions), never written
    legacy_layout: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def entries(self) -> int:
        return sum(s.docs_rows for s in self.snapshots)

    @property
    def key_rows(self) -> int:
        return sum(s.keys_rows for s in self.snapshots)

    def snapshot_of(self, run_date: str) -> Snapshot | None:
        return next((s for s in self.snapshots if run_date in s.runs), None)

    def to_json(self) -> str:
        d = dataclasses.asdict(self)
        d.pop("legacy_layout")
        d["format"] = FORMAT
        return json.dumps(d, indent=2, ensure_ascii=False, sort_keys=False) + "\n"

    @staticmethod
    def from_json(text: str, *, old_format: bool = False) -> Manifest:
        """A manifest; one of formats 1–3 only with ``old_format`` (``index upgrade``)."""
        d = json.loads(text)
        fmt = d.get("format")
        if fmt in OLD_FORMATS and not old_format:
            raise OldFormat(
                f"it was written in format {fmt} by an earlier version (one key row per document and band "
                "table), which this version does not read; run `simhash-spark index upgrade PATH` once (it "
                "checks every snapshot against the manifest and rewrites it as format 4, entries stored once)"
            )
        if fmt not in (FORMAT, *OLD_FORMATS):
            raise ValueError(f"index format {fmt!r}; this version reads format {FORMAT}")
        old = fmt in OLD_FORMATS
        return Manifest(
            version=int(d["version"]),
            model=d["model"],
            layout=legacy_layout(d["layout"]) if old else IndexLayout(**d["layout"]),
            id_type=d["id_type"],
            snapshots=tuple(Snapshot(**{**s, "runs": tuple(s["runs"])}) for s in d["snapshots"]),
            runs=tuple(RunRecord(**r) for r in d["runs"]),
            format=fmt,
            extra=d.get("extra", {}),
            legacy_layout=d["layout"] if old else {},
        )

    def with_run(self, snapshot: Snapshot, record: RunRecord) -> Manifest:
        """The next version: ``snapshot`` added (replacing a snapshot of the same run date, so a rerun
        appends nothing twice) and the run recorded (replacing an earlier record of that date); runs stay
        in run-date order whatever order they ran in."""
        old = self.snapshot_of(record.run_date)
        if old is not None and old.runs != (record.run_date,):
            raise ValueError(
                f"run {record.run_date} is part of compacted snapshot {old.id} (runs {', '.join(old.runs)})"
            )
        snaps = (*tuple(s for s in self.snapshots if s is not old), snapshot)
        runs = sorted(
            (*(r for r in self.runs if r.run_date != record.run_date), record), key=lambda r: r.run_date
        )
        return dataclasses.replace(self, version=self.version + 1, snapshots=snaps, runs=tuple(runs))

    def rebuild_groups(self, run_date: str, keep_recent: int) -> list[tuple[str, ...]]:
        """The run dates of each snapshot a rebuild writes (every date but ``run_date``, which the run adds
        again): each of the last ``keep_recent`` dates that had a snapshot of its own keeps one, so it stays
        rerunnable as compaction would leave it; the other dates share one snapshot."""
        single = {s.runs[0] for s in self.snapshots if len(s.runs) == 1}
        dates = sorted({d for s in self.snapshots for d in s.runs if d != run_date})
        recent = [d for d in dates[-keep_recent:] if d in single] if keep_recent else []
        merged = tuple(d for d in dates if d not in recent)
        return ([merged] if merged else []) + [(d,) for d in recent]

    def visible_snapshots(self, run_date: str) -> list[Snapshot]:
        """The snapshots holding entries a run of ``run_date`` sees: those of earlier run dates only, so a
        rerun of a date sees what its first run saw."""
        return [s for s in self.snapshots if s.runs and min(s.runs) < run_date]


# --- compaction --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompactionPlan:
    merge: tuple[Snapshot, ...]  # rewritten into one snapshot (entries before the cutoff left out)
    keep: tuple[Snapshot, ...]  # left as they are
    drop: tuple[Snapshot, ...]  # every run date before the cutoff: removed without a rewrite


def _tiers(snapshots: Sequence[Snapshot], ratio: float) -> list[list[Snapshot]]:
    """Snapshots grouped by size, smallest first: each group's largest holds at most ``ratio`` times the
    entries of its smallest."""
    groups: list[list[Snapshot]] = []
    for snap in sorted(snapshots, key=lambda s: (s.docs_rows, min(s.runs, default=""))):
        if groups and snap.docs_rows <= ratio * max(1, groups[-1][0].docs_rows):
            groups[-1].append(snap)
        else:
            groups.append([snap])
    return groups


def compaction_plan(
    snapshots: Sequence[Snapshot],
    *,
    keep_recent: int,
    min_snapshots: int,
    tier_ratio: float,
    cutoff: str | None,
) -> CompactionPlan:
    """What ``index compact`` does. The snapshots of the last ``keep_recent`` run dates stay (rerunnable);
    of the older ones, those whose every date is before the retention ``cutoff`` are dropped whole, those
    holding dates on both sides of it are rewritten without the older entries, and:

    - ``tier_ratio`` 0: all others are merged into one (when at least ``min_snapshots`` are);
    - ``tier_ratio`` > 1 (size-tiered, what a daily schedule wants): the smallest group of snapshots of
      like size (``_tiers``) with at least ``min_snapshots`` members is merged. Days merge into weeks,
      weeks into quarters: a year of daily runs keeps a few dozen snapshots, and each entry is rewritten
      about once per tier instead of at every compaction."""
    dates = sorted({d for s in snapshots for d in s.runs})
    recent = set(dates[-keep_recent:]) if keep_recent else set()
    keep = [s for s in snapshots if set(s.runs) & recent]
    older = [s for s in snapshots if not set(s.runs) & recent]
    drop = [s for s in older if cutoff is not None and s.runs and max(s.runs) < cutoff]
    straddle = [s for s in older if cutoff is not None and s.runs and min(s.runs) < cutoff <= max(s.runs)]
    rest = [s for s in older if s not in drop and s not in straddle]
    chosen: list[Snapshot] = []
    if tier_ratio <= 0:
        chosen = rest if len(rest) >= min_snapshots else []
    else:
        chosen = next((g for g in _tiers(rest, tier_ratio) if len(g) >= min_snapshots), [])
    merge = [s for s in older if s in chosen or s in straddle]
    keep += [s for s in rest if s not in chosen]
    return CompactionPlan(tuple(merge), tuple(keep), tuple(drop))


# --- monitoring --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MonitorOptions:
    max_factor: float = 3.0  # 0 = off
    window: int = 7
    min_runs: int = 3
    min_delta: float = 0.01


def rate_check(rate: float, history: Sequence[float], opts: MonitorOptions) -> dict[str, Any]:
    """Is ``rate`` inside the band [median / f, median · f] of the last ``window`` runs' rates (widened by
    ``min_delta`` either side, so quiet days near zero do not alarm)? Needs ``min_runs`` runs of history."""
    recent = list(history)[-opts.window :]
    out: dict[str, Any] = {"dedup_rate": rate, "runs_considered": len(recent)}
    if opts.max_factor <= 0 or len(recent) < opts.min_runs:
        out.update(ok=True, checked=False, recent_median=statistics.median(recent) if recent else None)
        return out
    med = statistics.median(recent)
    low = med / opts.max_factor - opts.min_delta
    high = med * opts.max_factor + opts.min_delta
    ok = low <= rate <= high
    out.update(
        ok=ok,
        checked=True,
        recent_median=med,
        band=[round(max(0.0, low), 6), round(high, 6)],
        change=round(rate / med, 3) if med else None,
    )
    return out
