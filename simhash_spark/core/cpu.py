"""Which of numpy's CPU code paths to keep on the machine a local run uses (pure Python).

numpy sorts 32- and 64-bit values with x86-simd-sort, picking its AVX-512 kernels where the CPU has
AVX-512. On AMD's Zen 4 (family 19h) those kernels are several times slower than the AVX2 ones: they
partition with the memory-destination form of the AVX-512 compress instructions, which Zen 4 runs in
microcode (AMD's optimization guide for the family says to avoid it; OpenJDK's sort leaves AVX-512 on
family 19h for the same reason). The fingerprints, the band join and the text check sort a batch's
hashes many times over, so on such a CPU numpy's AVX-512 targets are better left off (its
``NPY_DISABLE_CPU_FEATURES``, read when numpy is imported). Zen 3, also family 19h, has no AVX-512;
Zen 5 (family 1Ah) runs the compress instructions in hardware.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

_ZEN4_FAMILY = 0x19


def cpu_fields(cpuinfo: str) -> dict[str, str]:
    """The first processor's ``key: value`` lines of a ``/proc/cpuinfo`` text."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def slow_avx512_sort(cpuinfo: str) -> bool:
    """Whether the CPU ``cpuinfo`` describes is an AMD family 19h with AVX-512 (Zen 4)."""
    fields = cpu_fields(cpuinfo)
    try:
        family = int(fields.get("cpu family", ""))
    except ValueError:
        return False
    flags = fields.get("flags", "").split()
    return fields.get("vendor_id") == "AuthenticAMD" and family == _ZEN4_FAMILY and "avx512f" in flags


def avx512_targets(dispatch: Iterable[str], available: Mapping[str, bool]) -> list[str]:
    """Of numpy's dispatch targets (``__cpu_dispatch__``), the AVX-512 ones this CPU has
    (``__cpu_features__``): what ``NPY_DISABLE_CPU_FEATURES`` names to leave numpy on its AVX2 code.
    numpy 2.4 calls them ``X86_V4``, ``AVX512_ICL``, ...; earlier releases ``AVX512F``, ``AVX512_SKX``, ..."""
    return [t for t in dispatch if (t == "X86_V4" or t.startswith("AVX512")) and available.get(t, False)]
