"""The C allocator's thresholds, raised once per process (core.allocator)."""

from __future__ import annotations

import platform

import pytest

from simhash_spark.core import allocator


@pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's malloc only"
)
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
