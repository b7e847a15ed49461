"""Weighted features of a normalized document (pure Python).

Modes:
- ``tfidf``: jieba TF-IDF keywords, computed exactly as ``jieba.analyse.extract_tags(topK, withWeight=True)``
  does (same IDF table, median IDF for unknown words, stop words, order of ties) but over tokens from any
  backend, so a faster tokenizer yields the same keywords.
- ``tf``: every token that carries a letter, digit or ideograph, weighted by its count.
- ``char_ngram``: overlapping character n-grams of the text without spaces, weighted by count; needs no
  segmentation and suits short texts.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from operator import itemgetter

from simhash_spark.core.tokenize import Tokenizer, TokenizerOptions, get_tokenizer

MODES = ("tfidf", "tf", "char_ngram")


@dataclass(frozen=True)
class FeatureOptions:
    mode: str = "tfidf"
    top_k: int = 50
    idf_path: str = ""
    stop_words_path: str = ""
    allow_pos: tuple[str, ...] = ()
    ngram_size: int = 4


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


def char_ngrams(text: str, n: int) -> list[tuple[str, float]]:
    compact = "".join(text.split())
    if not compact:
        return []
    if len(compact) <= n:
        return [(compact, 1.0)]
    freq: dict[str, float] = {}
    for i in range(len(compact) - n + 1):
        g = compact[i : i + n]
        freq[g] = freq.get(g, 0.0) + 1.0
    return list(freq.items())


class FeatureExtractor:
    """Builds the (feature, weight) list of one normalized document. Heavy state (jieba's dictionary,
    the IDF table) is loaded once per process and shared."""

    def __init__(self, opts: FeatureOptions, tok_opts: TokenizerOptions) -> None:
        if opts.mode not in MODES:
            raise ValueError(f"unknown feature mode {opts.mode!r}; choose one of {', '.join(MODES)}")
        self.opts = opts
        self._tokenizer: Tokenizer | None = None
        self._table: IdfTable | None = None
        if opts.mode != "char_ngram":
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
            return char_ngrams(text, self.opts.ngram_size)
        assert self._table is not None
        if mode == "tfidf":
            return tfidf_keywords(self.tokens(text), self._table, self.opts.top_k)
        return term_frequencies(self.tokens(text), self._table.stop_words)
