"""Publishing a run's output folder atomically, and finishing a publish that a killed run left halfway.

Beside ``PARENT/NAME`` a run keeps, all hidden (Spark and Hive skip names starting with a dot):

- ``.NAME.writer-RUN.json``: the run's lease (one writer per output; see ``simhash_spark.lease``);
- ``.NAME.staging-RUN/``: everything the run writes; complete once ``_SUCCESS`` (holding RUN) is in it;
- ``.NAME.publish-RUN.json``: the journal, written once staging is complete: from then on the run's
  output *will* be published, by this run or by the next run that touches OUTPUT;
- ``.NAME.old-RUN/``: the previous output while two renames replace it (file systems without an atomic
  swap of two folders).

Where the file system swaps two folders in one step (Linux), OUTPUT is never missing; elsewhere it is
missing between two renames, and a run killed there leaves the journal that the next run completes.
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any

from simhash_spark import columns as C
from simhash_spark.errors import OutputError, essence
from simhash_spark.faults import exchange_disabled, maybe_pause
from simhash_spark.lease import Lease, describe_blockers, read_leases
from simhash_spark.storage import FileSystem, join

log = logging.getLogger(__name__)


def _split(output: str) -> tuple[str, str]:
    parent, _, name = output.rstrip("/").rpartition("/")
    return parent, name


def _sibling(output: str, kind: str, run: str) -> str:
    parent, name = _split(output)
    return f"{parent}/.{name}.{kind}-{run}" if parent else f".{name}.{kind}-{run}"


def _success_of(fs: FileSystem, folder: str) -> str | None:
    path = join(folder, "_SUCCESS")
    if not fs.exists(path):
        return None
    try:
        return fs.read_text(path).strip()
    except OSError:
        return None


def _swap_in(fs: FileSystem, staging: str, output: str, old: str, *, pause: bool) -> None:
    """Put complete ``staging`` in place of ``output``; the previous output ends up deleted."""
    if not fs.exists(output):
        parent = _split(output)[0]
        if parent:
            fs.mkdirs(parent)
        fs.rename(staging, output)
        return
    if not exchange_disabled() and fs.exchange(staging, output):
        if pause:
            maybe_pause("publish-swapped")
        fs.delete(staging)  # now the previous output
        return
    fs.rename(output, old)
    if pause:
        maybe_pause("publish-moved-aside")
    fs.rename(staging, output)
    if pause:
        maybe_pause("publish-swapped")
    fs.delete(old)


def _finish_journal(fs: FileSystem, output: str, run: str) -> str:
    """Complete the publish of run ``run`` from whatever state a kill left; returns what it did."""
    staging, old = _sibling(output, "staging", run), _sibling(output, "old", run)
    if _success_of(fs, output) == run:
        done = "was published; removed what it left beside"
        for leftover in (staging, old):
            if fs.exists(leftover):
                fs.delete(leftover)
    elif _success_of(fs, staging) == run:
        if not fs.exists(output) and fs.exists(old):
            fs.rename(staging, output)
            fs.delete(old)
        else:
            _swap_in(fs, staging, output, old, pause=False)
        done = "published its complete output"
    elif not fs.exists(output) and fs.exists(old):
        fs.rename(old, output)
        done = "restored the previous output"
    else:
        done = "nothing left to do"
    fs.delete(_sibling(output, "publish", run) + ".json")
    return done


_RUN = r"(\d{8}T\d{6}-[0-9a-f]{10}|[0-9a-f]{12})"


def recover(fs: FileSystem, output: str) -> list[str]:
    """Finish publishes of ``output`` that killed runs left halfway (their writers' leases stale) and remove
    their incomplete staging folders. Returns one line per action."""
    parent, name = _split(output)
    folder = parent or "."
    lease_prefix = f".{name}.writer-"
    leases = read_leases(fs, folder, lease_prefix, time.time())
    now_live = {n[len(lease_prefix) : -len(".json")] for n, _info, live in leases if live}
    journal = re.compile(rf"^\.{re.escape(name)}\.publish-{_RUN}\.json$")
    staging = re.compile(rf"^\.{re.escape(name)}\.staging-{_RUN}$")
    actions = []
    names = fs.list_names(folder)
    journaled = set()
    for n in names:
        m = journal.match(n)
        if m and m.group(1) not in now_live:
            journaled.add(m.group(1))
            actions.append(f"interrupted publish {m.group(1)}: {_finish_journal(fs, output, m.group(1))}")
    for n in names:
        m = staging.match(n)
        if m and m.group(1) not in now_live and m.group(1) not in journaled and fs.exists(join(folder, n)):
            fs.delete(join(folder, n))
            actions.append(f"removed the staging folder {n} of a run that stopped before completing")
    for n, _info, live in leases:
        if not live:
            fs.delete(join(folder, n))
    for a in actions:
        log.warning("output %s: %s", output, a)
    return actions


_SHOW = 5


def refuse_unless_replaceable(fs: FileSystem, output: str, overwrite: bool) -> None:
    """Exit 2 unless OUTPUT may become this run's output: absent; or, with ``overwrite``, an empty folder or
    an output of this job (``_SUCCESS`` holding a run id, and nothing but the names a run writes). A file,
    a symbolic link or a folder holding anything else is never replaced: a wrong path must not delete a
    user's data."""
    target = fs.link_target(output)
    if target is not None:
        raise OutputError(
            f"output {output!r} is a symbolic link (to {target}); give the folder's own path: the run "
            "replaces OUTPUT itself and would replace the link. Nothing was changed"
        )
    if not fs.exists(output):
        return
    if not overwrite:
        raise OutputError(f"output {output!r} already exists; pass --overwrite to replace it")
    if not fs.is_dir(output):
        raise OutputError(
            f"output {output!r} is a file, not an output folder of this job; nothing was changed"
        )
    names = fs.list_names(output)
    ours = {*C.OUTPUTS, *C.OUTPUT_FILES}
    # Hadoop's local file system writes a checksum file beside each file: ".NAME.crc"
    foreign = [n for n in names if n not in ours and not (n.endswith(".crc") and n[1:-4] in ours)]
    why = None
    if foreign:
        why = f"holds {', '.join(foreign[:_SHOW])}{', ...' if len(foreign) > _SHOW else ''}, which this job does not write"
    elif names and not re.fullmatch(_RUN, _success_of(fs, output) or ""):
        why = "has no _SUCCESS marker of this job"
    if why:
        raise OutputError(
            f"output {output!r} {why}; --overwrite replaces only an output of this job. Nothing was "
            "changed: check the path, or move the folder away"
        )


@dataclass
class Publisher:
    """Writes a run into a hidden staging folder beside OUTPUT and swaps it in when complete, so a reader
    sees the previous complete output or the new complete output, never a partial one."""

    fs: FileSystem
    output: str
    overwrite: bool
    timeout_s: float
    purpose: str = "dedup"
    lease: Lease = field(init=False)
    staging: str = field(init=False)
    _journal: str = field(init=False, default="")

    def __post_init__(self) -> None:
        parent, name = _split(self.output)
        self.lease = Lease(
            self.fs, parent or ".", f".{name}.writer-", purpose=self.purpose, timeout_s=self.timeout_s
        )
        self.staging = _sibling(self.output, "staging", self.lease.writer)

    def prepare(self) -> None:
        """Before any work: finish interrupted publishes, refuse an existing OUTPUT without overwrite or a
        second live writer, and create the staging folder (so an unwritable location fails at once)."""
        if self.fs.link_target(self.output) is None:  # a link is refused below, recovered never
            try:
                recover(self.fs, self.output)
            except OSError as e:
                raise OutputError(f"output {self.output!r} is not usable: {essence(e)}") from None
        refuse_unless_replaceable(self.fs, self.output, self.overwrite)
        try:
            self.lease.acquire()
        except Exception as e:
            raise OutputError(f"output {self.output!r} is not writable: {essence(e)}") from None
        blockers = self.lease.earlier_live()
        if blockers:
            self.lease.release()
            raise OutputError(
                f"output {self.output!r} is being written by another run: {describe_blockers(blockers)}. "
                "One run per output at a time; this run did nothing"
            )
        try:
            self.fs.mkdirs(self.staging)
        except Exception as e:
            self.abort()
            raise OutputError(f"output {self.output!r} is not writable: {essence(e)}") from None

    def path(self, name: str) -> str:
        return join(self.staging, name)

    def write_json(self, name: str, obj: Any) -> None:
        self.fs.write_text(self.path(name), json.dumps(obj, indent=2, ensure_ascii=False) + "\n")

    def write_text(self, name: str, text: str) -> None:
        self.fs.write_text(self.path(name), text)

    def publish(self) -> None:
        run = self.lease.writer
        if self.fs.exists(self.output) and not self.overwrite:
            raise OutputError(f"output {self.output!r} appeared during the run; not replacing it")
        self.fs.write_text(self.path("_SUCCESS"), run + "\n")
        self._journal = _sibling(self.output, "publish", run) + ".json"
        self.fs.write_text(self._journal, json.dumps({"run": run, "output": self.output}))
        maybe_pause("publish-journal")
        _swap_in(self.fs, self.staging, self.output, _sibling(self.output, "old", run), pause=True)
        self.fs.delete(self._journal)
        self.lease.release()
        log.info("published %s", self.output)

    def abort(self) -> None:
        """After a failure: drop the staging folder, unless the publish had begun (then the journal lets
        the next run finish it)."""
        try:
            if not (self._journal and self.fs.exists(self._journal)):
                self.fs.delete(self.staging)
        except Exception:
            log.warning("could not remove staging folder %s", self.staging)
        self.lease.release()
