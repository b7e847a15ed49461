"""Detection quality on the labelled benchmark: pair precision / recall / F1 per k and per feature mode,
64 vs 128 bits, per length bucket, per edit type, the two-tier design, and the MinHash baseline.

    .venv/bin/python -m bench.quality.evaluate [--corpora ../shared/corpora] [--out quality.json]

Everything is computed over all pairs of the benchmark (no sampling). Ground truth: character 5-gram
Jaccard >= 0.8 after the job's normalization. Prints markdown tables; ``--out`` also writes JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from bench.common import DEFAULT_CORPORA
from bench.quality.benchmark import EDITS, Doc, build
from bench.quality.minhash import minhash_pairs
from bench.quality.truth import pair_jaccard, shingle_sets
from simhash_spark.core.features import FeatureOptions
from simhash_spark.core.fingerprint import Fingerprinter, FingerprintOptions, ModelOptions
from simhash_spark.core.simhash import popcount

THRESHOLD = 0.8
MAX_K = 16
LENGTH_BUCKETS = ((0, 100), (100, 300), (300, 1000), (1000, 3000), (3000, 10**9))

FEATURES: dict[str, FeatureOptions] = {
    "tfidf top20": FeatureOptions(mode="tfidf", top_k=20),
    "tfidf top50 (original)": FeatureOptions(mode="tfidf", top_k=50),
    "tfidf top100": FeatureOptions(mode="tfidf", top_k=100),
    "tfidf all": FeatureOptions(mode="tfidf", top_k=0),
    "tf": FeatureOptions(mode="tf"),
    "char 4-gram": FeatureOptions(mode="char_ngram", ngram_size=4),
    "char 5-gram": FeatureOptions(mode="char_ngram", ngram_size=5),
    "char 5-gram counts": FeatureOptions(mode="char_ngram", ngram_size=5, shingle_weights="count"),
    "word 2-gram": FeatureOptions(mode="word_ngram", word_ngram_size=2),
    "word 3-gram": FeatureOptions(mode="word_ngram", word_ngram_size=3),
    "sentences": FeatureOptions(mode="sentences"),
}


def fingerprints(
    texts: list[str], feats: FeatureOptions, hash_name: str = "xxh64"
) -> tuple[np.ndarray, float]:
    fp = Fingerprinter(
        ModelOptions(features=feats, fingerprint=FingerprintOptions(hash=hash_name, memo_size=0))
    )
    t0 = time.perf_counter()
    out = np.concatenate([fp.batch(texts[i : i + 1000]).fingerprint for i in range(0, len(texts), 1000)])
    return out.view(np.uint64), time.perf_counter() - t0


def all_distances(fps: list[np.ndarray]) -> np.ndarray:
    """Hamming distance of every pair i < j (row-major upper triangle), summed over the given 64-bit parts."""
    n = len(fps[0])
    out = np.empty(n * (n - 1) // 2, dtype=np.uint8)
    pos = 0
    for i in range(n - 1):
        d = sum(popcount(f[i] ^ f[i + 1 :]) for f in fps)
        out[pos : pos + n - 1 - i] = d
        pos += n - 1 - i
    return out


def flat_index(i: np.ndarray, j: np.ndarray, n: int) -> np.ndarray:
    i = i.astype(np.int64)
    return i * n - i * (i + 1) // 2 + (j.astype(np.int64) - i - 1)


def prf(tp: int, predicted: int, actual: int) -> dict[str, float]:
    p = tp / predicted if predicted else 1.0
    r = tp / actual if actual else 1.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return {"precision": round(p, 4), "recall": round(r, 4), "f1": round(f, 4), "predicted": predicted}


def curve(
    dist: np.ndarray, truth: np.ndarray, mask: np.ndarray | None = None, max_k: int = MAX_K
) -> list[dict]:
    if mask is not None:
        dist, truth = dist[mask], truth[mask]
    cap = np.minimum(dist, max_k + 1)
    all_k = np.cumsum(np.bincount(cap, minlength=max_k + 2))
    tp_k = np.cumsum(np.bincount(cap[truth], minlength=max_k + 2))
    actual = int(truth.sum())
    return [{"k": k, **prf(int(tp_k[k]), int(all_k[k]), actual)} for k in range(max_k + 1)]


def best(rows: list[dict]) -> dict:
    return max(rows, key=lambda r: r["f1"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpora", default=str(DEFAULT_CORPORA))
    ap.add_argument("--out", default="")
    ap.add_argument("--news", type=int, default=1500)
    args = ap.parse_args()
    report: dict = {}

    t0 = time.perf_counter()
    docs: list[Doc] = build(Path(args.corpora), news=args.news)
    texts = [d.text for d in docs]
    n = len(docs)
    sets = shingle_sets(texts)
    jac = pair_jaccard(sets)
    sim = np.zeros(n * (n - 1) // 2, dtype=np.float32)
    sim[flat_index(jac.row, jac.col, n)] = jac.data
    truth = sim >= THRESHOLD
    lengths = np.asarray([d.length for d in docs])
    ii, jj = np.triu_indices(n, k=1)
    min_len = np.minimum(lengths[ii], lengths[jj])
    report["benchmark"] = {
        "documents": n,
        "bases": sum(d.origin == "base" for d in docs),
        "variants": sum(d.origin == "variant" for d in docs),
        "templates": sum(d.origin == "template" for d in docs),
        "pairs": len(sim),
        "true_pairs": int(truth.sum()),
        "pairs_0.5_0.8": int(((sim >= 0.5) & (sim < THRESHOLD)).sum()),
        "seconds_to_build_and_label": round(time.perf_counter() - t0, 1),
    }
    print("## Benchmark\n", json.dumps(report["benchmark"]))

    # pair categories: the edit of a base-variant pair, "siblings" for two variants of one base
    ids = {d.id: i for i, d in enumerate(docs)}
    edit_of = np.full(len(sim), "", dtype=object)
    for d in docs:
        if d.origin == "variant":
            b, v = ids[d.base_id], ids[d.id]
            edit_of[flat_index(np.array([min(b, v)]), np.array([max(b, v)]), n)[0]] = d.edit
    long_mask = min_len >= 300
    natural = np.asarray([d.origin == "base" and d.id.startswith("xwlb") for d in docs])
    natural_mask = natural[ii] & natural[jj] & long_mask

    results: dict = {}
    dists: dict[str, np.ndarray] = {}
    for name, feats in FEATURES.items():
        fps, secs = fingerprints(texts, feats)
        dist = all_distances([fps])
        dists[name] = dist
        rows = curve(dist, truth)
        results[name] = {
            "docs_per_s": round(n / secs, 1),
            "curve": rows,
            "best": best(rows),
            "best_long": best(curve(dist, truth, long_mask)),
        }
        b = results[name]["best"]
        print(
            f"{name:24s} {n / secs:8.0f} docs/s  best k={b['k']:2d} P={b['precision']:.3f} "
            f"R={b['recall']:.3f} F1={b['f1']:.3f}"
        )
    report["features"] = results

    # 128 bits: a second, independent 64-bit SimHash from another feature hash
    bits128 = {}
    for name in ("tfidf top50 (original)", "char 5-gram"):
        f1, _ = fingerprints(texts, FEATURES[name], "xxh64")
        f2, _ = fingerprints(texts, FEATURES[name], "murmur3_64")
        rows = curve(all_distances([f1, f2]), truth, max_k=2 * MAX_K)
        bits128[name] = {"curve": rows, "best": best(rows)}
        print(f"128-bit {name}: best {best(rows)}")
    report["bits128"] = bits128

    chosen = "char 5-gram"
    dist = dists[chosen]
    # two tiers: accept d <= k_direct outright; verify d <= k_verify with the exact shingle Jaccard
    tiers = []
    actual = int(truth.sum())
    for k_direct in (-1, 0, 2, 3):
        for kv in range(4, MAX_K + 1):
            cand = dist <= kv
            accepted = (dist <= k_direct) | (cand & (sim >= THRESHOLD))
            row = {
                "k_direct": k_direct,
                "k_verify": kv,
                **prf(int((accepted & truth).sum()), int(accepted.sum()), actual),
                "candidates": int(cand.sum()),
                "candidates_per_true_pair": round(int(cand.sum()) / actual, 3),
            }
            for label, m in (("long", long_mask), ("natural", natural_mask)):
                a, t = accepted[m], truth[m]
                row[label] = prf(int((a & t).sum()), int(a.sum()), int(t.sum()))
            tiers.append(row)
    report["two_tier"] = tiers
    for r in tiers:
        if r["k_direct"] == 3:
            print(
                f"tiers kd=3 kv={r['k_verify']:2d} P={r['precision']:.4f} R={r['recall']:.4f} "
                f"cand/true={r['candidates_per_true_pair']} long R={r['long']['recall']} nat={r['natural']}"
            )

    # per length bucket and per edit type, for the chosen features at the chosen k_verify
    per_len = {}
    for lo, hi in LENGTH_BUCKETS:
        m = (min_len >= lo) & (min_len < hi)
        per_len[f"{lo}-{hi}"] = {"true_pairs": int(truth[m].sum()), "curve": curve(dist, truth, m)}
    report["per_length"] = per_len
    per_edit = {}
    for e in EDITS:
        m = edit_of == e
        per_edit[e] = {
            "pairs": int(m.sum()),
            "true_pairs": int(truth[m].sum()),
            "recall_by_k": {
                k: round(float((dist[m & truth] <= k).mean()), 4) if truth[m].any() else None
                for k in (3, 6, 8, 10, 12)
            },
        }
    report["per_edit"] = per_edit
    print(json.dumps(per_edit))

    # MinHash baseline (datasketch), same shingles
    found, secs = minhash_pairs(sets)
    fi = np.asarray(sorted(found), dtype=np.int64).reshape(-1, 2)
    flat = flat_index(fi[:, 0], fi[:, 1], n)
    pred = np.zeros(len(sim), dtype=bool)
    pred[flat] = True
    checked = pred & (sim >= THRESHOLD)
    report["minhash"] = {
        "seconds": round(secs, 2),
        "candidates": prf(int((pred & truth).sum()), int(pred.sum()), actual),
        "with_exact_check": prf(int((checked & truth).sum()), int(checked.sum()), actual),
        "long": prf(
            int((pred & truth & long_mask).sum()),
            int((pred & long_mask).sum()),
            int((truth & long_mask).sum()),
        ),
        "natural": prf(
            int((pred & truth & natural_mask).sum()),
            int((pred & natural_mask).sum()),
            int((truth & natural_mask).sum()),
        ),
    }
    print("minhash", json.dumps(report["minhash"]))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
