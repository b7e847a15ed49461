"""Short texts (questions, reviews): how often each configuration calls a pair a duplicate.

    .venv/bin/python -m bench.quality.short_texts [--corpora ../shared/corpora] [--reviews 6000]

- LCQMC and PAWS-X (zh) dev pairs carry paraphrase labels, not near-duplicate labels: a near-duplicate
  detector should flag few label-0 pairs (PAWS-X negatives reuse almost every word of the other text in
  another order or role — the false-positive test) and is not expected to flag every paraphrase.
- reviews: a deterministic sample, all pairs, ground truth character 5-gram Jaccard >= 0.8 as for the
  long-text benchmark (3-gram Jaccard >= 0.8 reported too: 5-grams are coarse on 20-character texts).

Configurations: SimHash features (char n-grams), distance threshold k, then the second tier (none,
char 5-gram Jaccard >= 0.8, edit similarity >= 0.8 / 0.9).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from bench.quality.evaluate import DEFAULT_CORPORA, all_distances, fingerprints, flat_index, prf
from bench.quality.truth import pair_jaccard, shingle_sets
from simhash_spark.core.features import FeatureOptions
from simhash_spark.core.normalize import NormalizeOptions, normalize
from simhash_spark.core.shingles import edit_similarity, shingle_jaccard
from simhash_spark.core.simhash import popcount

NORM = NormalizeOptions()
TIERS = ("none", "jaccard5>=0.8", "edit>=0.8", "edit>=0.9")


def _passes(tier: str, a: str, b: str) -> bool:
    if tier == "none":
        return True
    if tier == "jaccard5>=0.8":
        return shingle_jaccard(a, b, 5) >= 0.8
    return edit_similarity(a, b) >= float(tier.split(">=")[1])


def pair_sets(corpora: Path) -> dict:
    out = {}
    for name in ("pairs_lcqmc_dev", "pairs_pawsx_dev"):
        rows = [
            r
            for r in pq.read_table(corpora / f"{name}.parquet").to_pylist()
            if r["text1"] != "NS" and r["text2"] != "NS"
        ]
        t1 = [normalize(r["text1"], NORM).text for r in rows]
        t2 = [normalize(r["text2"], NORM).text for r in rows]
        labels = np.asarray([r["label"] for r in rows])
        res = {"pairs": len(rows), "positives": int(labels.sum())}
        for feats_name, feats in (
            ("char 3-gram", FeatureOptions(mode="char_ngram", ngram_size=3)),
            ("char 5-gram", FeatureOptions(mode="char_ngram", ngram_size=5)),
        ):
            f1, _ = fingerprints(t1, feats)
            f2, _ = fingerprints(t2, feats)
            d = popcount(f1 ^ f2)
            for k in (3, 6, 12):
                for tier in TIERS:
                    flagged = np.asarray(
                        [d[i] <= k and _passes(tier, t1[i], t2[i]) for i in range(len(rows))]
                    )
                    res[f"{feats_name} k={k} {tier}"] = {
                        "flagged_label1": round(float(flagged[labels == 1].mean()), 4),
                        "flagged_label0": round(float(flagged[labels == 0].mean()), 4),
                    }
        out[name] = res
        print(name, json.dumps({k: v for k, v in res.items() if "k=12" in k or k in ("pairs", "positives")}))
    return out


PRESETS = {
    "default": (None, []),
    "short": ("short", []),
    "short + t2s": ("short", ['normalize.variants="t2s"']),
}


def paraphrase_safety(corpora: Path) -> dict:
    """Per preset, the share of LCQMC / PAWS-X pairs the job's pair rule joins, by label, and whether every
    joined pair really passes the configured similarity (recomputed here from the definition: character
    n-gram Jaccard on the n of the pair's shorter text)."""
    from simhash_spark.config import load_config
    from simhash_spark.core.fingerprint import Fingerprinter
    from simhash_spark.core.rules import PairRule
    from simhash_spark.core.shingles import letters

    out: dict = {}
    for name in ("pairs_lcqmc_dev", "pairs_pawsx_dev"):
        rows = [
            r
            for r in pq.read_table(corpora / f"{name}.parquet").to_pylist()
            if r["text1"] != "NS" and r["text2"] != "NS"
        ]
        labels = np.asarray([int(r["label"]) for r in rows])
        for preset, (path, overrides) in PRESETS.items():
            cfg = load_config(path, overrides)
            fp = Fingerprinter(cfg.model)
            a, b = fp.batch([r["text1"] for r in rows]), fp.batch([r["text2"] for r in rows])
            d = popcount(
                np.asarray(a.fingerprint, dtype=np.int64) ^ np.asarray(b.fingerprint, dtype=np.int64)
            )
            rule = PairRule(cfg.policy, cfg.verify, cfg.normalize, short=cfg.short_texts)
            joined = np.zeros(len(rows), dtype=bool)
            honest = True
            for i, r in enumerate(rows):
                if not (a.has_fingerprint[i] and b.has_fingerprint[i]):
                    continue
                sim = rule.similarity(r["text1"], r["text2"]) if rule.needs_text_check(int(d[i])) else None
                joined[i] = (
                    rule.reason(int(d[i]), int(a.n_chars[i]), int(b.n_chars[i]), similarity=sim) is not None
                )
                if joined[i] and sim is not None:
                    ta = normalize(r["text1"], cfg.normalize).text
                    tb = normalize(r["text2"], cfg.normalize).text
                    n = (
                        cfg.short_texts.ngram_size
                        if cfg.short_texts.is_short(min(letters(ta), letters(tb)))
                        else cfg.verify.ngram_size
                    )
                    honest &= shingle_jaccard(ta, tb, n) >= cfg.verify.min_similarity
            # translated PAWS-X holds label-0 pairs whose two texts are the same once normalized: no text
            # dedup can keep those apart, so the rate is also given over the pairs whose texts differ
            same = np.asarray(
                [normalize(r["text1"], NORM).text == normalize(r["text2"], NORM).text for r in rows]
            )
            differing_negatives = (labels == 0) & ~same
            out[f"{name} {preset}"] = {
                "label0_joined": round(float(joined[labels == 0].mean()), 4),
                "label0_identical_texts": int(((labels == 0) & same).sum()),
                "label0_joined_texts_differ": round(float(joined[differing_negatives].mean()), 4),
                "label1_joined": round(float(joined[labels == 1].mean()), 4),
                "every_joined_pair_passes_its_jaccard": bool(honest),
            }
            print(name, preset, json.dumps(out[f"{name} {preset}"]), flush=True)
    return out


def reviews(corpora: Path, n: int) -> dict:
    rows = pq.read_table(corpora / "reviews.parquet", columns=["id", "text"]).to_pylist()
    rng = random.Random(7)
    texts = [normalize(r["text"] or "", NORM).text for r in rng.sample(rows, n)]
    res: dict = {"documents": n}
    for gram in (5, 3):
        jac = pair_jaccard(shingle_sets(texts, gram))
        sim = np.zeros(n * (n - 1) // 2, dtype=np.float32)
        sim[flat_index(jac.row, jac.col, n)] = jac.data
        truth = sim >= 0.8
        res[f"true_pairs_jaccard{gram}"] = int(truth.sum())
        for feats_name, size in (("char 3-gram", 3), ("char 5-gram", 5)):
            fps, _ = fingerprints(texts, FeatureOptions(mode="char_ngram", ngram_size=size))
            d = all_distances([fps])
            for k in (3, 6, 12):
                cand = np.nonzero(d <= k)[0]
                ii = (np.floor((2 * n - 1 - np.sqrt((2 * n - 1) ** 2 - 8 * cand)) / 2)).astype(np.int64)
                # the flat upper-triangle index back to (i, j)
                start = ii * n - ii * (ii + 1) // 2
                jj = cand - start + ii + 1
                for tier in ("none", "jaccard5>=0.8", "edit>=0.9"):
                    ok = np.asarray(
                        [_passes(tier, texts[i], texts[j]) for i, j in zip(ii, jj, strict=True)], dtype=bool
                    )
                    pred = cand[ok]
                    res[f"truth J{gram}: {feats_name} k={k} {tier}"] = prf(
                        int(truth[pred].sum()), len(pred), int(truth.sum())
                    )
    print("reviews", json.dumps({k: v for k, v in res.items() if "k=12" in k or "true" in k}))
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpora", default=str(DEFAULT_CORPORA))
    ap.add_argument("--reviews", type=int, default=6000)
    ap.add_argument("--out", default="")
    ap.add_argument("--presets-only", action="store_true", help="only the presets' paraphrase safety")
    args = ap.parse_args()
    report = {"presets": paraphrase_safety(Path(args.corpora))}
    if not args.presets_only:
        report |= {
            "pairs": pair_sets(Path(args.corpora)),
            "reviews": reviews(Path(args.corpora), args.reviews),
        }
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
