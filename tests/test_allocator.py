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


def test_the_thresholds_are_set_once_per_process(monkeypatch):
    # the real setting is exercised in a subprocess above; this process's allocator is left as it is
    calls = []
    monkeypatch.setattr(allocator, "_done", None)
    monkeypatch.setattr(allocator, "_set_thresholds", lambda: calls.append(1) or True)
    assert allocator.keep_freed_memory() is True
    assert allocator.keep_freed_memory() is True
    assert calls == [1]


def test_each_fingerprint_task_and_the_drivers_fingerprinting_keep_freed_memory(monkeypatch):
    import pandas as pd

    from simhash_spark.config import load_config
    from simhash_spark.transforms import fingerprint

    calls = []
    monkeypatch.setattr(fingerprint, "keep_freed_memory", lambda: calls.append(1) or True)
    model = load_config().model
    fingerprint._task_fingerprinter(model, None)  # what both UDF flavours start a task with
    assert calls == [1]
    fingerprint._fingerprint_texts(pd.Series(["一段足够长的中文文本，用来计算指纹。"]), model)
    assert calls == [1, 1]


def test_other_c_libraries_keep_their_defaults(monkeypatch):
    monkeypatch.setattr(allocator, "_done", None)
    monkeypatch.setattr(allocator.platform, "libc_ver", lambda: ("musl", "1.2"))
    assert allocator.keep_freed_memory() is False
