"""Weighted features of a normalized document (pure Python).

Modes:
- ``tfidf``: jieba TF-IDF keywords, computed exactly as ``jieba.analyse.extract_tags(topK, withWeight=True)``
  does (same IDF table, median IDF for unknown words, stop words, order of ties) but over tokens from any
  backend, so a faster tokenizer yields the same keywords.
- ``tf``: every token that carries a letter, digit or ideograph, weighted by its count.
- ``char_ngram``: the distinct character n-grams of the text's letters, digits and ideographs
  (``ngram_size``); needs no segmentation, suits short texts and reprints.
- ``word_ngram``: distinct n-grams of consecutive word tokens (``word_ngram_size``).
- ``sentences``: the distinct sentences (split at . ! ? ; and line breaks after normalization).

Shingle modes (``char_ngram``, ``word_ngram``, ``sentences``) weigh every distinct shingle 1
(``shingle_weights = "binary"``) or by its count (``"count"``): counts let a repeated phrase dominate
long documents.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from operator import itemgetter

from simhash_spark.core.shingles import compact
from simhash_spark.core.tokenize import Tokenizer, TokenizerOptions, get_tokenizer

MODES = ("tfidf", "tf", "char_ngram", "word_ngram", "sentences")
SHINGLE_WEIGHTS = ("binary", "count")
_SENTENCE_END = re.compile(r"[.!?;\n]+")


@dataclass(frozen=True)
class FeatureOptions:
    mode: str = "char_ngram"
    top_k: int = 50
    idf_path: str = ""
    stop_words_path: str = ""
    allow_pos: tuple[str, ...] = ()
    ngram_size: int = 5
    word_ngram_size: int = 3
    shingle_weights: str = "binary"


@dataclass(frozen=True)
class IdfTable:
    idf: dict[str, float]
    median_idf: float
    stop_words: frozenset[str]


@lru_cache(maxsize=4)
def load_idf_table(idf_path: str = "", stop_words_path: str = "") -> IdfTable:
    """jieba's own loaders, so the table, its median and the stop words are jieba's to the bit."""
    import jieba
    from jieba.analyse.tfidf import TFIDF

    jieba.setLogLevel(logging.WARNING)
    extractor = TFIDF(idf_path or None)
    if stop_words_path:
        extractor.set_stop_words(stop_words_path)
    return IdfTable(extractor.idf_freq, extractor.median_idf, frozenset(extractor.stop_words))


def tfidf_keywords(tokens: Iterable[str], table: IdfTable, top_k: int) -> list[tuple[str, float]]:
    """``extract_tags`` from its tokens, to the bit.

    Counting first and filtering the distinct tokens gives the same dict as jieba's per-token loop: the
    filter depends on the token alone, and both dicts keep first-occurrence order (which decides ties).
    Counts are exact small integers, so float(count), the total and each weight are jieba's floats.
    """
    stop = table.stop_words
    freq = {w: float(c) for w, c in Counter(tokens).items() if len(w.strip()) >= 2 and w.lower() not in stop}
    total = sum(freq.values())
    idf, median = table.idf, table.median_idf
    for k in freq:
        freq[k] *= idf.get(k, median) / total
    tags = sorted(freq.items(), key=itemgetter(1), reverse=True)
    return tags[:top_k] if top_k else tags


def _has_word_char(token: str) -> bool:
    return any(c.isalnum() for c in token)


def term_frequencies(tokens: Iterable[str], stop_words: frozenset[str]) -> list[tuple[str, float]]:
    freq: dict[str, float] = {}
    for w in tokens:
        if not _has_word_char(w) or w.lower() in stop_words:
            continue
        freq[w] = freq.get(w, 0.0) + 1.0
    return list(freq.items())


def _weighted(shingles: Iterable[str], binary: bool) -> list[tuple[str, float]]:
    if binary:
        return [(g, 1.0) for g in dict.fromkeys(shingles)]
    return [(g, float(c)) for g, c in Counter(shingles).items()]


def char_ngrams(text: str, n: int, *, binary: bool = True) -> list[tuple[str, float]]:
    s = compact(text)
    if not s:
        return []
    if len(s) <= n:
        return [(s, 1.0)]
    return _weighted((s[i : i + n] for i in range(len(s) - n + 1)), binary)


def word_ngrams(tokens: list[str], n: int, *, binary: bool = True) -> list[tuple[str, float]]:
    words = [w for w in tokens if _has_word_char(w)]
    if not words:
        return []
    if len(words) <= n:
        return [("\x1f".join(words), 1.0)]
    return _weighted(("\x1f".join(words[i : i + n]) for i in range(len(words) - n + 1)), binary)


def sentences(text: str, *, binary: bool = True) -> list[tuple[str, float]]:
    return _weighted((c for c in map(compact, _SENTENCE_END.split(text)) if c), binary)


class FeatureExtractor:
    """Builds the (feature, weight) list of one normalized document. Heavy state (jieba's dictionary,
    the IDF table) is loaded once per process and shared."""

    def __init__(self, opts: FeatureOptions, tok_opts: TokenizerOptions) -> None:
        if opts.mode not in MODES:
            raise ValueError(f"unknown feature mode {opts.mode!r}; choose one of {', '.join(MODES)}")
        self.opts = opts
        self._tokenizer: Tokenizer | None = None
        self._table: IdfTable | None = None
        self._binary = opts.shingle_weights == "binary"
        if opts.mode in ("tfidf", "tf", "word_ngram"):
            self._tokenizer = get_tokenizer(tok_opts)
            self._table = load_idf_table(opts.idf_path, opts.stop_words_path)

    def tokens(self, text: str) -> list[str]:
        assert self._tokenizer is not None
        if self.opts.allow_pos:
            allowed = frozenset(self.opts.allow_pos)
            return [w for w, flag in self._tokenizer.cut_pos(text) if flag in allowed]
        return self._tokenizer.cut(text)

    def extract(self, text: str) -> list[tuple[str, float]]:
        mode = self.opts.mode
        if mode == "char_ngram":
            return char_ngrams(text, self.opts.ngram_size, binary=self._binary)
        if mode == "sentences":
            return sentences(text, binary=self._binary)
        assert self._table is not None
        if mode == "word_ngram":
            return word_ngrams(self.tokens(text), self.opts.word_ngram_size, binary=self._binary)
        if mode == "tfidf":
            return tfidf_keywords(self.tokens(text), self._table, self.opts.top_k)
        return term_frequencies(self.tokens(text), self._table.stop_words)
