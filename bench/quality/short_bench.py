"""Short texts (20-100 letters): a labelled benchmark, and what each configuration finds on it.

    .venv/bin/python -m bench.quality.short_bench [--corpora ../shared/corpora] [--bases 3000]
        [--poetry DIR] [--out short.json] [--set section.key=value ...]

Bases: reviews and People's Daily lines of 20-100 letters (``shingles.letters``: no punctuation or
spaces), questions of LCQMC (5-19 letters; below the 20-100 range the bar is about, reported on their own)
and, with ``--poetry`` (the unpacked npm package chinese-poetry 2.0.1: ``npm pack chinese-poetry``),
the poems of its simplified edition of Tang poems (shuimotangshi) together with the same poems from its
traditional edition (quantangshi, matched by author and title). About 60 % of the bases get one or two
variants, each by one small edit: one to three characters replaced, inserted or deleted; punctuation and
width changed; a suffix ("!!!", an emoji, "转发"); two clauses swapped. Labels are not assigned: the truth is
the exact character 2-gram Jaccard >= 0.8 over all pairs (texts normalized as the job does; with
``--variants-truth`` both converted to simplified first, by zhconv, a converter independent of OpenCC).

Each configuration fingerprints the texts with the job's code, takes every pair within that pair's k
(exhaustive: no band join, so the numbers are the configuration's; the band join's own recall is stated by
``auto``), then applies the job's pair rule with its text check. Precision, recall and F1 overall and by the
shorter text's length.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from bench.quality.evaluate import DEFAULT_CORPORA, prf
from bench.quality.truth import pairs_at_least
from simhash_spark.config import Config, load_config
from simhash_spark.core.fingerprint import Fingerprinter
from simhash_spark.core.normalize import NormalizeOptions, normalize
from simhash_spark.core.rules import PairRule
from simhash_spark.core.shingles import char_shingles, letters
from simhash_spark.core.simhash import popcount

LOW, HIGH = 20, 100
BUCKETS = ((5, 20), (20, 40), (40, 70), (70, 101))
CONFIGS: dict[str, list[str]] = {
    "default": [],
    "short preset (--config short)": ["@short"],
    "2-gram, k 12": ["short_texts.below_letters=101", "short_texts.ngram_size=2"],
    "2-gram, k 14": ["short_texts.below_letters=101", "short_texts.ngram_size=2", "match.max_distance=14"],
    "2-gram, k 16": ["short_texts.below_letters=101", "short_texts.ngram_size=2", "match.max_distance=16"],
    "3-gram, k 14": ["short_texts.below_letters=101", "short_texts.ngram_size=3", "match.max_distance=14"],
    "3-gram, k 16": ["short_texts.below_letters=101", "short_texts.ngram_size=3", "match.max_distance=16"],
}
_SUFFIXES = ("!!!", "😀", "转发", "。。。", " [赞]")


def _short_texts(
    path: Path,
    rng: random.Random,
    n: int,
    prefix: str,
    column: str = "text",
    low: int = LOW,
    high: int = HIGH,
) -> list[tuple[str, str]]:
    rows = pq.read_table(path, columns=["id", column]).to_pylist()
    norm = NormalizeOptions()
    keep = sorted(
        {
            (f"{prefix}{r['id']}", r[column])
            for r in rows
            if r[column] and low <= letters(normalize(r[column], norm).text) <= high
        }
    )
    return rng.sample(keep, min(n, len(keep)))


def edit(rng: random.Random, text: str, pool: str) -> str:
    kind = rng.choice(("replace", "insert", "delete", "punctuation", "suffix", "swap"))
    chars = list(text)
    if kind in ("replace", "insert", "delete"):
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(chars))
            if kind == "replace":
                chars[i] = rng.choice(pool)
            elif kind == "insert":
                chars.insert(i, rng.choice(pool))
            elif len(chars) > 5:
                del chars[i]
        return "".join(chars)
    if kind == "punctuation":
        return text.replace("，", ",").replace("。", ".").replace("！", "!") + " "
    if kind == "suffix":
        return text + rng.choice(_SUFFIXES)
    parts = [p for p in text.replace("。", "，").split("，") if p]
    if len(parts) < 2:
        return text + rng.choice(_SUFFIXES)
    i = rng.randrange(len(parts) - 1)
    parts[i], parts[i + 1] = parts[i + 1], parts[i]
    return "，".join(parts)


def poems(poetry: Path) -> list[tuple[str, str]]:
    """Simplified edition (shuimotangshi) and the same poems' traditional edition (quantangshi)."""
    import zhconv

    dist = poetry / "dist"
    simplified = json.loads((dist / "shuimotangshi" / "shuimotangshi.json").read_text("utf-8"))
    traditional = [
        p
        for f in sorted((dist / "quantangshi").glob("poet.tang.*.json"))
        for p in json.loads(f.read_text("utf-8"))
    ]

    def key(p: dict) -> tuple[str, str]:
        return zhconv.convert(p["author"], "zh-cn"), zhconv.convert(p["title"], "zh-cn")

    by_key = {key(p): p for p in traditional}
    out = []
    for i, p in enumerate(simplified):
        out.append((f"poem-s-{i:04d}", "".join(p["paragraphs"])))
        twin = by_key.get(key(p))
        if twin is not None:
            out.append((f"poem-t-{i:04d}", "".join(twin["paragraphs"])))
    return out


def build(corpora: Path, *, bases: int, seed: int = 7, poetry: Path | None = None) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    docs = _short_texts(corpora / "reviews.parquet", rng, bases // 2, "r-")
    docs += _short_texts(corpora / "peoples_daily_1998.parquet", rng, bases - bases // 2, "p-")
    docs += _short_texts(corpora / "pairs_lcqmc_dev.parquet", rng, bases // 3, "q-", "text1", 5, LOW - 1)
    pool = "".join(t for _, t in docs)
    out = list(docs)
    for doc_id, text in docs:
        if rng.random() < 0.6:
            for v in range(rng.randint(1, 2)):
                out.append((f"{doc_id}~{v}", edit(rng, text, pool)))
    if poetry is not None:
        out += poems(poetry)
    return sorted(out)


def truth_pairs(texts: list[str], *, to_simplified: bool) -> set[tuple[int, int]]:
    norm = NormalizeOptions()
    if to_simplified:
        import zhconv

        texts = [zhconv.convert(t, "zh-cn") for t in texts]
    sets = [char_shingles(normalize(t, norm).text, 2) for t in texts]
    return {(i, j) for i, j, _ in pairs_at_least(sets, 0.8)}


def _config(overrides: list[str]) -> Config:
    preset = [o[1:] for o in overrides if o.startswith("@")]
    return load_config(preset[0] if preset else None, [o for o in overrides if not o.startswith("@")])


def _scores(
    ids: list[str], found: set[tuple[int, int]], truth: set[tuple[int, int]], n_letters: np.ndarray
) -> dict:
    out = {"all": prf(len(found & truth), len(found), len(truth))}
    for lo, hi in BUCKETS:

        def inside(p: tuple[int, int], lo: int = lo, hi: int = hi) -> bool:
            return lo <= min(n_letters[p[0]], n_letters[p[1]]) < hi

        t = {p for p in truth if inside(p)}
        f = {p for p in found if inside(p)}
        out[f"{lo}-{hi - 1} letters"] = prf(len(f & t), len(f), len(t))
    editions = {p for p in truth if "poem-t-" in ids[p[0]] + ids[p[1]]}
    if editions:
        f = {p for p in found if "poem-t-" in ids[p[0]] + ids[p[1]]}
        out["poem editions (traditional with simplified)"] = prf(len(f & editions), len(f), len(editions))
    return out


def run_spark(ids: list[str], texts: list[str], truth: set[tuple[int, int]], overrides: list[str]) -> dict:
    """The whole job (band join included) in Spark local mode, scored the same way."""
    import tempfile

    import pyarrow as pa

    from simhash_spark.io import read_input
    from simhash_spark.pipeline import dedup
    from simhash_spark.session import build_session

    cfg = _config([*overrides, "output.write_report=false"])
    path = f"{tempfile.mkdtemp(prefix='short-bench-')}/short.parquet"
    pq.write_table(pa.table({"id": ids, "text": texts}), path)
    spark = build_session(cfg, master="local[2]", conf={"spark.sql.shuffle.partitions": "8"})
    res = dedup(spark, read_input(spark, path=path), cfg)
    position = {doc_id: i for i, doc_id in enumerate(ids)}
    found = {
        tuple(sorted((position[r["id_a"]], position[r["id_b"]])))
        for r in res.pairs.select("id_a", "id_b").collect()
    }
    n_letters = np.asarray(Fingerprinter(cfg.model).batch(texts).n_chars)
    out = _scores(ids, found, truth, n_letters)  # type: ignore[arg-type]
    out["bands"] = res.stats["bands"]["scheme"]
    res.unpersist()
    return out


def evaluate(ids: list[str], texts: list[str], truth: set[tuple[int, int]], overrides: list[str]) -> dict:
    cfg = _config(overrides)
    batch = Fingerprinter(cfg.model).batch(texts)
    fps = np.asarray(batch.fingerprint, dtype=np.int64)
    ok = np.asarray(batch.has_fingerprint)
    n_letters = np.asarray(batch.n_chars)
    rule = PairRule(cfg.policy, cfg.verify, cfg.normalize, short=cfg.short_texts)
    found: set[tuple[int, int]] = set()
    for i in range(len(texts) - 1):
        d = popcount(fps[i] ^ fps[i + 1 :])
        for off in np.flatnonzero(d <= rule.largest_k):
            j = i + 1 + int(off)
            if not (ok[i] and ok[j]):
                continue
            dist = int(d[off])
            sim = rule.similarity(texts[i], texts[j]) if rule.needs_text_check(dist) else None
            if rule.reason(dist, int(n_letters[i]), int(n_letters[j]), similarity=sim):
                found.add((i, j))
    return _scores(ids, found, truth, n_letters)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpora", default=str(DEFAULT_CORPORA))
    ap.add_argument("--bases", type=int, default=3000)
    ap.add_argument("--poetry", default="")
    ap.add_argument(
        "--variants-truth", action="store_true", help="truth after converting both texts to simplified"
    )
    ap.add_argument(
        "--set", action="append", default=[], dest="overrides", help="added to every configuration"
    )
    ap.add_argument("--spark", action="store_true", help="also run the whole job (default and short presets)")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    docs = build(Path(args.corpora), bases=args.bases, poetry=Path(args.poetry) if args.poetry else None)
    texts = [t for _, t in docs]
    truth = truth_pairs(texts, to_simplified=args.variants_truth)
    report: dict = {"documents": len(docs), "true_pairs": len(truth), "overrides": args.overrides}
    for name, overrides in CONFIGS.items():
        report[name] = evaluate([i for i, _ in docs], texts, truth, [*overrides, *args.overrides])
        print(name, json.dumps(report[name], ensure_ascii=False), flush=True)
    if args.spark:
        for name, overrides in (("job, default", []), ("job, --config short", ["@short"])):
            report[name] = run_spark([i for i, _ in docs], texts, truth, [*overrides, *args.overrides])
            print(name, json.dumps(report[name], ensure_ascii=False), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1, ensure_ascii=False), "utf-8")


if __name__ == "__main__":
    main()
