import jieba.analyse
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_spark.core.batch_text import flat_rows
from simhash_spark.core.features import FeatureOptions
from simhash_spark.core.fingerprint import (
    EMPTY,
    NO_FEATURES,
    NULL_TEXT,
    OK,
    TOO_SHORT,
    TRUNCATED,
    Fingerprinter,
    FingerprintOptions,
    ModelOptions,
)
from simhash_spark.core.hashing import md5_64
from simhash_spark.core.normalize import NormalizeOptions, normalize
from simhash_spark.core.simhash import simhash_reference, to_signed
from tests.textgen import mixed_documents


def test_statuses_per_row():
    fp = Fingerprinter(
        ModelOptions(fingerprint=FingerprintOptions(min_chars=3), normalize=NormalizeOptions(max_chars=50))
    )
    res = fp.batch(
        [None, "", "<p>&nbsp;</p>", "新闻", "，。！？", "北京市政府发布了城市更新方案", "北京" * 100]
    )
    assert res.status == [NULL_TEXT, EMPTY, EMPTY, TOO_SHORT, NO_FEATURES, OK, TRUNCATED]
    # keyword features: a stop word alone leaves no feature
    tfidf = Fingerprinter(ModelOptions(features=FeatureOptions(mode="tfidf")))
    assert tfidf.batch(["，。！的"]).status == [NO_FEATURES]
    assert res.has_fingerprint.tolist() == [False] * 5 + [True, True]
    # n_chars counts letters (the length rules' measure): punctuation alone is 0
    assert res.n_chars.tolist()[:6] == [0, 0, 0, 2, 0, 14] and res.n_chars[6] == 50


def test_fingerprint_equals_article_recipe():
    """The original article: extract_tags(topK=50, withWeight=True), MD5-64 per keyword, weighted voting."""
    docs = mixed_documents(80, seed=5)
    fp = Fingerprinter(
        ModelOptions(features=FeatureOptions(mode="tfidf"), fingerprint=FingerprintOptions(hash="md5_64"))
    )
    res = fp.batch(docs)
    for i, d in enumerate(docs):
        tags = jieba.analyse.extract_tags(normalize(d, NormalizeOptions()).text, topK=50, withWeight=True)
        if not tags:
            assert not res.has_fingerprint[i]
            continue
        expected = simhash_reference([md5_64(w) for w, _ in tags], [x for _, x in tags])
        assert int(res.fingerprint[i]) == int(to_signed(np.array([expected], dtype=np.uint64))[0])


def test_format_only_variants_get_identical_fingerprints():
    fp = Fingerprinter(ModelOptions())
    res = fp.batch(
        [
            "北京市政府今天发布了城市更新方案，计划覆盖１２０个项目。",
            "<p>北京市政府今天发布了城市更新方案,计划覆盖120个项目.</p>",
            "北京市政府今天\u200b发布了城市更新方案，  计划覆盖120个项目。",
        ]
    )
    assert len(set(res.fingerprint.tolist())) == 1


@pytest.mark.parametrize("hash_name", ["mix64", "xxh64"])
def test_exact_duplicates_are_segmented_once_with_identical_results(hash_name):
    docs = mixed_documents(40, seed=8)
    batch = [*docs, *docs, "<p>" + docs[0] + "</p>", None, "", "，。"] * 2
    with_memo = Fingerprinter(ModelOptions(fingerprint=FingerprintOptions(hash=hash_name)))
    without = Fingerprinter(ModelOptions(fingerprint=FingerprintOptions(hash=hash_name, memo_size=0)))
    calls = {"n": 0}
    real = with_memo.hashed_features

    def counting(texts, *rest):
        calls["n"] += len(texts)
        return real(texts, *rest)

    together = with_memo._hash_together

    def counting_together(state, flat, rows):
        calls["n"] += len(rows)
        return together(state, flat, rows)

    with_memo.hashed_features = counting  # type: ignore[method-assign]
    with_memo._hash_together = counting_together  # type: ignore[method-assign]
    a, b = with_memo.batch(batch), without.batch(batch)
    assert a.status == b.status and a.fingerprint.tolist() == b.fingerprint.tolist()
    assert a.n_features.tolist() == b.n_features.tolist()
    # mix64 n-grams: documents normalized a batch at a time (core.batch_text) are hashed, not remembered
    table = with_memo._table
    alone = flat_rows(batch, table, 200_000).alone.tolist() if table else [False] * len(batch)
    texts = [normalize(d, NormalizeOptions()).text if d is not None else "" for d in batch]
    computed = sum(1 for t, a in zip(texts, alone, strict=True) if a and t)
    computed += len({t for t, a in zip(texts, alone, strict=True) if t and not a})
    assert calls["n"] == computed
    assert computed < len(batch) and (hash_name != "mix64" or 0 < sum(alone) < len(batch))
    again = with_memo.batch(batch[:5])  # served from the memo of the previous batch, or recomputed
    assert again.fingerprint.tolist() == b.fingerprint[:5].tolist()
    assert calls["n"] == computed + sum(alone[:5])


def test_memo_is_bounded():
    fp = Fingerprinter(ModelOptions(fingerprint=FingerprintOptions(memo_size=10)))
    fp.batch(mixed_documents(30, seed=3))
    assert len(fp._memo) == 10


@pytest.mark.parametrize("weights", ["binary", "count"])
def test_vectorized_char_ngrams_equal_hashing_each_ngram(weights):
    """The numpy path of char_ngram + mix64 gives the fingerprints of hashing char_ngrams' strings one by one."""
    from simhash_spark.core.features import char_ngrams
    from simhash_spark.core.mix64 import mix64
    from simhash_spark.core.simhash import simhash_batch

    docs = [*mixed_documents(60, seed=12), "短", "五个字符呀", "𠀀𠀁𠀂𠀃𠀄𠀅 emoji 😀😀😀😀😀😀"]
    model = ModelOptions(
        features=FeatureOptions(shingle_weights=weights), fingerprint=FingerprintOptions(memo_size=0)
    )
    got = Fingerprinter(model).batch(docs)
    for i, d in enumerate(docs):
        feats = char_ngrams(normalize(d, NormalizeOptions()).text, 5, binary=weights == "binary")
        want = simhash_batch(
            np.array([mix64(f) for f, _ in feats], dtype=np.uint64),
            np.array([w for _, w in feats], dtype=np.float64),
            [len(feats)],
        )
        assert int(got.n_features[i]) == len(feats)
        assert int(got.fingerprint[i]) == int(to_signed(want)[0])


# Fingerprints are stored in indexes that later runs link against: a change to normalization, features or
# hashing that moves them must be deliberate (a new model), never a side effect of making a step faster.
_PINNED = [
    ("新华社北京12月3日电（记者 王明）国务院总理主持召开常务会议，部署进一步做好稳就业工作。会议指出：“就业是最大的民生。”", "671a6b115c740b86"),
    ("<div class=\"article\"><p>据《人民日报》报道，２０２６年全国粮食产量再创新高——达到１．４万亿斤…</p><script>var a=1;</script></div>", "b4906658aced771a"),
    ("國務院總理主持召開常務會議，部署進一步做好穩就業工作。會議指出，就業是最大的民生。", "a122d8b27a31ed54"),
    ("Spark\u3000作业　在 YARN 上运行；\t结果写入\u200b HDFS（共 3 个分区）【完】", "899c33205e09b1f0"),
    ("Café résumé naïve: e\u0301 ≠ é, 「引用」『嵌套』〈篇名〉〔注〕～①㎡ｶﾀｶﾅ 😀🚀", "1fcdfb02c0b9c6ab"),
    ("The quick brown fox jumps over the lazy dog; SimHash fingerprints near-duplicate texts.", "bdf7fe6222bfadcc"),
    ("短文本", "a31ad72f25e80090"),
    ("  \n\n 空白　\u3000与换行\r\n之间 \x0b 的文字 \u00a0 和不换行空格  ", "628dfd9f3b3f79f7"),
]  # fmt: skip


def test_the_default_model_gives_the_fingerprints_it_always_gave():
    got = Fingerprinter(ModelOptions()).batch([text for text, _ in _PINNED])
    assert [f"{int(v) & (2**64 - 1):016x}" for v in got.fingerprint] == [fp for _, fp in _PINNED]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 30)), max_size=12),
    st.sampled_from([1, 17, 1 << 20]),
    st.booleans(),
)
def test_ngram_hashes_of_texts_apart_in_one_array_equal_one_text_at_a_time(layout, chunk, binary):
    """Texts lying in one array with gaps between them (the letters of rows hashed another way): hashed
    span by span, each text's windows gathered, the same hashes, weights and counts as each text alone."""
    from simhash_spark.core import shingles

    rng = np.random.default_rng(len(layout) * 31 + chunk)
    letters = rng.integers(0x4E00, 0x4E10, sum(g + n for g, n in layout)).astype(np.uint64)
    starts = np.cumsum([g for g, _ in layout]) + np.cumsum([0, *[n for _, n in layout][:-1]])
    lengths = np.array([n for _, n in layout], dtype=np.int64)
    n = 3
    runs = [(s, k) for s, k in zip(starts.tolist(), lengths.tolist(), strict=True) if k > n]
    expected = [shingles.codepoint_ngram_hashes(letters[s : s + k], n, binary=binary) for s, k in runs]
    shingles._CHUNK_CODEPOINTS, saved = chunk, shingles._CHUNK_CODEPOINTS
    try:
        got = shingles.run_ngram_hashes(
            letters,
            np.array([s for s, _ in runs], dtype=np.int64),
            np.array([k for _, k in runs], dtype=np.int64),
            n,
            binary=binary,
        )
    finally:
        shingles._CHUNK_CODEPOINTS = saved
    assert got.counts.tolist() == [len(h) for h, _ in expected]
    assert got.hashes.tolist() == [x for h, _ in expected for x in h.tolist()]
    assert got.weights.tolist() == [x for _, w in expected for x in w.tolist()]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from("甲乙丙丁戊ab1，。 \u0301😀"), max_size=40), max_size=12))
def test_ngram_hashes_of_many_texts_equal_one_text_at_a_time(texts):
    """Hashed back to back in chunks (one code point per chunk, a few, all in one), with the windows that
    straddle two texts dropped: the same hashes and weights as hashing each text alone."""
    from simhash_spark.core import shingles

    kept = [shingles.compact_codepoints(t) for t in texts]
    for n, binary in [(2, True), (5, True), (3, False)]:
        expected = [shingles.codepoint_ngram_hashes(k, n, binary=binary) for k in kept]
        for chunk in (1, 17, 1 << 20):
            shingles._CHUNK_CODEPOINTS, saved = chunk, shingles._CHUNK_CODEPOINTS
            try:
                got = shingles.codepoint_ngram_hashes_many(kept, n, binary=binary)
            finally:
                shingles._CHUNK_CODEPOINTS = saved
            assert [(h.tolist(), w.tolist()) for h, w in got] == [
                (h.tolist(), w.tolist()) for h, w in expected
            ]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.one_of(st.characters(), st.sampled_from("\ud800\udfff_，。１ａ①"))))
def test_the_code_points_compact_keeps_are_those_of_the_compact_text(text):
    from simhash_spark.core.mix64 import codepoints
    from simhash_spark.core.shingles import compact, compact_codepoints, letters

    assert compact_codepoints(text).tolist() == codepoints(compact(text)).tolist()
    assert letters(text) == len(compact(text))
