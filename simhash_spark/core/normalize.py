"""Text normalization before feature extraction (pure Python, no Spark).

Reprints of one article differ in markup, character width, punctuation style, invisible characters and
whitespace; none of that should move a fingerprint, so it is removed here before segmentation.
"""

from __future__ import annotations

import hashlib
import html
import re
import sys
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

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
    variants: str = "none"  # "none" | "t2s" | "s2t": fold variant characters, then OpenCC's conversion
    unify_punctuation: bool = True
    lowercase: bool = True
    cjk_only: bool = False
    max_chars: int = 200_000


VARIANTS = ("none", "t2s", "s2t")

# Variant characters (異體字) that OpenCC's conversions leave apart from their standard form, as pairs
# "variant standard": each variant is replaced by the form OpenCC converts (its own standard traditional
# character, or the simplified one where OpenCC maps neither way), so both become one character after t2s
# and after s2t. Applied before OpenCC, only when variants != "none"; part of the fingerprint model.
_VARIANT_PAIRS = (
    "衞衛 眞真 卽即 旣既 敎教 綫線 裡裏 為爲 偽僞 啟啓 眾衆 竝並 汚污 汙污 麵面 "
    "麪面 鷄雞 濕溼 甯寧 凟瀆 畧略 畱留 姪侄 砲炮 粧妝 綑捆 菴庵 蔘參 慼戚 搾榨 "
    "蹟跡 槪概 晩晚 説說 鋭銳 閲閱 靑青 淸清 値值 尙尚 敍敘 吿告 郞郎 黒黑 歩步 "
    "渉涉 緖緒 鈎鉤 陿峽 緜綿 鬪鬥 鬭鬥 "
)
VARIANT_CHARACTERS = {pair[0]: pair[1] for pair in _VARIANT_PAIRS.split()}


@dataclass(frozen=True)
class Normalized:
    text: str
    truncated: bool


# What ``_invisible`` removes, as code point ranges, by Unicode version (``unicodedata.unidata_version``):
# recomputing it (``invisible_ranges``) scans all 1.1 M code points, seconds that every Python worker
# would pay on its first document holding one of them. tests/test_normalize.py recomputes the running
# version's ranges; a version not listed here is computed.
_INVISIBLE_14 = (
    (0x0, 0x8), (0xE, 0x1B), (0x7F, 0x84), (0x86, 0x9F), (0xAD, 0xAD), (0x600, 0x605), (0x61C, 0x61C),
    (0x6DD, 0x6DD), (0x70F, 0x70F), (0x890, 0x891), (0x8E2, 0x8E2), (0x180E, 0x180E), (0x200B, 0x200F),
    (0x202A, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F), (0xD800, 0xF8FF), (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD), (0x110CD, 0x110CD), (0x13430, 0x13438),
    (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001), (0xE0020, 0xE007F), (0xE0100, 0xE01EF),
    (0xF0000, 0xFFFFD), (0x100000, 0x10FFFD),
)  # fmt: skip
# Unicode 15 added the Egyptian hieroglyph format controls U+13439..U+1343F
_INVISIBLE_15 = tuple((lo, 0x1343F) if lo == 0x13430 else (lo, hi) for lo, hi in _INVISIBLE_14)
INVISIBLE_RANGES = {"14.0.0": _INVISIBLE_14, "15.0.0": _INVISIBLE_15, "15.1.0": _INVISIBLE_15}


def invisible_ranges() -> tuple[tuple[int, int], ...]:
    """Control, format (zero-width, BOM, bidi), surrogate and private-use code points, and variation
    selectors, as sorted ranges (first, last) of the running Python's Unicode data. Whitespace controls
    (tab, newlines) are left for the whitespace step so words stay apart."""
    cps = [
        cp
        for cp in range(sys.maxunicode + 1)
        if unicodedata.category(chr(cp)) in ("Cc", "Cf", "Cs", "Co") and not chr(cp).isspace()
    ]
    cps += list(range(0xFE00, 0xFE10)) + list(range(0xE0100, 0xE01F0))
    ordered, ranges, i = sorted(set(cps)), [], 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        ranges.append((ordered[i], ordered[j]))
        i = j + 1
    return tuple(ranges)


def _char_class(ranges: tuple[tuple[int, int], ...]) -> str:
    """A regex character class of code point ranges."""
    parts = [
        re.escape(chr(lo)) if lo == hi else f"{re.escape(chr(lo))}-{re.escape(chr(hi))}" for lo, hi in ranges
    ]
    return "[" + "".join(parts) + "]"


@lru_cache(maxsize=1)
def _invisible() -> re.Pattern[str]:
    """``invisible_ranges`` as a pattern. A regex scan beats str.translate here: most documents contain
    none of these."""
    ranges = INVISIBLE_RANGES.get(unicodedata.unidata_version) or invisible_ranges()
    return re.compile(_char_class(ranges))


_VARIATION_SELECTORS = re.compile("[\ufe00-\ufe0f\U000e0100-\U000e01ef]")
# NFKC's own mapping of the full-width ASCII forms and the ideographic space, which Chinese text is full
# of: applied first, it leaves most documents already normalized, and the quick check then skips NFKC.
_FULL_WIDTH = {chr(cp): chr(cp - 0xFEE0) for cp in range(0xFF01, 0xFF5F)} | {"\u3000": " "}


def _char_pattern(mapping: dict[str, str]) -> re.Pattern[str]:
    """The keys of a one-character map as one character class. No value may hold a key, so the order in
    which ``_replace_chars`` swaps them never matters."""
    if not all(len(k) == 1 and not set(v) & mapping.keys() for k, v in mapping.items()):
        raise ValueError("a character map needs one-character keys that no value contains")
    return re.compile("[" + "".join(re.escape(k) for k in sorted(mapping)) + "]")


def _replace_chars(text: str, pattern: re.Pattern[str], mapping: dict[str, str]) -> str:
    """``text`` with each character of ``mapping`` replaced. str.translate would look every character up in
    a dict, which is slow for non-ASCII text; a document holds only a handful of distinct characters to
    replace, found in one regex scan and each swapped by str.replace at C speed."""
    for char in set(pattern.findall(text)):
        text = text.replace(char, mapping[char])
    return text


_FULL_WIDTH_CHARS = _char_pattern(_FULL_WIDTH)
_PUNCTUATION_CHARS = _char_pattern(_PUNCTUATION)


def _remove_invisible(text: str) -> str:
    # str.isprintable is False for every Cc/Cf/Cs/Co character (and for whitespace, split off first):
    # a C-speed test that spares the large character class its scan of the usual clean document
    if "".join(text.split()).isprintable() and not _VARIATION_SELECTORS.search(text):
        return text
    return _invisible().sub("", text)


def _nfkc(text: str) -> str:
    text = _replace_chars(text, _FULL_WIDTH_CHARS, _FULL_WIDTH)
    if unicodedata.is_normalized("NFKC", text):
        return text
    return unicodedata.normalize("NFKC", text)


def _unify_punctuation(text: str) -> str:
    return _replace_chars(text, _PUNCTUATION_CHARS, _PUNCTUATION)


_VARIANT_TABLE = str.maketrans(VARIANT_CHARACTERS)


@lru_cache(maxsize=2)
def _opencc(direction: str) -> Any:
    """OpenCC's converter for ``direction`` ("t2s" or "s2t"), built once per process (never pickled)."""
    import opencc

    return opencc.OpenCC(direction)


def convert_variants(text: str, direction: str) -> str:
    """Fold the variant characters, then OpenCC's ``direction`` conversion ("none": unchanged)."""
    if direction == "none" or text.isascii():
        return text
    return str(_opencc(direction).convert(text.translate(_VARIANT_TABLE)))


def variants_signature(direction: str) -> dict[str, Any] | None:
    """What decides the conversion, for the fingerprint model: OpenCC's version (its dictionaries change
    between releases) and the variant table. None for "none"."""
    if direction == "none":
        return None
    from importlib.metadata import version

    table = "".join(f"{k}{v}" for k, v in sorted(VARIANT_CHARACTERS.items()))
    return {
        "opencc": version("opencc"),
        "variants_table_sha256": hashlib.sha256(table.encode("utf-8")).hexdigest(),
    }


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


def character_steps(text: str, opts: NormalizeOptions) -> str:
    """The steps of ``normalize`` between markup and whitespace: invisible characters, NFKC, variants,
    punctuation, case, ``cjk_only``. ``core.char_table`` applies them to single characters."""
    text = _remove_invisible(text)
    if opts.nfkc:
        text = _nfkc(text)
    if opts.variants != "none":
        text = convert_variants(text, opts.variants)
    if opts.unify_punctuation:
        text = _unify_punctuation(text)
    if opts.lowercase:
        text = text.lower()
    if opts.cjk_only:
        text = _NON_CJK.sub("", text)
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
    text = character_steps(text, opts)
    if not opts.cjk_only:
        text = " ".join(text.split())  # the same whitespace as regex \s and str.strip, at C speed
    if len(text) > opts.max_chars:
        text = text[: opts.max_chars]
        truncated = True
    return Normalized(text, truncated)
