"""The persistent fingerprint index, as data (pure Python): its layout, its manifest, the fingerprint model
it was built with, and the dedup-rate monitor.

Layout on storage (``INDEX/``)::

    _manifest/v00000001.json ...            one file per committed version; the highest one is current
    snapshots/<snapshot>/keys/part=<P>/     one row per (document, table): band, band_key, id, fingerprint,
                                            n_chars, run_date; P = band << prefix_bits | key prefix;
                                            with sketch tables (format 3) the tables after the
                                            fingerprint's hold sketch band keys (``sketch_key_part``)
    snapshots/<snapshot>/docs/bucket=<B>/   one row per document: id, fingerprint, n_chars,
                                            title_fingerprint, text, title_text, run_date (format 3:
                                            check_summary, the sketch); B = top bits of the fingerprint

    snapshots/<snapshot>/_contents.json     what the snapshot holds: per folder its row count and its files
                                            with their sizes; the manifest records this file's SHA-256

A batch computes its own band keys, so it knows which ``part=`` folders can hold a match and reads only
those; the texts of the entries it matched are in the ``bucket=`` folders of their fingerprints. A
snapshot written by a run is invisible until a manifest version lists it: a failed run leaves the index
exactly as it was. Every reader checks what it reads against what the manifest promises (the contents
record's checksum, then each folder's files and sizes) and refuses a damaged index instead of answering
from less history (``simhash_spark.index.store``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from simhash_spark import columns as C
from simhash_spark.core.bands import BITS, BandScheme, cheapest_lsh, exact_candidates, parse_scheme
from simhash_spark.core.fingerprint import ModelOptions
from simhash_spark.core.normalize import variants_signature
from simhash_spark.core.sketch_bands import BAND_BINS, BANDS

SKETCH_TABLES = BANDS
SKETCH_KEY_BITS = 8 * BAND_BINS

# 2: snapshots carry a contents record (files, sizes, rows); 1 (0.1.x) is upgraded by `index upgrade`.
# 3: format 2 with sketch key tables (``IndexLayout.sketch_bands``): a reader that knows no sketch tables
# must refuse it, or its writes would leave entries without their sketch keys.
FORMAT = 3
PLAIN_FORMAT = 2  # the format of an index without sketch tables: what 0.2 and later read and write
READ_FORMATS = (PLAIN_FORMAT, FORMAT)
# Bumped whenever the code that maps a text to its fingerprint changes in a way options do not capture.
# 2: unterminated HTML comments, CDATA sections and ">" inside attribute values (normalize.strip_html).
# 3: a tied bit vote takes the bit of the document's smallest feature hash instead of 0 (core.simhash).
FINGERPRINT_CODE_VERSION = 3
_M64 = (1 << 64) - 1
# the columns of a docs/ row: what a run needs of an indexed document. An index without sketch tables
# stores no ``check_summary`` (its readers give a null one): ``stored_entry_columns``.
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
    scheme: str  # band design, fixed for the index's life (a batch must use the tables the index stores)
    max_distance: int  # the k the tables were built for
    prefix_bits: int  # key partitions per table: 2 ** prefix_bits
    doc_bits: int  # document buckets: 2 ** doc_bits, by the fingerprint's top bits
    # eight more tables, one per sketch band (``core.sketch_bands``), after the fingerprint's: an entry
    # sharing a sketch band key with a batch document is touched whatever its Hamming distance
    sketch_bands: bool = False

    @property
    def band_scheme(self) -> BandScheme:
        return parse_scheme(self.scheme)

    def masks(self) -> list[int]:
        return self.band_scheme.table_masks(self.max_distance)

    def prefix_positions(self) -> list[list[int]]:
        """Per table: the bit positions (most significant first) whose values form the key's partition."""
        out = []
        for m in self.masks():
            bits = [b for b in range(BITS - 1, -1, -1) if (m & _M64) >> b & 1]
            out.append(bits[: self.prefix_bits])
        return out

    @property
    def first_sketch_table(self) -> int:
        """The table number of sketch band 0 (the fingerprint's tables come first)."""
        return len(self.masks())

    def n_tables(self) -> int:
        return len(self.masks()) + (SKETCH_TABLES if self.sketch_bands else 0)

    def n_parts(self) -> int:
        return self.n_tables() << self.prefix_bits

    @property
    def format(self) -> int:
        """The manifest format an index of this layout is written in."""
        return FORMAT if self.sketch_bands else PLAIN_FORMAT


def sketch_key_part(table: int, key: int | Any, prefix_bits: int) -> int | Any:
    """The ``part=`` folder of a sketch band key (a uint32) in ``table``: its top ``prefix_bits`` bits
    (integers or numpy arrays alike)."""
    bits = min(prefix_bits, SKETCH_KEY_BITS)
    return (table << prefix_bits) | (key >> (SKETCH_KEY_BITS - bits) if bits else key * 0)


def stored_entry_columns(layout: IndexLayout) -> tuple[str, ...]:
    """The columns of the docs/ rows of an index of ``layout``."""
    return ENTRY_COLUMNS if layout.sketch_bands else ENTRY_COLUMNS[:-1]


def key_part(band: int, fingerprint: int, positions: Sequence[int], prefix_bits: int) -> int:
    """The ``part=`` folder of a fingerprint's key in table ``band`` (the key's bits at ``positions``)."""
    fp = fingerprint & _M64
    prefix = 0
    for pos in positions:
        prefix = (prefix << 1) | ((fp >> pos) & 1)
    return (band << prefix_bits) | prefix


def doc_bucket(fingerprint: int, doc_bits: int) -> int:
    return (fingerprint & _M64) >> (BITS - doc_bits) if doc_bits else 0


def _key_bits(scheme: BandScheme, k: int) -> float:
    if not scheme.exact:
        return float(scheme.sampled_bits)
    if scheme.one_block_tables:
        return BITS / scheme.blocks
    return BITS * (scheme.blocks - k) / scheme.blocks


def lookup_cost(scheme: BandScheme, k: int, entries: int) -> float:
    """Rows touched per looked-up document: its keys (stored rows per entry) plus the expected random
    collisions in an index of ``entries`` uniformly spread fingerprints."""
    tables = scheme.n_tables(k)
    return tables + tables * entries * 2.0 ** -_key_bits(scheme, k)


def choose_layout(
    *, scheme: str, k: int, min_recall: float, expected_entries: int, partitions: int, doc_buckets: int
) -> tuple[IndexLayout, dict[str, Any]]:
    """The index's band design: a fixed ``scheme`` as given; "auto" takes the cheapest exact design unless
    the cheapest LSH design (recall ``min_recall`` at k) costs less than half as much per lookup, both
    for an index of ``expected_entries``. Key partitions: about ``partitions`` in all."""
    considered: list[dict[str, Any]] = []
    if scheme != "auto":
        chosen = parse_scheme(scheme)
    else:
        exact = [s for s in exact_candidates(k, max_tables=4096)]
        best_exact = min(exact, key=lambda s: lookup_cost(s, k, expected_entries), default=None)
        lsh = cheapest_lsh(k, min_recall, n=2 * expected_entries)
        for s in [*([best_exact] if best_exact else []), lsh]:
            considered.append(
                {
                    "scheme": s.spec,
                    "tables": s.n_tables(k),
                    "cost": round(lookup_cost(s, k, expected_entries)),
                }
            )
        if best_exact is not None and lookup_cost(best_exact, k, expected_entries) <= 2 * lookup_cost(
            lsh, k, expected_entries
        ):
            chosen = best_exact
        else:
            chosen = lsh
    tables = chosen.n_tables(k)
    prefix_bits = max(0, min(math.floor(math.log2(max(1, partitions / tables))), int(_key_bits(chosen, k))))
    layout = IndexLayout(chosen.spec, k, prefix_bits, int(math.log2(doc_buckets)))
    return layout, {"considered": considered, "expected_entries": expected_entries}


# --- manifest ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    id: str
    runs: tuple[str, ...]  # run dates whose documents it holds
    keys_rows: int
    docs_rows: int
    created: str
    contents_sha256: str = ""  # of its _contents.json (format 2; "" only while a format-1 index is read)


CONTENTS = "_contents.json"
KINDS = ("keys", "docs")  # a snapshot's two kinds of folders: keys/part=P, docs/bucket=B


@dataclass(frozen=True)
class FolderContents:
    rows: int
    files: dict[str, int]  # file name → bytes


@dataclass(frozen=True)
class SnapshotContents:
    """What one snapshot holds: per partition folder (``keys/part=3``, ``docs/bucket=5``) its rows and
    its files with their sizes. Written beside the data, checksummed in the manifest."""

    snapshot: str
    folders: dict[str, FolderContents]

    def rows(self, kind: str) -> int:
        return sum(f.rows for name, f in self.folders.items() if name.startswith(kind + "/"))

    def select(self, kind: str, wanted: set[int] | None) -> list[tuple[str, FolderContents]]:
        """The folders of ``kind`` whose partition number is in ``wanted`` (None: all), by name."""
        out = []
        for name in sorted(self.folders):
            head, _, number = name.partition("=")
            if head.startswith(kind + "/") and (wanted is None or int(number) in wanted):
                out.append((name, self.folders[name]))
        return out

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
    """A manifest of format 1: readable by ``index upgrade`` only."""


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
    format: int = PLAIN_FORMAT  # as read; written as ``layout.format`` (1 only until ``index upgrade``)
    extra: dict[str, Any] = field(default_factory=dict)

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
        d["format"] = 1 if self.format == 1 else self.layout.format
        return json.dumps(d, indent=2, ensure_ascii=False, sort_keys=False) + "\n"

    @staticmethod
    def from_json(text: str, *, old_format: bool = False) -> Manifest:
        """A manifest; one of format 1 only with ``old_format`` (``index upgrade``)."""
        d = json.loads(text)
        if d.get("format") == 1 and not old_format:
            raise OldFormat(
                "it was written by simhash_spark 0.1 (format 1), whose snapshots record no contents to "
                "verify; run `simhash-spark index upgrade PATH` once (it checks every snapshot's rows "
                "against the manifest and records its files)"
            )
        if d.get("format") not in (*READ_FORMATS, 1):
            raise ValueError(
                f"index format {d.get('format')!r}; this version reads formats "
                + " and ".join(map(str, READ_FORMATS))
            )
        return Manifest(
            version=int(d["version"]),
            model=d["model"],
            layout=IndexLayout(**d["layout"]),
            id_type=d["id_type"],
            snapshots=tuple(Snapshot(**{**s, "runs": tuple(s["runs"])}) for s in d["snapshots"]),
            runs=tuple(RunRecord(**r) for r in d["runs"]),
            format=d["format"],
            extra=d.get("extra", {}),
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
