"""Word segmentation backends (pure Python).

A backend turns normalized text into tokens. The jieba backend is the reference: everything else must
reproduce its output exactly, because fingerprints from different backends are compared with each other.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

log = logging.getLogger(__name__)


class Tokenizer(Protocol):
    name: str

    def cut(self, text: str) -> list[str]: ...

    def cut_pos(self, text: str) -> list[tuple[str, str]]: ...


@dataclass(frozen=True)
class TokenizerOptions:
    backend: str = "fast"
    user_dict_path: str = ""


class JiebaTokenizer:
    """jieba's own ``Tokenizer`` (accurate mode, HMM on: what ``extract_tags`` uses)."""

    name = "jieba"

    def __init__(self, user_dict_path: str = "") -> None:
        import jieba
        import jieba.posseg

        jieba.setLogLevel(logging.WARNING)
        self._tok = jieba.Tokenizer()
        self._tok.initialize()
        if user_dict_path:
            with open(user_dict_path, "rb") as fh:  # jieba leaves a file it opens itself open
                self._tok.load_userdict(fh)
        self._pos = jieba.posseg.POSTokenizer(self._tok)

    def cut(self, text: str) -> list[str]:
        return self._tok.lcut(text)

    def cut_pos(self, text: str) -> list[tuple[str, str]]:
        return [(p.word, p.flag) for p in self._pos.cut(text)]


# The ASCII characters of jieba's han blocks (re_han_default: \u4e00-\u9fd5 plus these).
_HAN_ASCII = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+#&._%-")
_USERDICT_LINE = re.compile("^(.+?)( [0-9]+)?( [a-z]+)?$")
# A word no text contains (two Unicode noncharacters) that carries the frequency difference between the
# two dictionaries' totals, see FastTokenizer._load_userdict.
_TOTAL_BALANCE_WORD = "\ufdd0\ufdd1"


class FastTokenizer:
    """jieba-identical segmentation at several times the speed.

    jieba-rs (through ``rjieba``) computes the dictionary route with the HMM off, which equals jieba's own
    HMM-off output. jieba's HMM then only touches runs of consecutive single-character route steps that
    are not dictionary words; those runs are recovered from the HMM-off tokens (a single character, or a
    run of letters/digits that jieba's HMM-off mode merges) and passed to jieba's own HMM
    (``jieba.finalseg``), memoized. The Python jieba dictionary is loaded too: its frequencies decide, as
    in jieba, whether a run goes to the HMM, and user words get the frequency jieba would give them.
    """

    name = "fast"

    def __init__(self, user_dict_path: str = "") -> None:
        import jieba.finalseg
        import rjieba

        self._py = JiebaTokenizer(user_dict_path="")
        self._rs = rjieba.Jieba()
        self._finalseg_cut = jieba.finalseg.cut
        if user_dict_path:
            self._load_userdict(user_dict_path)
        self._freq = self._py._tok.FREQ
        self._hmm = lru_cache(maxsize=200_000)(self._hmm_uncached)

    def _load_userdict(self, path: str) -> None:
        """jieba's ``load_userdict``, word by word into both dictionaries with the same frequencies.

        jieba adds a re-added word's frequency to its total without removing the old one; jieba-rs keeps
        its total exact. The difference is added back to jieba-rs on a word no text contains, so both
        compute the same route probabilities.
        """
        py = self._py._tok
        missing_in_rs_total = 0
        with open(path, "rb") as fh:
            for ln in fh:
                line = ln.strip().decode("utf-8").lstrip("\ufeff")
                if not line:
                    continue
                m = _USERDICT_LINE.match(line)
                assert m is not None
                word, freq, tag = m.groups()
                missing_in_rs_total += py.FREQ.get(word, 0)
                py.add_word(word, freq.strip() if freq else None, tag.strip() if tag else None)
                self._rs.add_word(word, py.FREQ[word], tag.strip() if tag else None)
        if missing_in_rs_total:
            self._rs.add_word(_TOTAL_BALANCE_WORD, missing_in_rs_total, None)

    def _hmm_uncached(self, run: str) -> tuple[str, ...]:
        return tuple(self._finalseg_cut(run))

    def _flush(self, buf: str, out: list[str]) -> None:
        """jieba's handling of a run of single-character route steps."""
        if len(buf) == 1:
            out.append(buf)
        elif not self._freq.get(buf):
            out.extend(self._hmm(buf))
        else:
            out.extend(buf)

    def cut(self, text: str) -> list[str]:
        out: list[str] = []
        append = out.append
        freq = self._freq
        han_ascii = _HAN_ASCII
        buf = ""
        for tok in self._rs.cut(text, False):
            if len(tok) == 1:
                # a single-character route step inside a han block (jieba's re_han_default)
                if "\u4e00" <= tok <= "\u9fd5" or tok in han_ascii:
                    buf += tok
                    continue
            elif tok.isascii() and tok.isalnum() and not freq.get(tok):
                buf += tok  # letters/digits that HMM-off mode merged from single-character route steps
                continue
            if buf:
                self._flush(buf, out)
                buf = ""
            append(tok)
        if buf:
            self._flush(buf, out)
        return out

    def cut_pos(self, text: str) -> list[tuple[str, str]]:
        # POS tagging stays on jieba's own tagger (allowPOS is the slow, optional path)
        return self._py.cut_pos(text)


def fast_available() -> bool:
    try:
        import rjieba  # noqa: F401
    except ImportError:
        return False
    return True


@lru_cache(maxsize=4)
def get_tokenizer(opts: TokenizerOptions) -> Tokenizer:
    """One tokenizer per process and options: building jieba's prefix dictionary takes about a second."""
    if opts.backend == "fast":
        if fast_available():
            return FastTokenizer(opts.user_dict_path)
        log.warning(
            "tokenizer.backend='fast' needs the rjieba package, which is not installed; using 'jieba'"
        )
        return JiebaTokenizer(opts.user_dict_path)
    if opts.backend == "jieba":
        return JiebaTokenizer(opts.user_dict_path)
    raise ValueError(f"unknown tokenizer backend {opts.backend!r}")
