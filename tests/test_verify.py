import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simhash_spark.core.normalize import NormalizeOptions
from simhash_spark.core.shingles import (
    char_shingles,
    compact,
    edit_similarity,
    hashed_jaccard,
    jaccard,
    shingle_jaccard,
)
from simhash_spark.core.verify import ThresholdPolicy, VerifyOptions, parse_steps, similarities, similarity

NORM = NormalizeOptions()


def test_compact_drops_whitespace_punctuation_and_symbols():
    assert compact("新闻 联播，今天。\n 2024-05！_x") == "新闻联播今天202405x"


def test_char_shingles():
    assert char_shingles("新闻，联播好", 3) == {"新闻联", "闻联播", "联播好"}
    assert char_shingles("新闻", 5) == {"新闻"}
    assert char_shingles(" 。", 5) == set()


def brute_jaccard(a: str, b: str, n: int) -> float:
    sa = {a[i : i + n] for i in range(len(a) - n + 1)} if len(a) > n else ({a} if a else set())
    sb = {b[i : i + n] for i in range(len(b) - n + 1)} if len(b) > n else ({b} if b else set())
    union = sa | sb
    return len(sa & sb) / len(union) if union else 1.0


@given(
    st.text(alphabet="甲乙丙丁戊", max_size=30),
    st.text(alphabet="甲乙丙丁戊", max_size=30),
    st.integers(1, 5),
)
def test_shingle_jaccard_equals_brute_force(a, b, n):
    assert shingle_jaccard(a, b, n) == pytest.approx(brute_jaccard(a, b, n))


@given(
    st.text(alphabet="甲乙丙丁戊 ,.a𠀀", max_size=40),
    st.text(alphabet="甲乙丙丁戊 ,.a𠀀", max_size=40),
    st.integers(1, 5),
)
def test_char_jaccard_measure_equals_the_jaccard_of_ngram_sets(a, b, n):
    """The measure compares hashed n-grams; it must give the Jaccard of the n-gram strings."""
    opts = VerifyOptions(ngram_size=n)
    want = shingle_jaccard(a, b, n)  # a and b are already normalized (no markup, half-width, lowercase)
    assert similarity(a, b, opts, NORM) == pytest.approx(want)


_HASHES = st.sets(
    st.sampled_from([0, 1, 7, 2**32, 2**63 - 1, 2**63, 2**64 - 2, 2**64 - 1]) | st.integers(0, 2**64 - 1)
)


@given(_HASHES, _HASHES)
def test_hashed_jaccard_is_the_jaccard_of_the_hash_sets(a, b):
    """Sorted arrays of distinct uint64 hashes, either one the shorter, empty, or holding values past the
    other's largest."""
    ha, hb = (np.array(sorted(x), dtype=np.uint64) for x in (a, b))
    assert hashed_jaccard(ha, hb) == pytest.approx(jaccard(a, b))
    assert hashed_jaccard(hb, ha) == pytest.approx(jaccard(a, b))


def test_jaccard_bounds():
    assert jaccard(set(), set()) == 1.0
    assert jaccard({"a"}, {"b"}) == 0.0
    assert jaccard({"a", "b"}, {"b", "c"}) == pytest.approx(1 / 3)


def test_edit_similarity():
    assert edit_similarity("今天天气很好", "今天天气很好！") == 1.0  # punctuation does not count
    assert edit_similarity("今天天气很好", "今天天气不好") == pytest.approx(5 / 6)
    assert edit_similarity("abc", "xyz") == 0.0


def test_similarity_normalizes_first():
    opts = VerifyOptions()
    a = "<p>国务院总理李强１２日主持召开国务院常务会议，研究部署相关工作。</p>"
    b = "国务院总理李强12日主持召开国务院常务会议, 研究部署相关工作."
    assert similarity(a, b, opts, NORM) == 1.0
    assert similarity(a, "完全不同的另一段文字内容", opts, NORM) == 0.0
    assert list(similarities([a, None], [b, b], opts, NORM)) == [1.0, 0.0]


def test_threshold_policy_by_length_of_shorter_document():
    p = ThresholdPolicy(12, ((0, 14), (100, 12), (2000, 11)))
    assert p.largest == 14
    assert [p.k_for_length(n) for n in (0, 99, 100, 1999, 2000, 10**6)] == [14, 14, 12, 12, 11, 11]
    q = ThresholdPolicy(5, ((100, 3),))
    assert q.k_for_length(50) == 5 and q.k_for_length(100) == 3 and q.largest == 5


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("x", "list"),
        ([[0, 1, 2]], "[from_chars, k]"),
        ([[0, -1]], "non-negative"),
        ([[100, 3], [0, 5]], "increasing"),
        ([[0, 3], [0, 5]], "increasing"),
        ([[0, True]], "integers"),
    ],
)
def test_parse_steps_rejects(value, problem):
    with pytest.raises(ValueError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        parse_steps(value)


# --- short texts ---------------------------------------------------------------------------------------


def test_short_texts_are_fingerprinted_and_checked_on_their_own_n():

    from simhash_spark.config import load_config
    from simhash_spark.core.fingerprint import Fingerprinter
    from simhash_spark.core.shingles import ShortTextOptions, char_ngram_hashes, letters
    from simhash_spark.core.simhash import simhash_batch, to_signed

    cfg = load_config(overrides=["short_texts.below_letters=30", "short_texts.ngram_size=2"])
    short = "床前明月光，疑是地上霜。举头望明月，低头思故乡。"  # 20 letters, punctuation not counted
    long = "新华社北京电 国务院总理今天主持召开常务会议，部署进一步做好稳就业工作，会议指出就业是最大的民生。"
    assert letters(short) == 20 and letters(long) >= 30
    got = Fingerprinter(cfg.model).batch([short, long])
    h2, w2 = char_ngram_hashes(short, 2)
    assert int(got.fingerprint[0]) == int(to_signed(simhash_batch(h2, w2, [len(h2)]))[0])
    assert int(got.fingerprint[1]) == int(Fingerprinter(load_config().model).batch([long]).fingerprint[0])
    assert got.n_chars.tolist() == [20, letters(long)]

    opts, norm = cfg.verify, cfg.normalize
    on = ShortTextOptions(below_letters=30, ngram_size=2)
    edited = short.replace("霜", "雪")  # one letter of 20
    assert similarity(short, edited, opts, norm) == pytest.approx(shingle_jaccard(short, edited, 5))
    assert similarity(short, edited, opts, norm, on) == pytest.approx(shingle_jaccard(short, edited, 2))
    assert shingle_jaccard(short, edited, 2) == pytest.approx(0.8) and shingle_jaccard(short, edited, 5) < 0.6
    # a pair of a short and a long text is checked on the short n (its shorter text's), both ways
    assert similarity(short, long, opts, norm, on) == similarity(long, short, opts, norm, on)
    assert similarity(long, long + "。", opts, norm, on) == 1.0


def test_the_text_check_reads_the_input_texts_once(spark):
    """Few candidates: their documents' texts are taken from the input for both ends of every pair. Read
    from the input once (persisted), not once per end: on a large input each read is a scan of every
    text. Counted by an accumulator in the input's own plan, during the verify stage only."""
    from contextlib import contextmanager

    from simhash_spark.config import load_config
    from simhash_spark.context import RunContext
    from simhash_spark.demo.corpus import generate
    from simhash_spark.pipeline import dedup

    pdf = generate(80, seed=12).to_pandas()[["id", "text"]]
    rows_read = spark.sparkContext.accumulator(0)

    def counted(batches):
        for batch in batches:
            rows_read.add(len(batch))
            yield batch

    raw = spark.createDataFrame(pdf).repartition(3).mapInPandas(counted, schema="id string, text string")
    per_stage: dict[str, int] = {}

    class Counting(RunContext):
        @contextmanager
        def stage(self, name):
            before = rows_read.value
            with super().stage(name):
                yield
            per_stage[name] = rows_read.value - before

    cfg = load_config(overrides=["cluster.local_max_documents=0"])
    res = dedup(spark, raw, cfg, ctx=Counting())
    assert res.stats["verify"]["passed"] > 0
    assert per_stage["verify"] == len(pdf)
    res.unpersist()
