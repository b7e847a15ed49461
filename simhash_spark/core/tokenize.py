"""Word segmentation backends (pure Python).

A backend turns normalized text into tokens. The jieba backend is the reference: everything else must
reproduce its output exactly, because fingerprints from different backends are compared with each other.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol


class Tokenizer(Protocol):
    name: str

    def cut(self, text: str) -> list[str]: ...

    def cut_pos(self, text: str) -> list[tuple[str, str]]: ...


@dataclass(frozen=True)
class TokenizerOptions:
    backend: str = "jieba"
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
            self._tok.load_userdict(user_dict_path)
        self._pos = jieba.posseg.POSTokenizer(self._tok)

    def cut(self, text: str) -> list[str]:
        return self._tok.lcut(text)

    def cut_pos(self, text: str) -> list[tuple[str, str]]:
        return [(p.word, p.flag) for p in self._pos.cut(text)]


@lru_cache(maxsize=4)
def get_tokenizer(opts: TokenizerOptions) -> Tokenizer:
    """One tokenizer per process and options: building jieba's prefix dictionary takes about a second."""
    if opts.backend == "jieba":
        return JiebaTokenizer(opts.user_dict_path)
    raise ValueError(f"unknown tokenizer backend {opts.backend!r}")
