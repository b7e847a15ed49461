"""A large generated corpus for throughput runs: ~1,000-character documents of real sentences, with planted
near-duplicates and exact copies.

    .venv/bin/python -m bench.generate_corpus --docs 1000000 --out /tmp/gen1m.parquet [--corpora ../shared/corpora]

Each base document strings together real sentences (drawn with replacement from the shared news and modern
prose corpora, ~1,000 characters, in paragraphs) — real vocabulary and punctuation, and no two bases alike.
6 % of the rows are near-duplicates of an earlier base: 1-8 % of its characters replaced, inserted or
deleted in short spans, or a header/footer added, or a paragraph dropped; 2 % are exact copies. The planted
pairs are written beside the corpus (``<out>.planted.parquet``: id, source id, kind) so a run's recall can
be measured on them. Deterministic for a seed; rows are written in row groups of 50,000.
"""

from __future__ import annotations

import argparse
import random
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bench.quality.evaluate import DEFAULT_CORPORA

_SENTENCE = re.compile(r"[^。！？\n]+[。！？]")
_HEADER = "来源：本报综合 | 编辑：王晓明\n"
_FOOTER = "\n（完）责任编辑：李华"
NEAR_SHARE, COPY_SHARE = 0.06, 0.02


def sentences(corpora: Path, limit: int = 400_000) -> list[str]:
    out: list[str] = []
    for name in ("news_xwlb.parquet", "modern_zh.parquet"):
        for text in pq.read_table(corpora / name, columns=["text"]).column(0).to_pylist():
            out += [s.strip() for s in _SENTENCE.findall(text or "") if 8 <= len(s.strip()) <= 120]
            if len(out) >= limit:
                return out
    return out


def base_document(rng: random.Random, pool: list[str], target: int = 1000) -> str:
    paragraphs, length = [], 0
    while length < target:
        para = "".join(rng.choice(pool) for _ in range(rng.randint(2, 5)))
        paragraphs.append(para)
        length += len(para)
    return "\n".join(paragraphs)


def near_duplicate(rng: random.Random, text: str, pool: list[str]) -> tuple[str, str]:
    kind = rng.choice(("edit", "edit", "edit", "boilerplate", "drop_paragraph"))
    if kind == "boilerplate":
        return _HEADER + text + _FOOTER, kind
    if kind == "drop_paragraph":
        paras = text.split("\n")
        if len(paras) > 3:
            del paras[rng.randrange(len(paras))]
            return "\n".join(paras), kind
    chars = list(text)
    budget = int(len(chars) * rng.choice((0.01, 0.02, 0.04, 0.08)))
    while budget > 0:
        n = rng.randint(1, 4)
        i = rng.randrange(max(1, len(chars) - n))
        op = rng.random()
        donor = rng.choice(pool)[:n]
        if op < 0.4:
            chars[i : i + n] = list(donor)
        elif op < 0.7:
            chars[i:i] = list(donor)
        else:
            del chars[i : i + n]
        budget -= n
    return "".join(chars), "edit"


def generate(docs: int, out: Path, corpora: Path, seed: int = 2026, batch: int = 50_000) -> None:
    rng = random.Random(seed)
    pool = sentences(corpora)
    writer = None
    bases: list[tuple[str, str]] = []  # a bounded window of recent bases to copy from
    planted_ids, planted_sources, planted_kinds = [], [], []
    try:
        for start in range(0, docs, batch):
            ids, texts = [], []
            for i in range(start, min(docs, start + batch)):
                doc_id = f"g{i:09d}"
                roll = rng.random()
                if bases and roll < NEAR_SHARE + COPY_SHARE:
                    src_id, src = rng.choice(bases)
                    text, kind = (src, "copy") if roll < COPY_SHARE else near_duplicate(rng, src, pool)
                    planted_ids.append(doc_id)
                    planted_sources.append(src_id)
                    planted_kinds.append(kind)
                else:
                    text = base_document(rng, pool)
                    bases.append((doc_id, text))
                    if len(bases) > 20_000:
                        bases.pop(rng.randrange(len(bases)))
                ids.append(doc_id)
                texts.append(text)
            table = pa.table({"id": ids, "text": texts})
            if writer is None:
                writer = pq.ParquetWriter(out, table.schema, compression="zstd")
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()
    planted = pa.table({"id": planted_ids, "source_id": planted_sources, "kind": planted_kinds})
    pq.write_table(planted, f"{out}.planted.parquet")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--corpora", default=str(DEFAULT_CORPORA))
    ap.add_argument("--seed", type=int, default=2026)
    args = ap.parse_args()
    generate(args.docs, Path(args.out), Path(args.corpora), args.seed)


if __name__ == "__main__":
    main()
