"""The MinHash baseline: datasketch MinHashLSH over the same character 5-gram sets."""

from __future__ import annotations

import time

THRESHOLD = 0.8
NUM_PERM = 128


def minhash_pairs(sets: list[set[str]]) -> tuple[set[tuple[int, int]], float]:
    """Index pairs (i < j) that MinHashLSH (threshold 0.8, 128 permutations) returns, and the seconds it took."""
    from datasketch import MinHash, MinHashLSH

    start = time.perf_counter()
    lsh = MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM)
    hashes = []
    for i, s in enumerate(sets):
        m = MinHash(num_perm=NUM_PERM)
        m.update_batch([g.encode("utf-8") for g in s])
        hashes.append(m)
        lsh.insert(i, m)
    found = {(min(i, j), max(i, j)) for i, m in enumerate(hashes) for j in lsh.query(m) if j != i}
    return found, time.perf_counter() - start
