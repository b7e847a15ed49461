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

# Crawled pages are often cut off or malformed. Whatever is not closed is not removed: an unterminated
# comment, script or tag loses only its own marker, never the text after it (a browser would hide that
# text, but two different articles cut after the same opening would then get one fingerprint).
_SCRIPT_STYLE = re.compile(r"<(script|style|noscript|template)\b[^>]*>.*?</\1\s*>", re.I | re.S)
_CDATA = re.compile(r"<!\[CDATA\[(.*?)\]\]>", re.S)  # feeds wrap article text in CDATA: keep the text
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_OPENERS = re.compile(r"<!--|<!\[CDATA\[")  # left unterminated
# A tag starts with a letter, "/" or "!": a bare "<" in prose ("a < b", "<<书名>>" after NFKC) is kept.
# Quoted attribute values may hold ">" ('<a title="a>b">').
_TAG = re.compile(r"""</?[A-Za-z!][^<>"']*(?:"[^"]*"[^<>"']*|'[^']*'[^<>"']*)*>""")
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


def _char_class(codepoints: list[int]) -> str:
    """A regex character class for a sorted list of code points, as ranges."""
    parts, i = [], 0
    while i < len(codepoints):
        j = i
        while j + 1 < len(codepoints) and codepoints[j + 1] == codepoints[j] + 1:
            j += 1
        lo, hi = codepoints[i], codepoints[j]
        parts.append(re.escape(chr(lo)) if lo == hi else f"{re.escape(chr(lo))}-{re.escape(chr(hi))}")
        i = j + 1
    return "[" + "".join(parts) + "]"


@lru_cache(maxsize=1)
def _invisible() -> re.Pattern[str]:
    """Control, format (zero-width, BOM, bidi), surrogate and private-use code points, and variation
    selectors. Whitespace controls (tab, newlines) are left for the whitespace step so words stay apart.
    A regex scan beats str.translate here: most documents contain none of these."""
    cps = [
        cp
        for cp in range(sys.maxunicode + 1)
        if unicodedata.category(chr(cp)) in ("Cc", "Cf", "Cs", "Co") and not chr(cp).isspace()
    ]
    cps += list(range(0xFE00, 0xFE10)) + list(range(0xE0100, 0xE01F0))
    return re.compile(_char_class(sorted(set(cps))))


_VARIATION_SELECTORS = re.compile("[\ufe00-\ufe0f\U000e0100-\U000e01ef]")
# NFKC's own mapping of the full-width ASCII forms and the ideographic space, which Chinese text is full
# of: applied first, it leaves most documents already normalized, and the quick check then skips NFKC.
_FULL_WIDTH = {cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}


def _remove_invisible(text: str) -> str:
    # str.isprintable is False for every Cc/Cf/Cs/Co character (and for whitespace, split off first):
    # a C-speed test that spares the large character class its scan of the usual clean document
    if "".join(text.split()).isprintable() and not _VARIATION_SELECTORS.search(text):
        return text
    return _invisible().sub("", text)


def _nfkc(text: str) -> str:
    text = text.translate(_FULL_WIDTH)
    if unicodedata.is_normalized("NFKC", text):
        return text
    return unicodedata.normalize("NFKC", text)


@lru_cache(maxsize=1)
def _punctuation() -> re.Pattern[str]:
    return re.compile("|".join(re.escape(k) for k in sorted(_PUNCTUATION, key=len, reverse=True)))


def _unify_punctuation(text: str) -> str:
    return _punctuation().sub(lambda m: _PUNCTUATION[m.group()], text)


def strip_html(text: str) -> str:
    """Remove scripts, styles, comments and tags (CDATA sections keep their text), then decode entities
    (``&amp;`` → ``&``)."""
    if "<" in text:
        text = _SCRIPT_STYLE.sub(" ", text)
        text = _CDATA.sub(r" \1 ", text)
        text = _COMMENT.sub(" ", text)
        text = _OPENERS.sub(" ", text)
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
    text = _remove_invisible(text)
    if opts.nfkc:
        text = _nfkc(text)
    if opts.unify_punctuation:
        text = _unify_punctuation(text)
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
