"""The index on storage: manifest versions, snapshot folders, and reading only the partitions a batch
needs. Works through any file system with the few operations of :class:`Files`: the Hadoop file system
of a Spark session (``io.FileSystem``) in jobs, pyarrow's file systems in ``check`` and ``index stats``,
which start no Spark."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Protocol

from simhash_spark.core.index_model import Manifest
from simhash_spark.errors import FingerprintIndexError

_VERSION = re.compile(r"^v(\d{8})\.json$")
_PART = re.compile(r"^(?:part|bucket)=(\d+)$")


class Files(Protocol):
    def exists(self, path: str) -> bool: ...
    def read_text(self, path: str) -> str: ...
    def write_text(self, path: str, text: str) -> None: ...
    def rename(self, src: str, dst: str) -> None: ...
    def delete(self, path: str) -> None: ...
    def mkdirs(self, path: str) -> None: ...
    def list_names(self, path: str) -> list[str]: ...


class ArrowFiles:
    """``Files`` over pyarrow's file systems (local paths, ``hdfs://``, ``s3://``, ...)."""

    def __init__(self, root: str) -> None:
        from pyarrow import fs as pafs

        self._pafs = pafs
        if "://" in root and not root.startswith("file://"):
            self.fs, self.root = pafs.FileSystem.from_uri(root)
        else:
            self.fs = pafs.LocalFileSystem()
            self.root = os.path.abspath(root.removeprefix("file://"))

    def exists(self, path: str) -> bool:
        return bool(self.fs.get_file_info(path).type != self._pafs.FileType.NotFound)

    def read_text(self, path: str) -> str:
        with self.fs.open_input_stream(path) as fh:
            return bytes(fh.read()).decode("utf-8")

    def write_text(self, path: str, text: str) -> None:
        with self.fs.open_output_stream(path) as fh:
            fh.write(text.encode("utf-8"))

    def rename(self, src: str, dst: str) -> None:
        self.fs.move(src, dst)

    def delete(self, path: str) -> None:
        info = self.fs.get_file_info(path)
        if info.type == self._pafs.FileType.Directory:
            self.fs.delete_dir(path)
        elif info.type == self._pafs.FileType.File:
            self.fs.delete_file(path)

    def mkdirs(self, path: str) -> None:
        self.fs.create_dir(path, recursive=True)

    def list_names(self, path: str) -> list[str]:
        sel = self._pafs.FileSelector(path, allow_not_found=True)
        return sorted(os.path.basename(i.path.rstrip("/")) for i in self.fs.get_file_info(sel))

    def total_bytes(self, path: str) -> int:
        sel = self._pafs.FileSelector(path, allow_not_found=True, recursive=True)
        return sum(i.size or 0 for i in self.fs.get_file_info(sel) if i.type == self._pafs.FileType.File)


def _join(*parts: str) -> str:
    return "/".join([parts[0].rstrip("/"), *[p.strip("/") for p in parts[1:]]])


class IndexStore:
    """One index folder. Versions of the manifest are files ``_manifest/vNNNNNNNN.json``: a commit writes
    the next number (never overwriting one), so readers always see a complete version and a crashed
    commit leaves the previous version current."""

    def __init__(self, files: Files, root: str) -> None:
        self.files = files
        self.root = root.rstrip("/")

    @property
    def manifest_dir(self) -> str:
        return _join(self.root, "_manifest")

    def _versions(self) -> list[int]:
        return sorted(
            int(m.group(1)) for n in self.files.list_names(self.manifest_dir) if (m := _VERSION.match(n))
        )

    def manifest(self) -> Manifest | None:
        versions = self._versions()
        if not versions:
            if self.files.exists(self.root) and self.files.list_names(self.root):
                names = set(self.files.list_names(self.root)) - {"snapshots", "_manifest"}
                if names:
                    raise FingerprintIndexError(
                        f"index {self.root}: the folder holds other files ({', '.join(sorted(names)[:5])}) "
                        "and no index manifest; refusing to use it as an index"
                    )
            return None
        path = _join(self.manifest_dir, f"v{versions[-1]:08d}.json")
        try:
            return Manifest.from_json(self.files.read_text(path))
        except (ValueError, KeyError, TypeError) as e:
            raise FingerprintIndexError(f"index manifest {path} is not readable: {e}") from None

    def commit(self, manifest: Manifest) -> None:
        versions = self._versions()
        current = versions[-1] if versions else 0
        if manifest.version != current + 1:
            raise FingerprintIndexError(
                f"index {self.root} changed during the run (version {current}, expected {manifest.version - 1}); "
                "another writer? rerun"
            )
        self.files.mkdirs(self.manifest_dir)
        tmp = _join(self.manifest_dir, f".tmp-{uuid.uuid4().hex[:12]}")
        final = _join(self.manifest_dir, f"v{manifest.version:08d}.json")
        self.files.write_text(tmp, manifest.to_json())
        if self.files.exists(final):
            self.files.delete(tmp)
            raise FingerprintIndexError(
                f"index {self.root}: version {manifest.version} was committed by another writer"
            )
        self.files.rename(tmp, final)

    def snapshot_dir(self, snapshot: str) -> str:
        return _join(self.root, "snapshots", snapshot)

    def new_snapshot_id(self, label: str) -> str:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        return f"{label}-{stamp}-{uuid.uuid4().hex[:8]}"

    def partition_dirs(self, snapshots: Iterable[str], kind: str, wanted: set[int] | None) -> list[str]:
        """Existing ``part=``/``bucket=`` folders of ``kind`` ("keys" or "docs") in the given snapshots,
        restricted to ``wanted`` (None: all)."""
        out = []
        for snap in snapshots:
            base = _join(self.snapshot_dir(snap), kind)
            for name in self.files.list_names(base):
                m = _PART.match(name)
                if m and (wanted is None or int(m.group(1)) in wanted):
                    out.append(_join(base, name))
        return out

    def remove_unlisted(self, manifest: Manifest) -> list[str]:
        """Delete snapshot folders the manifest does not list (replaced, compacted, or left by failed
        runs); returns their names."""
        live = {s.id for s in manifest.snapshots}
        gone = [n for n in self.files.list_names(_join(self.root, "snapshots")) if n not in live]
        for name in gone:
            self.files.delete(self.snapshot_dir(name))
        return gone


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
        "first_run": manifest.runs[0].run_date if manifest.runs else None,
        "last_run": manifest.runs[-1].run_date if manifest.runs else None,
        "layout": {
            "scheme": manifest.layout.scheme,
            "max_distance": manifest.layout.max_distance,
            "key_partitions_per_snapshot": manifest.layout.n_parts(),
            "doc_buckets": 1 << manifest.layout.doc_bits,
        },
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
