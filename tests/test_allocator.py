"""The C allocator's thresholds, raised once per process (core.allocator)."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from simhash_spark.core import allocator

glibc_only = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's malloc only"
)

# A fingerprint batch in miniature: arrays of a few MB (below the size numpy asks huge pages for) made and
# freed together, again and again. The minor page faults after the first round are those of memory handed
# back to the system and mapped anew.
_ROUNDS = """
import resource, sys
import numpy as np
from simhash_spark.core.allocator import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
def one_round():
    arrays = [np.ones(3 << 17, dtype=np.uint64) for _ in range(8)]  # 8 x 3 MB
    return sum(int(a[-1]) for a in arrays)
one_round()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(4):
    one_round()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults_after_first_round(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", _ROUNDS, mode], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1])


@glibc_only
def test_freed_arrays_are_reused_instead_of_faulted_in_anew():
    pages_per_round = 8 * (3 << 20) // 4096
    default = _faults_after_first_round("default")
    kept = _faults_after_first_round("keep")
    assert default > pages_per_round  # the defaults give the memory back every round (why the module exists)
    assert kept < pages_per_round // 10


@glibc_only
def test_glibc_takes_the_thresholds_once_per_process(monkeypatch):
    monkeypatch.setattr(allocator, "_done", None)
    assert allocator.keep_freed_memory() is True

    def again() -> bool:
        raise AssertionError("set a second time")

    monkeypatch.setattr(allocator, "_set_thresholds", again)
    assert allocator.keep_freed_memory() is True


def test_other_c_libraries_keep_their_defaults(monkeypatch):
    monkeypatch.setattr(allocator, "_done", None)
    monkeypatch.setattr(allocator.platform, "libc_ver", lambda: ("musl", "1.2"))
    assert allocator.keep_freed_memory() is False
