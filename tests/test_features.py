import jieba
import jieba.analyse
import pytest
from jieba.analyse.tfidf import TFIDF

from simhash_spark.core.features import FeatureExtractor, FeatureOptions, char_ngrams, term_frequencies
from simhash_spark.core.normalize import NormalizeOptions, normalize
from simhash_spark.core.tokenize import TokenizerOptions
from tests.textgen import mixed_documents

DOCS = [normalize(d, NormalizeOptions()).text for d in mixed_documents(300, seed=11)]


def extractor(**kw) -> FeatureExtractor:
    tok = {k: kw.pop(k) for k in list(kw) if k == "user_dict_path"}
    return FeatureExtractor(FeatureOptions(**{"mode": "tfidf", **kw}), TokenizerOptions(**tok))


@pytest.mark.parametrize("top_k", [20, 50, 0])
def test_tfidf_keywords_identical_to_jieba_extract_tags(top_k):
    ex = extractor(top_k=top_k)
    for text in DOCS:
        assert ex.extract(text) == jieba.analyse.extract_tags(text, topK=top_k, withWeight=True)


def test_custom_idf_stop_words_and_user_dict_match_jieba(tmp_path):
    idf = tmp_path / "idf.txt"
    idf.write_text("北京 1.5\n上海 9.0\n项目 0.1\n城市更新 20.0\n", encoding="utf-8")
    stop = tmp_path / "stop.txt"
    stop.write_text("表示\n记者\n", encoding="utf-8")
    userdict = tmp_path / "user.txt"
    userdict.write_text("相关指标 50000 n\n统筹考虑 50000\n", encoding="utf-8")
    ex = extractor(idf_path=str(idf), stop_words_path=str(stop), user_dict_path=str(userdict))
    ref = TFIDF(str(idf))
    ref.set_stop_words(str(stop))
    ref.tokenizer = jieba.Tokenizer()
    with userdict.open("rb") as fh:  # jieba leaves a file it opens itself open
        ref.tokenizer.load_userdict(fh)
    seen_user_word = False
    for text in DOCS:
        got = ex.extract(text)
        assert got == ref.extract_tags(text, topK=50, withWeight=True)
        words = {w for w, _ in got}
        assert not words & {"表示", "记者"}
        seen_user_word |= "相关指标" in words
    assert seen_user_word


def test_allow_pos_matches_jieba():
    ex = extractor(allow_pos=("n", "v", "vn", "ns"))
    for text in DOCS[:60]:
        assert ex.extract(text) == jieba.analyse.extract_tags(
            text, topK=50, withWeight=True, allowPOS=("n", "v", "vn", "ns")
        )


def test_tf_mode_counts_tokens_without_punctuation_or_stop_words():
    feats = dict(term_frequencies(["北京", "，", "北京", " ", "the", "上海", "a"], frozenset({"the"})))
    assert feats == {"北京": 2.0, "上海": 1.0, "a": 1.0}
    ex = extractor(mode="tf")
    out = dict(ex.extract("北京的天气，北京的人"))
    assert out["北京"] == 2.0 and "，" not in out


def test_char_ngrams():
    assert char_ngrams("新闻 联播好", 3) == [("新闻联", 1.0), ("闻联播", 1.0), ("联播好", 1.0)]
    assert char_ngrams("新闻", 4) == [("新闻", 1.0)]
    assert char_ngrams("   ", 4) == []
    assert dict(char_ngrams("哈哈哈哈", 2)) == {"哈哈": 1.0}


def test_unknown_mode_rejected():
    with pytest.raises(ValueError, match="unknown feature mode"):
        extractor(mode="magic")


def test_shingle_modes():
    from simhash_spark.core.features import sentences, word_ngrams

    assert char_ngrams("新闻，联播好", 3) == [("新闻联", 1.0), ("闻联播", 1.0), ("联播好", 1.0)]
    assert dict(char_ngrams("哈哈哈哈", 2, binary=False)) == {"哈哈": 3.0}
    assert word_ngrams(["今天", "，", "天气", "很", "好"], 2) == [
        ("今天\x1f天气", 1.0),
        ("天气\x1f很", 1.0),
        ("很\x1f好", 1.0),
    ]
    assert word_ngrams(["今天", "好"], 3) == [("今天\x1f好", 1.0)]
    assert sentences("第一句. 第二句!\n第一句.;") == [("第一句", 1.0), ("第二句", 1.0)]
    assert sentences("第一句. 第一句.", binary=False) == [("第一句", 2.0)]


@pytest.mark.parametrize("mode", ["word_ngram", "sentences", "char_ngram"])
def test_shingle_modes_through_the_extractor(mode):
    ex = FeatureExtractor(FeatureOptions(mode=mode), TokenizerOptions())
    feats = ex.extract("国务院总理李强主持召开国务院常务会议. 研究部署相关工作.")
    assert feats and all(w == 1.0 for _, w in feats)
