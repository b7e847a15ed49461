"""The fast backend reproduces jieba exactly: tokens, keywords and fingerprints."""

import pytest

from simhash_spark.core.fingerprint import Fingerprinter, ModelOptions
from simhash_spark.core.normalize import NormalizeOptions, normalize
from simhash_spark.core.tokenize import FastTokenizer, JiebaTokenizer, TokenizerOptions, get_tokenizer
from tests.textgen import mixed_documents

RAW = mixed_documents(400, seed=21)
# what the job feeds the tokenizer, and the raw texts too (upper case, full width, HTML left in)
TEXTS = [normalize(d, NormalizeOptions()).text for d in RAW] + RAW[:150]
EDGE = [
    "",
    " ",
    "a",
    "中",
    "abc123 def 中文abc中文 123.45% C++ x86_64 v2.3.1 e-mail h&m 3.5亿",
    "我爱北京天安门。。。！！！???",
    "哈哈哈哈哈哈哈哈哈哈哈哈哈哈哈哈哈哈",
    "龘靐齉齾爩鱻麤龗灪龖厵",
    "😀😀中文😀abc😀",
    "ｆｕｌｌ－ｗｉｄｔｈ １２３ 全角",
    "\u3000\u3000段落\n\n第二段\t制表",
    "他说：“这是一个测试”——真的吗？（是的）",
    "1234567890abcdefghijklmnopqrstuvwxyz",
    "ＡＢＣ中国ＤＥＦ",
    "一九九八年十二月三十一日，江泽民主席发表新年讲话",
]


def test_tokens_identical_on_generated_corpus():
    jb = JiebaTokenizer()
    fast = FastTokenizer()
    for text in TEXTS + EDGE:
        assert fast.cut(text) == jb.cut(text), text[:80]


def test_user_dictionary_applies_identically(tmp_path):
    userdict = tmp_path / "user.txt"
    # new words with and without frequency and tag, words already in jieba's dictionary (their frequency
    # changes jieba's total differently from jieba-rs), a repeated word, a zero-frequency (force split) word
    userdict.write_text(
        "\ufeff相关指标 50000 n\n统筹考虑\n城市更新 3\n北京 100\n北京 200 ns\n元宇宙 2000 nz\n高于预期 0\n"
        "中心 90000000\n中心 90000000\n",
        encoding="utf-8",
    )
    jb = JiebaTokenizer(str(userdict))
    fast = FastTokenizer(str(userdict))
    # same dictionary total in both (route probabilities depend on it): suggest_freq reads it
    for seg in ("的人", "中国人民", "北京大学"):
        assert fast._rs.suggest_freq(seg) == jb._tok.suggest_freq(seg)
    seen = 0
    for text in TEXTS + EDGE:
        a = jb.cut(text)
        assert fast.cut(text) == a, text[:80]
        seen += "相关指标" in a
    assert seen > 0


def test_fingerprints_and_keywords_identical():
    ref = Fingerprinter(ModelOptions(tokenizer=TokenizerOptions(backend="jieba")))
    fast = Fingerprinter(ModelOptions(tokenizer=TokenizerOptions(backend="fast")))
    docs = RAW + EDGE
    a, b = ref.batch(docs), fast.batch(docs)
    assert a.status == b.status
    assert a.fingerprint[a.has_fingerprint].tolist() == b.fingerprint[b.has_fingerprint].tolist()
    for text in TEXTS[:100]:
        assert ref.extractor.extract(text) == fast.extractor.extract(text)


def test_fallback_to_jieba_when_rjieba_is_missing(monkeypatch, caplog):
    import builtins

    real_import = builtins.__import__

    def no_rjieba(name, *args, **kwargs):
        if name == "rjieba":
            raise ImportError("no rjieba")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_rjieba)
    get_tokenizer.cache_clear()
    try:
        with caplog.at_level("WARNING"):
            tok = get_tokenizer(TokenizerOptions(backend="fast", user_dict_path=""))
        assert tok.name == "jieba"
        assert "rjieba" in caplog.text
    finally:
        get_tokenizer.cache_clear()


@pytest.mark.parametrize("backend", ["jieba", "fast"])
def test_backend_names(backend):
    assert get_tokenizer(TokenizerOptions(backend=backend)).name == backend
