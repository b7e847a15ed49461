"""File systems behind the index and the outputs, with the few operations the commit protocols need.

Two implementations of :class:`Files`: :class:`FileSystem` (local paths through Python, any other URI
through the Hadoop file system of a classic Spark session: HDFS, S3A, ABFS, GCS) and :class:`ArrowFiles`
(pyarrow's file systems, for ``check`` and ``index stats``, which start no Spark).

The operations that make a protocol safe:

- ``create_exclusive``: write a small file under a name only if that name does not exist yet, atomically
  (one of two concurrent writers wins). Local: a temporary file hard-linked to the name (``link`` fails
  when the name exists). Hadoop: a temporary file renamed with ``FileContext.rename(..., NONE)``, which
  HDFS performs atomically and refuses when the destination exists. Object stores whose rename is a copy
  (S3A, GCS) give no such guarantee: see docs/reliability.md.
- ``exchange``: swap two folders in one step where the platform can (Linux ``renameat2`` with
  ``RENAME_EXCHANGE``); elsewhere it returns False and the caller falls back to two renames.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import urlparse

from simhash_spark.errors import OutputError, essence


class Files(Protocol):
    def exists(self, path: str) -> bool: ...
    def is_dir(self, path: str) -> bool: ...
    def modified(self, path: str) -> float: ...
    def read_text(self, path: str) -> str: ...
    def write_text(self, path: str, text: str) -> None: ...
    def create_exclusive(
        self, path: str, text: str, before_link: Callable[[], None] | None = None
    ) -> bool: ...
    def rename(self, src: str, dst: str) -> None: ...
    def delete(self, path: str) -> None: ...
    def mkdirs(self, path: str) -> None: ...
    def list_names(self, path: str) -> list[str]: ...
    def file_sizes(self, path: str, *, recursive: bool = False) -> dict[str, int]: ...


def join(base: str, *names: str) -> str:
    return "/".join([base.rstrip("/"), *[n.strip("/") for n in names]])


_GLOB_CHARACTERS = re.compile(r"([{}\[\]*?\\])")


def literal(path: str) -> str:
    """``path`` as Spark's readers take it literally: they read a path with ``{}[]*?\\`` in it as a
    pattern, so those characters are escaped (the job's own folders are never patterns)."""
    return _GLOB_CHARACTERS.sub(r"\\\1", path)


def _tmp_name(path: str) -> str:
    parent, _, name = path.rstrip("/").rpartition("/")
    return f"{parent}/.{name}.tmp-{uuid.uuid4().hex[:12]}"


def _local_create_exclusive(path: str, text: str, before_link: Callable[[], None] | None = None) -> bool:
    tmp = _tmp_name(path)
    with open(tmp, "wb") as fh:
        fh.write(text.encode("utf-8"))
        fh.flush()
        os.fsync(fh.fileno())
    try:
        if before_link is not None:
            before_link()
        os.link(tmp, path)  # fails with FileExistsError when the name exists: never replaces it
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def local_exchange(a: str, b: str) -> bool:
    """Swap two existing local paths atomically; False where the platform cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    rc = fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: the file system cannot exchange
        return False
    raise OSError(err, os.strerror(err), a)


class FileSystem:
    """Local paths through Python; every other URI through the Hadoop file system of a classic Spark
    session's JVM (``hadoop=True`` forces that path for a ``file:`` URI, as the tests do)."""

    def __init__(self, spark: Any, path: str, *, hadoop: bool = False) -> None:
        try:
            scheme = urlparse(path).scheme
        except ValueError as e:
            raise OutputError(f"{path!r} is not a valid path: {e}") from None
        self.local = scheme in ("", "file") and not hadoop
        self._fs: Any = None
        self._jvm: Any = None
        if not self.local:
            jvm = getattr(spark, "_jvm", None)
            if jvm is None:
                raise OutputError(f"{path}: only local paths are supported without a JVM session")
            self._jvm = jvm
            self._gateway = spark.sparkContext._gateway
            self._conf = spark._jsc.hadoopConfiguration()
            try:
                self._fs = jvm.org.apache.hadoop.fs.Path(path).getFileSystem(self._conf)
            except Exception as e:
                raise OutputError(f"{path!r} is not a usable path: {essence(e)}") from None

    @staticmethod
    def _local(path: str) -> str:
        return urlparse(path).path if path.startswith("file:") else path

    def _p(self, path: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(path)

    def qualified(self, path: str) -> str:
        """An absolute form of ``path`` for comparing locations (symlinks resolved locally)."""
        if self.local:
            return "file://" + os.path.realpath(os.path.abspath(self._local(path)))
        return str(self._fs.makeQualified(self._p(path)).toString())

    def exists(self, path: str) -> bool:
        return os.path.exists(self._local(path)) if self.local else bool(self._fs.exists(self._p(path)))

    def link_target(self, path: str) -> str | None:
        """Where ``path`` points when it is a symbolic link (local paths; None otherwise)."""
        if self.local and os.path.islink(self._local(path)):
            return os.readlink(self._local(path))
        return None

    def is_dir(self, path: str) -> bool:
        if self.local:
            return os.path.isdir(self._local(path))
        return bool(self._fs.exists(self._p(path)) and self._fs.getFileStatus(self._p(path)).isDirectory())

    def modified(self, path: str) -> float:
        """Modification time in seconds since the epoch."""
        if self.local:
            return os.path.getmtime(self._local(path))
        return float(self._fs.getFileStatus(self._p(path)).getModificationTime()) / 1000.0

    def delete(self, path: str) -> None:
        if self.local:
            p = self._local(path)
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p)
            elif os.path.lexists(p):
                os.remove(p)
        else:
            self._fs.delete(self._p(path), True)

    def rename(self, src: str, dst: str) -> None:
        """Move ``src`` to ``dst``, which must not exist."""
        if self.local:
            if os.path.lexists(self._local(dst)):
                raise OutputError(f"cannot rename {src} to {dst}: the destination exists")
            os.rename(self._local(src), self._local(dst))
        elif not self._fs.rename(self._p(src), self._p(dst)):
            raise OutputError(f"could not rename {src} to {dst}")

    def exchange(self, a: str, b: str) -> bool:
        return self.local and local_exchange(self._local(a), self._local(b))

    def mkdirs(self, path: str) -> None:
        if self.local:
            os.makedirs(self._local(path), exist_ok=True)
        elif not self._fs.mkdirs(self._p(path)):
            raise OutputError(f"could not create {path}")

    def read_text(self, path: str) -> str:
        if self.local:
            with open(self._local(path), encoding="utf-8") as fh:
                return fh.read()
        stream = self._fs.open(self._p(path))
        try:
            return str(self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
        finally:
            stream.close()

    def list_names(self, path: str) -> list[str]:
        """Names in a folder (empty when it does not exist or is a file)."""
        if self.local:
            p = self._local(path)
            return sorted(os.listdir(p)) if os.path.isdir(p) else []
        if not self.is_dir(path):
            return []
        return sorted(str(st.getPath().getName()) for st in self._fs.listStatus(self._p(path)))

    def file_sizes(self, path: str, *, recursive: bool = False) -> dict[str, int]:
        """The files in a folder (with ``recursive``, below it, as relative paths) and their bytes; empty
        when the folder does not exist."""
        if self.local:
            root = self._local(path)
            if not os.path.isdir(root):
                return {}
            if not recursive:
                return {e.name: e.stat().st_size for e in os.scandir(root) if e.is_file()}
            return {
                os.path.relpath(os.path.join(d, f), root): os.path.getsize(os.path.join(d, f))
                for d, _, fs in os.walk(root)
                for f in fs
            }
        if not self.is_dir(path):
            return {}
        base = str(self._fs.makeQualified(self._p(path)).toString()).rstrip("/")
        it = self._fs.listFiles(self._p(path), recursive)
        out = {}
        while it.hasNext():
            st = it.next()
            out[str(st.getPath().toString())[len(base) :].lstrip("/")] = int(st.getLen())
        return out

    def list_files(self, path: str) -> list[str]:
        """Every file below ``path``, recursively, as paths relative to it."""
        if self.local:
            root = self._local(path)
            if os.path.isfile(root):
                return [""]
            return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)
        base = str(self._fs.makeQualified(self._p(path)).toString()).rstrip("/")
        it = self._fs.listFiles(self._p(path), True)
        out = []
        while it.hasNext():
            full = str(it.next().getPath().toString())
            out.append(full[len(base) :].lstrip("/"))
        return sorted(out)

    def write_text(self, path: str, text: str) -> None:
        data = text.encode("utf-8")
        if self.local:
            with open(self._local(path), "wb") as fh:
                fh.write(data)
        else:
            out = self._fs.create(self._p(path), True)
            try:
                out.write(bytearray(data))
            finally:
                out.close()

    def create_exclusive(self, path: str, text: str, before_link: Callable[[], None] | None = None) -> bool:
        if self.local:
            return _local_create_exclusive(self._local(path), text, before_link)
        tmp = _tmp_name(path)
        self.write_text(tmp, text)
        if before_link is not None:
            before_link()
        jvm = self._jvm
        ctx = jvm.org.apache.hadoop.fs.FileContext.getFileContext(self._p(path).toUri(), self._conf)
        options = self._gateway.new_array(jvm.org.apache.hadoop.fs.Options.Rename, 1)
        options[0] = jvm.org.apache.hadoop.fs.Options.Rename.NONE
        try:
            ctx.rename(self._p(tmp), self._p(path), options)
            return True
        except Exception as e:
            if "FileAlreadyExistsException" in str(e):
                return False
            raise
        finally:
            if self._fs.exists(self._p(tmp)):
                self._fs.delete(self._p(tmp), False)


class ArrowFiles:
    """``Files`` over pyarrow's file systems (local paths, ``hdfs://``, ``s3://``, ...): the readers."""

    def __init__(self, root: str) -> None:
        from pyarrow import fs as pafs

        self._pafs = pafs
        scheme = urlparse(root).scheme
        if scheme not in ("", "file"):
            self.fs, self.root = pafs.FileSystem.from_uri(root)
        else:
            # "file:/x" and "file:///x" (Hadoop's spellings) are the local path /x, as FileSystem reads them
            self.fs = pafs.LocalFileSystem()
            self.root = os.path.abspath(FileSystem._local(root))

    def exists(self, path: str) -> bool:
        return bool(self.fs.get_file_info(path).type != self._pafs.FileType.NotFound)

    def is_dir(self, path: str) -> bool:
        return bool(self.fs.get_file_info(path).type == self._pafs.FileType.Directory)

    def modified(self, path: str) -> float:
        mtime = self.fs.get_file_info(path).mtime
        return mtime.timestamp() if mtime is not None else time.time()

    def read_text(self, path: str) -> str:
        with self.fs.open_input_stream(path) as fh:
            return bytes(fh.read()).decode("utf-8")

    def write_text(self, path: str, text: str) -> None:
        with self.fs.open_output_stream(path) as fh:
            fh.write(text.encode("utf-8"))

    def create_exclusive(self, path: str, text: str, before_link: Callable[[], None] | None = None) -> bool:
        if isinstance(self.fs, self._pafs.LocalFileSystem):
            return _local_create_exclusive(path, text, before_link)
        raise OutputError(f"{path}: committing through pyarrow is supported on local paths only")

    def rename(self, src: str, dst: str) -> None:
        if self.exists(dst):
            raise OutputError(f"cannot rename {src} to {dst}: the destination exists")
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
        if not self.is_dir(path):
            return []
        sel = self._pafs.FileSelector(path, allow_not_found=True)
        return sorted(os.path.basename(i.path.rstrip("/")) for i in self.fs.get_file_info(sel))

    def file_sizes(self, path: str, *, recursive: bool = False) -> dict[str, int]:
        sel = self._pafs.FileSelector(path, allow_not_found=True, recursive=recursive)
        base = path.rstrip("/") + "/"
        return {
            i.path[len(base) :]: int(i.size or 0)
            for i in self.fs.get_file_info(sel)
            if i.type == self._pafs.FileType.File
        }

    def total_bytes(self, path: str) -> int:
        sel = self._pafs.FileSelector(path, allow_not_found=True, recursive=True)
        return sum(i.size or 0 for i in self.fs.get_file_info(sel) if i.type == self._pafs.FileType.File)
