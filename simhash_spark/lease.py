"""Writer leases: a small file that says "a live process is writing here", kept fresh by a heartbeat.

An index and an output folder each accept one writer at a time. A writer creates its own lease file
(a new name, so creating it never races), then looks at the other leases in the same folder: if a live
one started before it (ties broken by writer id), it gives way and exits 2 before doing any work. The
commit itself does not rely on this (it is an atomic create-if-absent that exactly one writer wins); the
lease is what lets a writer tell which leftover folders belong to a live writer and must not be
touched. A lease is live while its heartbeat is younger than its own ``timeout_s``; a killed writer's
lease goes stale that long after its last heartbeat (at once, when it ran on this machine and its process
is gone), and its folders may then be removed.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import asdict, dataclass

from simhash_spark.storage import Files, join

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 120.0


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` runs on this host (one of another user's counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def new_writer_id() -> str:
    return f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:10]}"


@dataclass(frozen=True)
class LeaseInfo:
    writer: str
    purpose: str  # what the writer does, for messages ("dedup run 2026-01-05", "index compact")
    host: str
    pid: int
    started: float  # seconds since the epoch
    heartbeat: float
    timeout_s: float

    def live(self, now: float) -> bool:
        if self.host == socket.gethostname() and not pid_alive(self.pid):
            return False  # a writer on this machine that is gone: no need to wait for the timeout
        return now - self.heartbeat <= self.timeout_s

    def order(self) -> tuple[float, str]:
        return (self.started, self.writer)

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started))
        return f"writer {self.writer} ({self.purpose}, host {self.host}, pid {self.pid}, since {when})"


def read_leases(
    files: Files, folder: str, prefix: str, now: float
) -> list[tuple[str, LeaseInfo | None, bool]]:
    """(file name, lease or None when unreadable, live?) for every lease file ``prefix*.json`` in
    ``folder``. An unreadable lease (being rewritten) counts as live while its file is recent."""
    out: list[tuple[str, LeaseInfo | None, bool]] = []
    for name in files.list_names(folder):
        if not (name.startswith(prefix) and name.endswith(".json")):
            continue
        path = join(folder, name)
        try:
            info = LeaseInfo(**json.loads(files.read_text(path)))
            out.append((name, info, info.live(now)))
        except (ValueError, TypeError, OSError):
            try:
                recent = now - files.modified(path) <= DEFAULT_TIMEOUT_S
            except OSError:
                continue  # gone meanwhile
            out.append((name, None, recent))
    return out


class Lease:
    """This process's lease file ``folder/prefix<writer>.json``, refreshed by a daemon thread."""

    def __init__(
        self, files: Files, folder: str, prefix: str, *, purpose: str, timeout_s: float, writer: str = ""
    ) -> None:
        self.files = files
        self.folder = folder
        self.prefix = prefix
        self.writer = writer or new_writer_id()
        self.path = join(folder, f"{prefix}{self.writer}.json")
        now = time.time()
        self.info = LeaseInfo(self.writer, purpose, socket.gethostname(), os.getpid(), now, now, timeout_s)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _write(self) -> None:
        self.info = LeaseInfo(**{**asdict(self.info), "heartbeat": time.time()})
        self.files.write_text(self.path, json.dumps(asdict(self.info)))

    def acquire(self) -> None:
        """Create the lease file and start the heartbeat."""
        self.files.mkdirs(self.folder)
        if not self.files.create_exclusive(self.path, json.dumps(asdict(self.info))):
            raise RuntimeError(f"lease {self.path} exists already")
        self._thread = threading.Thread(target=self._beat, name=f"lease-{self.writer}", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        period = max(0.2, self.info.timeout_s / 4)
        while not self._stop.wait(period):
            try:
                self._write()
            except Exception as e:  # a file system hiccup: the next beat tries again
                log.warning("could not refresh lease %s: %s", self.path, e)

    def earlier_live(self) -> list[LeaseInfo | None]:
        """Live leases of other writers that started before this one (None: a live unreadable one)."""
        found = []
        for name, info, live in read_leases(self.files, self.folder, self.prefix, time.time()):
            if not live or name == os.path.basename(self.path):
                continue
            if info is None or info.order() < self.info.order():
                found.append(info)
        return found

    def is_live_writer(self, writer: str) -> bool:
        """Whether ``writer`` (another writer of this folder) holds a live lease."""
        if writer == self.writer:
            return True
        name = f"{self.prefix}{writer}.json"
        for found, _info, live in read_leases(self.files, self.folder, self.prefix, time.time()):
            if found == name:
                return live
        return False

    def remove_stale(self) -> list[str]:
        """Delete the lease files of writers whose heartbeat stopped; returns their writer ids."""
        gone = []
        for name, info, live in read_leases(self.files, self.folder, self.prefix, time.time()):
            if not live and name != os.path.basename(self.path):
                self.files.delete(join(self.folder, name))
                gone.append(info.writer if info else name)
        return gone

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            self.files.delete(self.path)
        except Exception as e:
            log.warning("could not remove lease %s: %s", self.path, e)


def describe_blockers(blockers: list[LeaseInfo | None]) -> str:
    return "; ".join(b.describe() if b else "a writer whose lease is being rewritten" for b in blockers)
