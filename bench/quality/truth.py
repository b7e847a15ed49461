"""Exact ground truth: character 5-gram Jaccard of every pair of benchmark documents.

Documents are normalized as the job normalizes them, then shingled (``simhash_spark.core.shingles``).
A sparse binary document × shingle matrix times its transpose gives every pair's intersection size
exactly, so no pair is sampled or estimated.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from simhash_spark.core.normalize import NormalizeOptions, normalize
from simhash_spark.core.shingles import char_shingles


def shingle_sets(texts: list[str], n: int = 5) -> list[set[str]]:
    opts = NormalizeOptions()
    return [char_shingles(normalize(t, opts).text, n) for t in texts]


def _matrix(sets: list[set[str]]) -> sp.csr_matrix:
    """Binary document x shingle matrix."""
    vocab: dict[str, int] = {}
    rows, cols = [], []
    for i, s in enumerate(sets):
        for g in s:
            rows.append(i)
            cols.append(vocab.setdefault(g, len(vocab)))
    return sp.csr_matrix((np.ones(len(rows), dtype=np.int32), (rows, cols)), shape=(len(sets), len(vocab)))


def pair_jaccard(sets: list[set[str]]) -> sp.coo_matrix:
    """Upper-triangle (i < j) Jaccard of every pair sharing at least one shingle."""
    x = _matrix(sets)
    inter = sp.triu(x @ x.T, k=1).tocoo()
    del x
    sizes = np.asarray([len(s) for s in sets], dtype=np.float64)
    union = sizes[inter.row] + sizes[inter.col] - inter.data
    return sp.coo_matrix((inter.data / union, (inter.row, inter.col)), shape=inter.shape)


def pairs_at_least(sets: list[set[str]], threshold: float, block: int = 2000) -> list[tuple[int, int, float]]:
    """(i, j, Jaccard) for every pair i < j at or above ``threshold``, exact, computed block by block so
    memory stays bounded by one block of rows against the whole corpus."""
    x = _matrix(sets)
    xt = x.T.tocsc()
    sizes = np.asarray([len(s) for s in sets], dtype=np.float64)
    out: list[tuple[int, int, float]] = []
    for start in range(0, len(sets), block):
        inter = (x[start : start + block] @ xt).tocoo()
        r = inter.row + start
        keep = inter.col > r
        r, c, d = r[keep], inter.col[keep], inter.data[keep]
        jac = d / (sizes[r] + sizes[c] - d)
        hit = jac >= threshold
        out += zip(r[hit].tolist(), c[hit].tolist(), jac[hit].tolist(), strict=True)
    return out
