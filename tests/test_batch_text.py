"""The batch normalization (core.batch_text, core.char_table) agrees with ``normalize`` document by
document, and the fingerprinter and the text check give the same results with it and without it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_spark.core.batch_text import flat_rows
from simhash_spark.core.char_table import CharTable
from simhash_spark.core.check_filter import PREFIX, SKETCH, CheckFilter
from simhash_spark.core.fingerprint import Fingerprinter, ModelOptions
from simhash_spark.core.normalize import NormalizeOptions, normalize
from simhash_spark.core.shingles import SHORT_TEXTS_OFF, ShortTextOptions, compact_codepoints
from simhash_spark.core.verify import VerifyOptions, similarities, similarity

# pieces real documents and adversarial ones are made of: CJK, Latin, full-width forms, punctuation NFKC
# keeps, whitespace of every kind, invisible and format characters, combining marks and what they compose
# with, Hangul jamo, the Greek sigma, ligatures and squared words, markup, surrogates
_PIECES = [
    "新闻", "转载", "中华人民共和国", "abc", "ABC", "Σ", "ΣΑΣ", "σ", "İ", "ß", "ﬁ", "㍻", "①", "⑴", "Ａ１",
    "，", "。", "“", "”", "…", "—", "《", "》", " ", "  ", "\t", "\n", "\u3000", "\u00a0", "\x1c", "\u2028",
    "\u200b", "\ufeff", "\u202e", "\x00", "\ufe0f", "e\u0301", "\u0301", "\u0308", "\u1100\u1161",
    "\u1161", "\u11a8", "가", "\u0b47\u0b3e", "\u0f73", "¨", "<p>", "</p>", "<", "&amp;", "&", "a < b",
    "<!--", "-->", "\ud800", "_", "٣", "ℌ", "ǅ",
]  # fmt: skip

_texts = st.lists(st.one_of(st.sampled_from(_PIECES), st.text(max_size=6)), max_size=12).map("".join)


def _letters_if_decided(text: str | None, opts: NormalizeOptions, min_chars: int) -> list[int] | None:
    """The letters ``flat_rows`` must give for a document it may normalize: one ``normalize`` neither
    truncates nor finds empty or too short; else None."""
    if text is None:
        return None
    norm = normalize(text, opts)
    if norm.truncated or len(norm.text) < max(1, min_chars):
        return None
    return compact_codepoints(norm.text).tolist()


_OPTIONS = [
    NormalizeOptions(),
    NormalizeOptions(strip_html=False, unify_punctuation=False),
    NormalizeOptions(nfkc=False, lowercase=False),
    NormalizeOptions(cjk_only=True),
    NormalizeOptions(max_chars=8),
]


@pytest.mark.parametrize("opts", _OPTIONS, ids=range(len(_OPTIONS)))
@settings(max_examples=300, deadline=None)
@given(texts=st.lists(st.one_of(st.none(), _texts), max_size=8), min_chars=st.sampled_from([1, 4]))
def test_every_document_normalized_in_batch_agrees_with_normalize(opts, texts, min_chars):
    rows = flat_rows(texts, CharTable(opts), opts.max_chars, min_chars)
    for i, text in enumerate(texts):
        if rows.alone[i]:
            assert rows.kept[i].tolist() == _letters_if_decided(text, opts, min_chars), repr(text)
        else:
            assert len(rows.kept[i]) == 0


def test_plain_documents_are_normalized_in_batch_and_the_rest_by_normalize():
    table = CharTable(NormalizeOptions(max_chars=12))
    texts = [
        "全角ＡＢＣ，标点。 空格\u3000\u200b",
        None,
        "<p>标签</p>",
        "e\u0301",
        "ΣΑΣ",
        "x" * 13,
        "",
        "，。",
    ]
    rows = flat_rows(texts, table, 12)
    # too long to be sure of (13 raw characters may become more than 12), or no letter: empty or too short
    assert rows.alone.tolist() == [False, False, False, False, False, False, False, False]
    texts[0] = "全角ＡＢＣ，标点"
    rows = flat_rows(texts, table, 12)
    assert rows.alone.tolist()[0] and rows.kept[0].tolist() == [ord(c) for c in "全角abc标点"]
    assert table.max_length == 1  # "，" and "。" became "," and "."
    assert not flat_rows(["…" * 5], table, 12).alone[0] and table.max_length == 3  # "..." each


def test_long_batches_are_looked_up_in_groups(monkeypatch):
    import simhash_spark.core.batch_text as batch_text

    monkeypatch.setattr(batch_text, "_GROUP_CODEPOINTS", 7)
    texts = ["第一篇 文章", "x" * 30, None, "三", "第四篇文章。"]
    rows = flat_rows(texts, CharTable(NormalizeOptions()), 200_000)
    assert rows.alone.tolist() == [True, True, False, True, True]
    for i, text in enumerate(texts):
        if text is not None:
            assert rows.kept[i].tolist() == _letters_if_decided(text, NormalizeOptions(), 1)


@given(st.lists(st.lists(st.booleans(), max_size=6), max_size=8))
def test_per_row_sums_count_each_rows_flags_with_empty_rows_anywhere(rows):
    from simhash_spark.core.batch_text import _per_row_sums

    flags = np.array([f for row in rows for f in row], dtype=bool)
    lengths = np.array([len(row) for row in rows], dtype=np.int64)
    assert _per_row_sums(flags, lengths, np.cumsum(lengths)).tolist() == [sum(row) for row in rows]


_MODELS = [
    (ModelOptions(), None),
    (ModelOptions(), CheckFilter(SKETCH, 0.8)),
    (replace(ModelOptions(), short_texts=ShortTextOptions(below_letters=6)), CheckFilter(SKETCH, 0.8)),
    (replace(ModelOptions(), normalize=NormalizeOptions(max_chars=20)), CheckFilter(PREFIX, 0.8)),
]


@pytest.mark.parametrize(("model", "check"), _MODELS, ids=["default", "sketch", "short_texts", "max_chars"])
@settings(max_examples=200, deadline=None)
@given(texts=st.lists(st.one_of(st.none(), _texts), max_size=10))
def test_fingerprints_are_the_same_with_and_without_the_batch_normalization(model, check, texts):
    """Fingerprints, statuses, counts and the check's summaries: the documents hashed straight from the
    batch's letters against every document normalized and hashed one by one."""
    batched, one_by_one = Fingerprinter(model, check), Fingerprinter(model, check)
    one_by_one._table = None
    texts = texts + texts[:3]  # repeats: the memo and in-batch copies of the one-by-one path
    a, b = batched.batch(texts), one_by_one.batch(texts)
    assert a.status == b.status
    for name in ("fingerprint", "has_fingerprint", "n_chars", "n_features"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert a.check_summary == b.check_summary


_SHORT = ShortTextOptions(below_letters=8)


@pytest.mark.parametrize("short", [SHORT_TEXTS_OFF, _SHORT], ids=["long", "short_texts"])
@pytest.mark.parametrize("norm", [NormalizeOptions(), NormalizeOptions(max_chars=12)], ids=["default", "cap"])
@settings(max_examples=150, deadline=None)
@given(pairs=st.lists(st.tuples(st.one_of(st.none(), _texts), st.one_of(st.none(), _texts)), max_size=8))
def test_batch_similarities_equal_each_pairs_similarity(short, norm, pairs):
    texts_a = [a for a, _ in pairs] + ["同一篇新闻稿件的正文" * 3]
    texts_b = [b for _, b in pairs] + ["同一篇新闻稿件的正文" * 3 + "，转载"]
    opts = VerifyOptions()
    got = similarities(texts_a, texts_b, opts, norm, short)
    want = [
        0.0 if a is None or b is None else similarity(a, b, opts, norm, short)
        for a, b in zip(texts_a, texts_b, strict=True)
    ]
    assert got.tolist() == want
