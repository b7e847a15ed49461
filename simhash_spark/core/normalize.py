"""Text normalization before feature extraction (pure Python, no Spark).

Reprints of one article differ in markup, character width, punctuation style, invisible characters and
whitespace; none of that should move a fingerprint, so it is removed here before segmentation.
"""

from __future__ import annotations

import html
import re
import sys
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

_SCRIPT_STYLE = re.compile(r"<(script|style|noscript|template)\b[^>]*>.*?</\1\s*>", re.I | re.S)
_COMMENT = re.compile(r"<!--.*?(?:-->|$)", re.S)
# A tag starts with a letter, "/" or "!": a bare "<" in prose ("a < b", "<<书名>>" after NFKC) is kept.
_TAG = re.compile(r"</?[A-Za-z!][^<>]*>")
_WHITESPACE = re.compile(r"\s+")
_NON_CJK = re.compile(r"[^\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")

# Chinese punctuation that NFKC leaves alone, mapped to the ASCII form (the original article's checklist:
# "中文标点转英文"). NFKC already maps the full-width forms (，！？：；（）) to ASCII.
_PUNCTUATION = {
    "。": ".",
    "｡": ".",
    "、": ",",
    "､": ",",
    "“": '"',
    "”": '"',
    "„": '"',
    "‟": '"',
    "「": '"',
    "」": '"',
    "『": '"',
    "』": '"',
    "〝": '"',
    "〞": '"',
    "‘": "'",
    "’": "'",
    "‚": "'",
    "‛": "'",
    "《": "<",
    "》": ">",
    "〈": "<",
    "〉": ">",
    "【": "[",
    "】": "]",
    "〔": "[",
    "〕": "]",
    "〖": "[",
    "〗": "]",
    "—": "-",
    "–": "-",
    "―": "-",
    "‐": "-",
    "‑": "-",
    "‒": "-",
    "－": "-",
    "～": "~",
    "〜": "~",
    "…": "...",
    "‥": "..",
    "•": "·",
    "・": "·",
}


@dataclass(frozen=True)
class NormalizeOptions:
    strip_html: bool = True
    nfkc: bool = True
    unify_punctuation: bool = True
    lowercase: bool = True
    cjk_only: bool = False
    max_chars: int = 200_000


@dataclass(frozen=True)
class Normalized:
    text: str
    truncated: bool


@lru_cache(maxsize=1)
def _drop_table() -> dict[int, str | None]:
    """Translate table: control, format (zero-width, BOM, bidi), surrogate, private-use and variation
    selector code points are dropped; line and tab controls become spaces so words stay apart."""
    table: dict[int, str | None] = {}
    for cp in range(sys.maxunicode + 1):
        cat = unicodedata.category(chr(cp))
        if cat in ("Cc", "Cf", "Cs", "Co"):
            table[cp] = None
    for cp in (0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x1C, 0x1D, 0x1E, 0x1F, 0x85):
        table[cp] = " "
    for cp in list(range(0xFE00, 0xFE10)) + list(range(0xE0100, 0xE01F0)):
        table[cp] = None
    return table


@lru_cache(maxsize=1)
def _punct_table() -> dict[int, str]:
    return {ord(k): v for k, v in _PUNCTUATION.items()}


def strip_html(text: str) -> str:
    """Remove scripts, styles, comments and tags, then decode entities (``&amp;`` → ``&``)."""
    if "<" in text:
        text = _SCRIPT_STYLE.sub(" ", text)
        text = _COMMENT.sub(" ", text)
        text = _TAG.sub(" ", text)
    if "&" in text:
        text = html.unescape(text)
    return text


def normalize(text: str, opts: NormalizeOptions) -> Normalized:
    """Normalize one document; the result is capped at ``opts.max_chars`` characters."""
    truncated = False
    # Cap before the expensive steps too: markup rarely takes more than 3/4 of a page, so a 4x margin
    # keeps the result identical for real documents while a 50 MB blob costs only its first slice.
    raw_cap = opts.max_chars * 4
    if len(text) > raw_cap:
        text = text[:raw_cap]
        truncated = True
    if opts.strip_html:
        text = strip_html(text)
    text = text.translate(_drop_table())
    if opts.nfkc:
        text = unicodedata.normalize("NFKC", text)
    if opts.unify_punctuation:
        text = text.translate(_punct_table())
    if opts.lowercase:
        text = text.lower()
    if opts.cjk_only:
        text = _NON_CJK.sub("", text)
    else:
        text = _WHITESPACE.sub(" ", text).strip()
    if len(text) > opts.max_chars:
        text = text[: opts.max_chars]
        truncated = True
    return Normalized(text, truncated)
