"""Generate a Chinese news-like corpus with planted near-duplicates (deterministic for a seed).

Each base article is assembled from the vocabulary in ``words.txt`` with random names, places, dates and
figures, so unrelated articles differ in most of their keywords. A share of the articles get variants:

- ``format``: the same text with different layout: HTML markup, full-width characters, Chinese vs
  ASCII punctuation, extra whitespace and zero-width characters. Identical after normalization.
- ``edit``: one short phrase inserted, deleted or replaced: a true near-duplicate, usually a few bits away.
- ``boilerplate``: a reprint with an added source line and footer.

The ``family`` column names the base article a row derives from; ``variant`` says how.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

VARIANTS = ("format", "edit", "boilerplate")


@dataclass(frozen=True)
class Vocabulary:
    words: dict[str, list[str]]

    @classmethod
    def load(cls) -> Vocabulary:
        text = resources.files("simhash_spark.demo").joinpath("words.txt").read_text("utf-8")
        words: dict[str, list[str]] = {}
        for line in text.splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            name, _, items = line.partition("|")
            words[name] = items.split()
        return cls(words)

    def pick(self, rng: random.Random, cat: str) -> str:
        return rng.choice(self.words[cat])


def _person(v: Vocabulary, rng: random.Random) -> str:
    return v.pick(rng, "person_surname") + v.pick(rng, "person_given")


def _sentence(v: Vocabulary, rng: random.Random) -> str:
    p, o, t = v.pick(rng, "place"), v.pick(rng, "org"), v.pick(rng, "topic")
    n = rng.randint(2, 980)
    forms = [
        f"{rng.randint(1, 12)}月{rng.randint(1, 28)}日，{p}{o}{v.pick(rng, 'verb')}了关于{t}的{v.pick(rng, 'object')}。",
        f"据{v.pick(rng, 'title')}{_person(v, rng)}介绍，{p}今年在{t}方面累计投入{n}{v.pick(rng, 'measure')}，"
        f"取得了{v.pick(rng, 'adj')}成效。",
        f"“{v.pick(rng, 'quote')}。”{p}{o}{v.pick(rng, 'title')}{_person(v, rng)}表示。",
        f"{p}将{v.pick(rng, 'adj')}{v.pick(rng, 'verb')}{t}{v.pick(rng, 'object')}，计划覆盖{n}{v.pick(rng, 'measure')}。",
        f"与去年同期相比，{p}{t}相关指标增长{rng.randint(1, 60)}.{rng.randint(0, 9)}%，{v.pick(rng, 'adj')}高于预期。",
        f"{_person(v, rng)}说，{t}和{v.pick(rng, 'topic')}需要统筹考虑，{o}已经{v.pick(rng, 'verb')}专门{v.pick(rng, 'object')}。",
    ]
    return rng.choice(forms)


def make_article(v: Vocabulary, rng: random.Random) -> str:
    paragraphs = []
    for _ in range(rng.randint(3, 6)):
        paragraphs.append("".join(_sentence(v, rng) for _ in range(rng.randint(2, 5))))
    return "\n".join(paragraphs)


_FULL_WIDTH = {
    ord(c): ord(c) + 0xFEE0 for c in "0123456789%.ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
}


def format_variant(text: str, rng: random.Random) -> str:
    """Same content, different layout: every change here is undone by normalization."""
    out = text.translate(_FULL_WIDTH) if rng.random() < 0.5 else text
    if rng.random() < 0.5:
        out = out.replace("，", ",").replace("。", ".").replace("“", '"').replace("”", '"')
    out = out.replace("表示", "表\u200b示", 1)
    paras = out.split("\n")
    if rng.random() < 0.6:
        return '<div class="article">' + "".join(f"<p>{p}</p>\n" for p in paras) + "</div>"
    return "\n\n".join("  " + p + " \t" for p in paras)


def edit_variant(text: str, v: Vocabulary, rng: random.Random) -> str:
    """One small content change: replace, insert or delete a short phrase."""
    kind = rng.choice(("replace", "insert", "delete"))
    if kind == "replace":
        for cat in ("adj", "verb", "measure"):
            hits = [w for w in v.words[cat] if w in text]
            if hits:
                w = rng.choice(hits)
                return text.replace(w, v.pick(rng, cat), 1)
    if kind == "insert":
        cut = text.find("。", len(text) // 2)
        cut = len(text) - 1 if cut < 0 else cut
        return text[: cut + 1] + "记者从相关部门了解到，" + text[cut + 1 :]
    sentences = text.split("。")
    if len(sentences) > 4:
        del sentences[rng.randrange(1, len(sentences) - 1)]
    return "。".join(sentences)


def boilerplate_variant(text: str, v: Vocabulary, rng: random.Random) -> str:
    p = v.pick(rng, "place")
    return f"来源：{p}日报 {rng.randint(2019, 2025)}年转载\n{text}\n（责任编辑：{_person(v, rng)}）"


def generate(n_docs: int, seed: int = 7, dup_share: float = 0.3) -> pa.Table:
    """``n_docs`` base articles plus variants of about ``dup_share`` of them, shuffled."""
    rng = random.Random(seed)
    v = Vocabulary.load()
    rows: list[tuple[str, str, str, str]] = []
    for i in range(n_docs):
        fam = f"doc-{i:06d}"
        base = make_article(v, rng)
        title = base.split("。")[0][:30]
        rows.append((fam, base, title, "base"))
        if rng.random() < dup_share:
            for variant in rng.sample(VARIANTS, rng.randint(1, 3)):
                if variant == "format":
                    text = format_variant(base, rng)
                elif variant == "edit":
                    text = edit_variant(base, v, rng)
                else:
                    text = boilerplate_variant(base, v, rng)
                rows.append((fam, text, title, variant))
    rng.shuffle(rows)
    ids = [f"n{idx:07d}" for idx in range(len(rows))]
    return pa.table(
        {
            "id": ids,
            "title": [r[2] for r in rows],
            "text": [r[1] for r in rows],
            "family": [r[0] for r in rows],
            "variant": [r[3] for r in rows],
        }
    )


def write_corpus(path: Path, n_docs: int, seed: int = 7) -> pa.Table:
    table = generate(n_docs, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return table
