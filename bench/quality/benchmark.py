"""A labelled near-duplicate benchmark built from the shared corpora (deterministic for a seed).

Base documents come from news stories (all lengths), modern prose (long) and paper abstracts (medium).
About 60 % of the bases get one to three variants, each made by one controlled edit (or two, "mixed");
every story of ``news_xwlb`` that the corpus README lists as a natural near-duplicate is included as a
base too, and "template" documents (one story's opening paragraph over another story's body) are the
hard negatives. Labels are not assigned here: the ground truth is the exact character 5-gram Jaccard over
all pairs (``truth.py``), so an edit that went further than intended is simply not a duplicate.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

EDITS = (
    "insert_words",
    "delete_words",
    "replace_words",
    "swap_paragraphs",
    "shuffle_paragraphs",
    "punctuation_width",
    "boilerplate",
    "truncate",
    "retitle",
    "mixed",
)

_HEADERS = (
    "来源：新华网 | 编辑：王晓明 | 2024年05月12日 08:31",
    "本文转载自人民日报客户端，版权归原作者所有，如有侵权请联系删除。",
    "【环球时报综合报道】",
    "点击上方蓝字关注我们 ▲",
)
_FOOTERS = (
    "责任编辑：李华 校对：张敏\n扫码下载客户端，阅读更多精彩内容。",
    "（完）\n更多新闻请关注我们的官方微博和微信公众号。",
    "声明：本文仅代表作者观点，不代表本站立场。",
    "【纠错】 【责任编辑：陈静】",
)
_FULLWIDTH = {chr(c): chr(c + 0xFEE0) for c in range(0x21, 0x7F)}
_TO_ASCII_PUNCT = {"，": ",", "。": ".", "：": ":", "；": ";", "！": "!", "？": "?", "“": '"', "”": '"'}


@dataclass(frozen=True)
class Doc:
    id: str
    text: str
    length: int
    origin: str  # "base", "variant" or "template"
    base_id: str  # the base a variant was made from ("" for bases and templates)
    edit: str  # the edit that made a variant ("" otherwise)


def _paragraphs(text: str) -> list[str]:
    paras = [p for p in text.split("\n") if p.strip()]
    if len(paras) >= 3:
        return paras
    # one long paragraph: work on sentences instead
    parts, cur = [], ""
    for ch in text:
        cur += ch
        if ch in "。！？":
            parts.append(cur)
            cur = ""
    if cur:
        parts.append(cur)
    return parts


def _spans(rng: random.Random, text: str, fraction: float) -> list[tuple[int, int]]:
    """Random disjoint spans of 2-6 characters covering about ``fraction`` of the text."""
    want = max(1, int(len(text) * fraction))
    spans: list[tuple[int, int]] = []
    covered = 0
    for _ in range(want * 3):
        if covered >= want or len(text) < 10:
            break
        n = rng.randint(2, 6)
        start = rng.randrange(0, max(1, len(text) - n))
        if any(s < start + n and start < e for s, e in spans):
            continue
        spans.append((start, start + n))
        covered += n
    return sorted(spans)


def _donor(rng: random.Random, pool: list[str]) -> str:
    t = rng.choice(pool)
    n = rng.randint(2, 6)
    i = rng.randrange(0, max(1, len(t) - n))
    return t[i : i + n]


def apply_edit(rng: random.Random, text: str, edit: str, pool: list[str]) -> str:
    if edit == "mixed":
        a, b = rng.sample([e for e in EDITS if e != "mixed"], 2)
        return apply_edit(rng, apply_edit(rng, text, a, pool), b, pool)
    if edit in ("insert_words", "delete_words", "replace_words"):
        fraction = rng.choice((0.01, 0.03, 0.05, 0.08, 0.12))
        out, last = [], 0
        for s, e in _spans(rng, text, fraction):
            out.append(text[last:s])
            if edit == "insert_words":
                out.append(_donor(rng, pool) + text[s:e])
            elif edit == "replace_words":
                out.append(_donor(rng, pool))
            last = e
        out.append(text[last:])
        return "".join(out)
    if edit in ("swap_paragraphs", "shuffle_paragraphs"):
        paras = _paragraphs(text)
        if len(paras) < 2:
            return text + "\n" + _FOOTERS[0]
        if edit == "swap_paragraphs":
            i, j = rng.sample(range(len(paras)), 2)
            paras[i], paras[j] = paras[j], paras[i]
        else:
            rng.shuffle(paras)
        sep = "\n" if "\n" in text else ""
        return sep.join(paras)
    if edit == "punctuation_width":
        t = "".join(_TO_ASCII_PUNCT.get(c, c) for c in text)
        t = "".join(_FULLWIDTH.get(c, c) if rng.random() < 0.5 else c for c in t)
        return t.replace("\n", "\n\n  ").replace(",", " , ")
    if edit == "boilerplate":
        return rng.choice(_HEADERS) + "\n" + text + "\n" + rng.choice(_FOOTERS)
    if edit == "truncate":
        return text[: int(len(text) * rng.choice((0.95, 0.9, 0.85, 0.75)))]
    if edit == "retitle":
        return _donor(rng, pool) + _donor(rng, pool) + "：" + _donor(rng, pool) + "\n" + text
    raise ValueError(edit)


def _sample(path: Path, n: int, rng: random.Random, min_chars: int) -> list[tuple[str, str]]:
    t = pq.read_table(path, columns=["id", "text"]).to_pylist()
    rows = [(r["id"], r["text"]) for r in t if r["text"] and len(r["text"]) >= min_chars]
    return rng.sample(rows, min(n, len(rows)))


def traditional_edition(rng: random.Random, text: str, pool: list[str]) -> tuple[str, str]:
    """The text in traditional characters, as a Hong Kong or Taiwan outlet republishes it: zhconv
    (MediaWiki's conversion tables, independent of the OpenCC the job uses), characters only
    (``zh-hant``) or with Taiwan's words too (``zh-tw``: 软件 → 軟體); a third also get one edit."""
    import zhconv

    target = rng.choice(("zh-hant", "zh-tw"))
    kind = f"traditional_{target[3:]}"
    if rng.random() < 1 / 3:
        edit = rng.choice([e for e in EDITS if e != "mixed"])
        text, kind = apply_edit(rng, text, edit, pool), f"{kind}+{edit}"
    return zhconv.convert(text, target), kind


def build(
    corpora: Path,
    *,
    seed: int = 2026,
    news: int = 1500,
    prose: int = 300,
    abstracts: int = 300,
    traditional: float = 0.0,
) -> list[Doc]:
    """``traditional``: the share of bases that also get a traditional edition (``traditional_edition``;
    0 leaves the benchmark as it always was)."""
    rng = random.Random(seed)
    bases = _sample(corpora / "news_xwlb.parquet", news, rng, 50)
    bases += _sample(corpora / "modern_zh.parquet", prose, rng, 300)
    bases += _sample(corpora / "csl_abstracts.parquet", abstracts, rng, 50)
    natural = pq.read_table(corpora / "news_xwlb_near_dup_pairs.parquet").to_pylist()
    wanted = {r["id1"] for r in natural} | {r["id2"] for r in natural}
    have = {i for i, _ in bases}
    news_rows = pq.read_table(corpora / "news_xwlb.parquet", columns=["id", "text"]).to_pylist()
    bases += [(r["id"], r["text"]) for r in news_rows if r["id"] in wanted and r["id"] not in have]
    bases.sort()
    pool = [t for _, t in bases]
    docs = [Doc(i, t, len(t), "base", "", "") for i, t in bases]
    for base_id, text in bases:
        if rng.random() >= 0.6:
            continue
        for v in range(rng.randint(1, 3)):
            edit = rng.choice(EDITS)
            t = apply_edit(rng, text, edit, pool)
            docs.append(Doc(f"{base_id}~v{v}", t, len(t), "variant", base_id, edit))
    if traditional:
        trad_rng = random.Random(seed + 1)  # its own stream: the other documents stay as they were
        for base_id, text in bases:
            if trad_rng.random() < traditional:
                t, kind = traditional_edition(trad_rng, text, pool)
                docs.append(Doc(f"{base_id}~trad", t, len(t), "variant", base_id, kind))
    news_bases = [(i, t) for i, t in bases if i.startswith("xwlb") and "\n" in t]
    for j in range(200):
        (_, ta), (_, tb) = rng.sample(news_bases, 2)
        t = ta.split("\n", 1)[0] + "\n" + tb.split("\n", 1)[1]
        docs.append(Doc(f"template-{j:03d}", t, len(t), "template", "", ""))
    return docs
