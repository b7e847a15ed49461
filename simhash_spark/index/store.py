"""The index on storage: manifest versions, snapshot folders, writer leases, and reading only the
partitions a batch needs. Works through any :class:`~simhash_spark.storage.Files`: the Hadoop file system
of a Spark session in jobs, pyarrow's file systems in ``check`` and ``index stats``, which start no Spark.

The commit protocol (docs/reliability.md):

- The current state of an index is the highest ``_manifest/vNNNNNNNN.json``. A commit creates the next
  number with an atomic create-if-absent, so of two writers building on the same version exactly one
  wins; the other's commit fails and it publishes nothing.
- Only an absent or empty folder becomes a new index (version 0 is created at once). A folder with
  anything else in it and no readable manifest is refused, never cleaned.
- Every snapshot records what it holds in ``_contents.json`` (per folder: rows, files and their sizes),
  whose SHA-256 the manifest keeps. Every reader checks the folders it reads against it and refuses
  (exit 2, naming the file) a missing, resized or unlisted file: a damaged index never answers from
  less history.
- Every snapshot folder carries ``_writer.json`` naming the writer that created it. Cleanup removes a
  snapshot folder the current manifest does not list only if the manifest it replaced listed it, or its
  writer holds no live lease (``_leases/``): never a folder it cannot prove is the index's own, never one
  a live writer may still be writing.
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from simhash_spark.core.index_model import (
    CONTENTS,
    KEYS,
    FolderContents,
    Manifest,
    OldFormat,
    Snapshot,
    SnapshotContents,
    sha256_text,
)
from simhash_spark.errors import FingerprintIndexError, IndexDamaged, essence
from simhash_spark.lease import Lease, describe_blockers
from simhash_spark.storage import Files, FileSystem, join

_VERSION = re.compile(r"^v(\d{8})\.json$")
WRITER_MARK = "_writer.json"
LEASES = "_leases"
MANIFEST = "_manifest"
SNAPSHOTS = "snapshots"


class IndexStore:
    """One index folder."""

    def __init__(self, files: Files, root: str) -> None:
        self.files = files
        self.root = root.rstrip("/")
        self._contents: dict[str, SnapshotContents] = {}  # verified records, by snapshot id

    @property
    def manifest_dir(self) -> str:
        return join(self.root, MANIFEST)

    @property
    def leases_dir(self) -> str:
        return join(self.root, LEASES)

    def version_path(self, version: int) -> str:
        return join(self.manifest_dir, f"v{version:08d}.json")

    def versions(self) -> list[int]:
        return sorted(
            int(m.group(1)) for n in self.files.list_names(self.manifest_dir) if (m := _VERSION.match(n))
        )

    def manifest(self) -> Manifest | None:
        """The current manifest; None for an absent or empty folder (a new index). Anything else without
        a readable manifest is an error naming what is there."""
        if self.files.exists(self.root) and not self.files.is_dir(self.root):
            raise FingerprintIndexError(f"index {self.root} is a file, not an index folder")
        versions = self.versions()
        if not versions:
            self._refuse_unless_empty()
            return None
        return self.read_version(versions[-1])

    def read_version(self, version: int, *, old_format: bool = False) -> Manifest:
        path = self.version_path(version)
        try:
            manifest = Manifest.from_json(self.files.read_text(path), old_format=old_format)
        except OldFormat as e:
            raise FingerprintIndexError(f"index {self.root}: {e}") from None
        except Exception as e:  # JSON of another shape or tool, a folder, unreadable bytes
            raise FingerprintIndexError(
                f"index manifest {path} is not a manifest of this tool: {type(e).__name__}: {essence(e)}"
            ) from None
        if manifest.version != version:
            raise FingerprintIndexError(f"index manifest {path} says it is version {manifest.version}")
        return manifest

    def _refuse_unless_empty(self) -> None:
        names = self.files.list_names(self.root)
        stray = [n for n in names if n not in (MANIFEST, LEASES)]
        stray += [
            f"{MANIFEST}/{n}" for n in self.files.list_names(self.manifest_dir) if not n.startswith(".")
        ]
        if stray:
            raise FingerprintIndexError(
                f"index {self.root}: the folder holds {', '.join(sorted(stray)[:6])} but no manifest version "
                f"({MANIFEST}/v00000000.json, ...); refusing to use it as an index, nothing was changed. "
                f"If it is an index whose {MANIFEST}/ was lost, restore that folder; for a new index use an "
                "empty or new path"
            )

    def create(self, manifest: Manifest) -> bool:
        """Write version 0 of a new index; False if another writer created the index first."""
        self.files.mkdirs(self.manifest_dir)
        return self.files.create_exclusive(self.version_path(0), manifest.to_json())

    def commit(self, manifest: Manifest, before_link: Callable[[], None] | None = None) -> None:
        """Make ``manifest`` current: create its version file if, and only if, no other writer has."""
        versions = self.versions()
        current = versions[-1] if versions else -1
        if manifest.version != current + 1 or not self.files.create_exclusive(
            self.version_path(manifest.version), manifest.to_json(), before_link
        ):
            raise FingerprintIndexError(
                f"index {self.root}: another writer committed version {manifest.version} first; this run's "
                "batch was not added and its output not published. Rerun it"
            )

    def snapshot_dir(self, snapshot: str) -> str:
        return join(self.root, SNAPSHOTS, snapshot)

    def new_snapshot(self, label: str, writer: str) -> str:
        """A new snapshot id, its folder created and marked as written by ``writer``."""
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        snapshot = f"{label}-{stamp}-{uuid.uuid4().hex[:8]}"
        folder = self.snapshot_dir(snapshot)
        self.files.mkdirs(folder)
        self.files.write_text(join(folder, WRITER_MARK), json.dumps({"writer": writer, "created": now()}))
        return snapshot

    def writer_of(self, snapshot: str) -> str | None:
        try:
            return str(
                json.loads(self.files.read_text(join(self.snapshot_dir(snapshot), WRITER_MARK)))["writer"]
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def partition_dirs(self, snapshots: Iterable[Snapshot], kind: str, wanted: set[int] | None) -> list[str]:
        """The folders of ``kind`` (``entries``, or ``keys``: ``keys/key_table=T``) the given snapshots hold,
        restricted to ``wanted`` (None: all), each checked against the snapshot's contents record: every
        file it lists there with its size, no other (visible) file. Else ``IndexDamaged`` naming it."""
        out = []
        for snap in snapshots:
            for name, folder in self.contents(snap).select(kind, wanted):
                path = join(self.snapshot_dir(snap.id), name)
                problems = folder_problems(
                    f"{SNAPSHOTS}/{snap.id}/{name}", folder, self.files.file_sizes(path)
                )
                if problems:
                    raise self.damaged(
                        "; ".join(problems[:3])
                        + (f" ({len(problems)} problems)" if len(problems) > 3 else "")
                    )
                out.append(path)
        return out

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Around driver reads (pyarrow): a data file that cannot be read although its size is the one
        recorded (changed in place) is a damaged index, named as such."""
        try:
            yield
        except (pa.ArrowException, OSError) as e:
            raise self.damaged(f"a file cannot be read: {e}") from e

    def damaged(self, what: str) -> IndexDamaged:
        return IndexDamaged(
            f"index {self.root} is damaged: {what}. The run read nothing more from it and changed nothing; "
            f"restore the files from a copy (`simhash-spark index verify {self.root}` lists every problem)"
        )

    def contents(self, snap: Snapshot) -> SnapshotContents:
        """``snap``'s contents record, checked against the manifest's checksum and row counts."""
        if snap.id not in self._contents:
            found = self.read_contents(snap)
            if isinstance(found, str):
                raise self.damaged(found)
            self._contents[snap.id] = found
        return self._contents[snap.id]

    def read_contents(self, snap: Snapshot) -> SnapshotContents | str:
        """``snap``'s contents record if it is the one the manifest promises, else what is wrong."""
        where = f"snapshot {snap.id} (run dates {', '.join(snap.runs) or 'none'}; {snap.docs_rows} entries)"
        path = join(self.snapshot_dir(snap.id), CONTENTS)
        if not snap.contents_sha256:
            return f"{where} has no contents checksum in the manifest"
        if not self.files.exists(path):
            return (
                f"{where} is missing: {SNAPSHOTS}/{snap.id}/{CONTENTS} does not exist (its folder was "
                "removed or only partly copied)"
            )
        text = self.files.read_text(path)
        if sha256_text(text) != snap.contents_sha256:
            return f"{where}: {SNAPSHOTS}/{snap.id}/{CONTENTS} was changed (its checksum differs)"
        contents = SnapshotContents.from_json(text)
        if (contents.entry_rows(), contents.rows(KEYS)) != (snap.docs_rows, snap.keys_rows):
            return f"{where}: its contents record counts other rows than the manifest"
        return contents

    def seal(self, snapshot: str, runs: tuple[str, ...], contents: SnapshotContents) -> Snapshot:
        """Write ``snapshot``'s contents record (its data is written); the manifest entry that lists it."""
        text = contents.to_json()
        self.files.write_text(join(self.snapshot_dir(snapshot), CONTENTS), text)
        self._contents[snapshot] = contents
        return Snapshot(snapshot, runs, contents.rows(KEYS), contents.entry_rows(), now(), sha256_text(text))

    def written_contents(self, snapshot: str, rows: dict[str, int]) -> SnapshotContents:
        """The contents of a snapshot folder as written: its data files with their sizes, ``rows`` per
        folder (``keys/part=3`` → rows)."""
        folders: dict[str, dict[str, int]] = {name: {} for name in rows}
        for relative, size in self.files.file_sizes(self.snapshot_dir(snapshot), recursive=True).items():
            folder, _, name = relative.rpartition("/")
            if folder in folders and not _hidden(name):
                folders[folder][name] = size
        return SnapshotContents(snapshot, {f: FolderContents(rows[f], files) for f, files in folders.items()})

    def remove_unlisted(self, manifest: Manifest, replaced: Manifest | None, lease: Lease) -> list[str]:
        """Delete snapshot folders ``manifest`` does not list that are provably the index's own and not being
        written: listed by ``replaced`` (the version this commit replaced), or marked by a writer whose
        lease is not live. Returns their names."""
        live = {s.id for s in manifest.snapshots}
        before = {s.id for s in replaced.snapshots} if replaced is not None else set()
        gone = []
        for name in self.files.list_names(join(self.root, SNAPSHOTS)):
            if name in live:
                continue
            writer = self.writer_of(name)
            if name in before or (writer is not None and not lease.is_live_writer(writer)):
                self.files.delete(self.snapshot_dir(name))
                gone.append(name)
        return gone


def _hidden(name: str) -> bool:
    """Files Spark's and pyarrow's readers skip: Hadoop's checksums (``.x.crc``), ``_SUCCESS``."""
    return name.startswith((".", "_"))


def folder_problems(where: str, folder: FolderContents, found: dict[str, int]) -> list[str]:
    """How the files ``found`` in a partition folder differ from what its record lists."""
    if folder.files and not found:
        return [f"folder {where}/ is missing ({len(folder.files)} file(s), {folder.rows} rows)"]
    problems = []
    for name, size in sorted(folder.files.items()):
        if name not in found:
            problems.append(f"{where}/{name} is missing")
        elif found[name] != size:
            problems.append(f"{where}/{name} has {found[name]} bytes where {size} were written")
    problems += [
        f"{where}/{name} is not a file of this snapshot (written by another tool?)"
        for name in sorted(found)
        if name not in folder.files and not _hidden(name)
    ]
    return problems


def open_store(spark: Any, path: str) -> IndexStore:
    return IndexStore(FileSystem(spark, path), path)


def take_lease(store: IndexStore, *, purpose: str, timeout_s: float) -> Lease:
    """This process's writer lease on the index; exit 2 if the index is unwritable or another live writer
    started first."""
    lease = Lease(store.files, store.leases_dir, "", purpose=purpose, timeout_s=timeout_s)
    try:
        lease.acquire()
    except Exception as e:
        raise FingerprintIndexError(f"index {store.root} is not writable: {essence(e)}") from None
    blockers = lease.earlier_live()
    if blockers:
        lease.release()
        raise FingerprintIndexError(
            f"index {store.root} is being written by another process: {describe_blockers(blockers)}. One "
            "writer at a time; this run did nothing. A writer that died holds its lease until it is stale"
        )
    return lease


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def describe(manifest: Manifest) -> dict[str, Any]:
    """What ``index stats`` prints (besides sizes on storage)."""
    return {
        "version": manifest.version,
        "entries": manifest.entries,
        "key_rows": manifest.key_rows,
        "snapshots": len(manifest.snapshots),
        "runs": len(manifest.runs),
        "first_run": min(r.run_date for r in manifest.runs) if manifest.runs else None,
        "last_run": max(r.run_date for r in manifest.runs) if manifest.runs else None,
        "layout": {
            "key_tables": len(manifest.layout.tables()),
            "sketch_bands": manifest.layout.sketch_bands,
        },
        "format": manifest.format,
        "id_type": manifest.id_type,
        "model": manifest.model,
        "recent_runs": [
            {
                "run_date": r.run_date,
                "input_rows": r.input_rows,
                "dedup_rate": r.dedup_rate,
                "appended": r.appended,
            }
            for r in manifest.runs[-10:]
        ],
    }
