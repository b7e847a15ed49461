"""The C allocator of a process that works on large numpy arrays (pure Python).

glibc's malloc serves a block above its mmap threshold with a fresh ``mmap`` and returns the top of its
heap to the system whenever more than its trim threshold lies free there. Both thresholds adapt to the
blocks a process frees, but only up to a few times the largest one, so the several arrays of a few MB that
one fingerprint batch allocates together and frees together go back to the system after every batch, and
the next batch page-faults them in anew: on a virtual machine the faults cost more than the arithmetic on
the arrays. ``keep_freed_memory`` raises both thresholds once per process, so those blocks are reused from
the heap; the process then keeps up to ``TRIM_THRESHOLD`` bytes of freed memory. The fingerprint pass
calls it (Spark's Python workers are reused, so later stages in the same worker run with it too).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc's largest allowed value on 64-bit systems
TRIM_THRESHOLD = 128 << 20

_done: bool | None = None


def keep_freed_memory() -> bool:
    """Raise this process's glibc malloc thresholds (once; later calls do nothing). False where the C
    library is not glibc or refuses the values: the process then keeps the defaults, and only runs slower."""
    global _done
    if _done is None:
        _done = _set_thresholds()
    return _done


def _set_thresholds() -> bool:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
