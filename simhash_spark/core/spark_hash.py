"""Spark SQL's ``xxhash64`` in plain Python, for orders the driver must draw exactly as Spark does (the
report's samples of small runs). Tested against Spark in tests/test_assemble_local.py."""

from __future__ import annotations

import struct
from typing import Any

import xxhash

SEED = 42  # Spark's

# how Spark hashes an id column of each type: strings as their UTF-8 bytes, byte/short/int columns as a
# 4-byte int, long columns as an 8-byte long (little-endian); decimals have no twin here
KINDS = {"string": "string", "tinyint": "int", "smallint": "int", "int": "int", "bigint": "long"}


def _bytes(value: Any, kind: str) -> bytes:
    if kind == "string":
        return str(value).encode("utf-8")
    return struct.pack("<i" if kind == "int" else "<q", int(value))


def xxhash64(values: tuple[Any, ...], kind: str) -> int:
    """``xxhash64(v1, v2, ...)`` of non-null values of one Spark ``kind`` (``KINDS``' values), as the
    signed long Spark returns: each value hashed with the previous hash as its seed."""
    seed = SEED
    for v in values:
        seed = xxhash.xxh64_intdigest(_bytes(v, kind), seed=seed)
    return seed - (1 << 64) if seed >= 1 << 63 else seed
