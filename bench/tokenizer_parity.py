"""Parity of the fast tokenizer with jieba over every shared corpus.

    .venv/bin/python -m bench.tokenizer_parity [--corpora ../shared/corpora] [--limit N] [--workers 2]

For every Parquet file and every text column, each document is compared three ways: tokens of the raw
text, tokens of the normalized text (what the job segments), and the default-config fingerprint
(keywords + xxh64 SimHash). Prints one JSON object with the identical fractions and any differing ids.
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pyarrow.parquet as pq

from bench.common import DEFAULT_CORPORA

TEXT_COLUMNS = ("text", "title", "text1", "text2")


def _compare(chunk: list[tuple[str, str]]) -> dict:
    from simhash_spark.core.fingerprint import Fingerprinter, ModelOptions
    from simhash_spark.core.normalize import NormalizeOptions, normalize
    from simhash_spark.core.tokenize import TokenizerOptions, get_tokenizer

    jb = get_tokenizer(TokenizerOptions(backend="jieba"))
    fast = get_tokenizer(TokenizerOptions(backend="fast"))
    fp_jb = Fingerprinter(ModelOptions(tokenizer=TokenizerOptions(backend="jieba")))
    fp_fast = Fingerprinter(ModelOptions(tokenizer=TokenizerOptions(backend="fast")))
    opts = NormalizeOptions()
    out = {"docs": 0, "raw_tokens": 0, "normalized_tokens": 0, "fingerprints": 0, "differing": []}
    texts = [t for _, t in chunk]
    a, b = fp_jb.batch(texts), fp_fast.batch(texts)
    for i, (doc_id, text) in enumerate(chunk):
        norm = normalize(text, opts).text
        same_raw = jb.cut(text) == fast.cut(text)
        same_norm = jb.cut(norm) == fast.cut(norm)
        same_fp = a.status[i] == b.status[i] and (
            not a.has_fingerprint[i] or int(a.fingerprint[i]) == int(b.fingerprint[i])
        )
        out["docs"] += 1
        out["raw_tokens"] += same_raw
        out["normalized_tokens"] += same_norm
        out["fingerprints"] += same_fp
        if not (same_raw and same_norm and same_fp) and len(out["differing"]) < 20:
            out["differing"].append(doc_id)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpora", default=str(DEFAULT_CORPORA))
    ap.add_argument("--limit", type=int, default=0, help="documents per file and column (0 = all)")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    report: dict[str, dict] = {}
    started = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        for path in sorted(Path(args.corpora).glob("*.parquet")):
            table = pq.read_table(path)
            for col in (c for c in TEXT_COLUMNS if c in table.column_names):
                ids = table.column(table.column_names[0]).to_pylist()
                rows = [(str(i), t) for i, t in zip(ids, table.column(col).to_pylist(), strict=True) if t]
                if args.limit:
                    rows = rows[: args.limit]
                if not rows:
                    continue
                chunks = [rows[i : i + 500] for i in range(0, len(rows), 500)]
                total = {
                    "docs": 0,
                    "raw_tokens": 0,
                    "normalized_tokens": 0,
                    "fingerprints": 0,
                    "differing": [],
                }
                for part in pool.map(_compare, chunks):
                    for k in ("docs", "raw_tokens", "normalized_tokens", "fingerprints"):
                        total[k] += part[k]
                    total["differing"] += part["differing"]
                n = total["docs"]
                report[f"{path.name}:{col}"] = {
                    "docs": n,
                    **{
                        k: round(total[k] / n, 6) for k in ("raw_tokens", "normalized_tokens", "fingerprints")
                    },
                    "differing_ids": total["differing"][:20],
                }
                print(path.name, col, report[f"{path.name}:{col}"], flush=True)
    all_docs = sum(r["docs"] for r in report.values())
    identical = all(not r["differing_ids"] for r in report.values())
    print(
        json.dumps(
            {
                "files": report,
                "documents": all_docs,
                "all_identical": identical,
                "seconds": round(time.perf_counter() - started, 1),
            },
            ensure_ascii=False,
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
