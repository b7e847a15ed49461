"""64-bit feature hashes. Deterministic across processes and machines (never Python's ``hash()``)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import mmh3
import numpy as np
import xxhash

from simhash_spark.core.mix64 import mix64, mix64_many

HASHES = ("mix64", "xxh64", "md5_64", "murmur3_64")


def xxh64(feature: str) -> int:
    """xxHash64 of the UTF-8 bytes, seed 0."""
    return xxhash.xxh64_intdigest(feature.encode("utf-8"))


def md5_64(feature: str) -> int:
    """First 16 hex digits of the MD5 of the UTF-8 bytes, as the original article computes it."""
    return int(hashlib.md5(feature.encode("utf-8")).hexdigest()[:16], 16)


def murmur3_64(feature: str) -> int:
    """Lower 64 bits (h1) of MurmurHash3 x64_128, seed 0: Guava's ``murmur3_128().hashString(..).asLong()``
    read as unsigned."""
    return mmh3.hash64(feature.encode("utf-8"), seed=0, x64arch=True, signed=False)[0]


def hash_function(name: str) -> Callable[[str], int]:
    try:
        return {"mix64": mix64, "xxh64": xxh64, "md5_64": md5_64, "murmur3_64": murmur3_64}[name]
    except KeyError:
        raise ValueError(f"unknown hash {name!r}; choose one of {', '.join(HASHES)}") from None


def hash_many(features: Sequence[str], name: str) -> np.ndarray:
    """Hashes of many features as a uint64 array."""
    if name == "mix64":
        return mix64_many(features)
    fn = hash_function(name)
    return np.fromiter((fn(f) for f in features), dtype=np.uint64, count=len(features))
