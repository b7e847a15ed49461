import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_spark.core.normalize import NormalizeOptions, normalize, strip_html

OPTS = NormalizeOptions()


def n(text: str, **kw) -> str:
    return normalize(text, NormalizeOptions(**kw) if kw else OPTS).text


def test_html_tags_scripts_comments_and_entities():
    html = '<div class="a"><script>var x = "新闻";</script><!-- c --><p>北京&amp;上海</p><br/>天津&#183;&lt;b&gt;</div>'
    assert n(html) == "北京&上海 天津·<b>"


def test_bare_less_than_is_not_a_tag():
    assert strip_html("a < b and c > d") == "a < b and c > d"


def test_full_width_to_half_width_and_lowercase():
    assert n("ＡＢＣ１２３％ Ｈｅｌｌｏ") == "abc123% hello"


def test_chinese_punctuation_unified():
    assert n("你好，世界。“引号”《书名》【注】——完…") == '你好,世界."引号"<书名>[注]--完...'
    # the two ways of writing the same sentence normalize identically
    assert n("今天，下雨了。") == n("今天,下雨了.")


def test_control_and_invisible_characters_dropped():
    assert n("新\u200b闻\ufeff联\u00ad播\x07") == "新闻联播"
    assert n("a\tb\r\nc\x0bd") == "a b c d"
    assert n("好\ufe0f的") == "好的"


def test_whitespace_collapsed():
    assert n("  新闻 \n\n\t 联播  ") == "新闻 联播"


def test_cjk_only_filter():
    assert n("Hello 新闻, 2024 联播!", cjk_only=True) == "新闻联播"


def test_options_can_be_switched_off():
    raw = "<b>ＡＢ。</b>"
    assert n(raw, strip_html=False, nfkc=False, unify_punctuation=False, lowercase=False) == raw


def test_max_chars_truncates_and_flags():
    out = normalize("新闻" * 100, NormalizeOptions(max_chars=10))
    assert out.text == "新闻" * 5 and out.truncated
    assert not normalize("新闻", NormalizeOptions(max_chars=10)).truncated


def test_giant_document_is_capped_before_the_expensive_steps():
    out = normalize("<p>" + "字" * 5_000_000, NormalizeOptions(max_chars=1000))
    assert out.truncated and len(out.text) == 1000


def test_empty_and_markup_only():
    assert n("") == ""
    assert n("<p> </p>&nbsp;") == ""


_MIXED = st.text(
    alphabet=st.one_of(
        st.characters(),  # anything, controls and unassigned code points included
        st.sampled_from(
            "，。！？：；（）　ＡＢｃ１２\u200b\ufeff\u202e\ufe0f\U000e0101\u3000\n\t\x00\x7f中文字"
            "《》“”「」…‥｡､－～・\u2011\u0338\u0301"
        ),
    ),
    max_size=60,
)


@settings(max_examples=400, deadline=None)
@given(_MIXED)
def test_fast_paths_equal_the_plain_steps(text):
    """The quick checks (printable, full-width map + is_normalized) only skip work, never change it."""
    import unicodedata

    from simhash_spark.core import normalize as N

    assert N._remove_invisible(text) == N._invisible().sub("", text)
    assert N._nfkc(text) == unicodedata.normalize("NFKC", text)
    assert N._unify_punctuation(text) == text.translate(str.maketrans(N._PUNCTUATION))


def test_every_whitespace_character_collapses_to_one_space():
    import re
    import sys

    spaces = [
        chr(cp) for cp in range(sys.maxunicode + 1) if re.fullmatch(r"\s", chr(cp)) or chr(cp).isspace()
    ]
    assert len(spaces) > 20
    for space in spaces:
        assert n(f"{space}新闻{space}{space}联播{space}") == "新闻 联播", hex(ord(space))


@pytest.mark.parametrize(
    ("html_text", "expected"),
    [
        ("今日要闻<!-- 广告位 第一篇正文", "今日要闻 广告位 第一篇正文"),  # unterminated comment
        ("前文<!-- 注释 -->后文", "前文 后文"),
        ("<a title=\"a>b\" href='x>y'>正文</a>", "正文"),  # ">" inside attribute values
        ("<![CDATA[正文内容]]>结尾", "正文内容 结尾"),  # feeds wrap article text in CDATA
        ("<![CDATA[未闭合的正文", "未闭合的正文"),
        ("<script>var a = 1;</script>正文", "正文"),
        ("<script>未闭合的脚本 正文", "未闭合的脚本 正文"),  # unterminated script: its text stays
        ('<style>p{}</style>正文<div class="x', '正文<div class="x'),  # unterminated tag at the end
        ("<!DOCTYPE html><p>正文</p>", "正文"),
        ("a < b 且 c > d", "a < b 且 c > d"),
    ],
)
def test_malformed_html_never_swallows_text(html_text, expected):
    assert " ".join(strip_html(html_text).split()) == expected


# --- traditional and simplified ------------------------------------------------------------------------

SIMPLIFIED = (
    "国务院总理主持召开常务会议，部署进一步做好稳就业工作。会议指出，就业是最大的民生，里面的问题要解决。"
)
TRADITIONAL = (
    "國務院總理主持召開常務會議，部署進一步做好穩就業工作。會議指出，就業是最大的民生，裡面的問題要解決。"
)


@pytest.mark.parametrize("direction", ["t2s", "s2t"])
def test_both_scripts_of_one_text_normalize_the_same(direction):
    assert n(SIMPLIFIED) != n(TRADITIONAL)  # without a conversion they share few characters
    assert n(SIMPLIFIED, variants=direction) == n(TRADITIONAL, variants=direction)
    assert n(TRADITIONAL, variants="t2s") == n(SIMPLIFIED)


@pytest.mark.parametrize("direction", ["t2s", "s2t"])
def test_variant_characters_fold_with_their_standard_form(direction):
    from simhash_spark.core.normalize import VARIANT_CHARACTERS

    for variant, standard in VARIANT_CHARACTERS.items():
        assert n(variant, variants=direction) == n(standard, variants=direction), (variant, standard)
    # the variants OpenCC itself folds, and the ones it leaves (衞, 姪 and 眞 under s2t)
    assert n("山峯的羣衆衞生眞姪", variants=direction) == n("山峰的群众卫生真侄", variants=direction)


def test_variants_none_leaves_the_script_and_ascii_is_untouched():
    assert n(TRADITIONAL, variants="none") == n(TRADITIONAL)
    assert n("Plain ASCII, 2026.", variants="t2s") == n("Plain ASCII, 2026.")


def test_variants_are_part_of_the_fingerprint_model():
    from simhash_spark.config import load_config
    from simhash_spark.core.index_model import model_differences, model_signature

    none = model_signature(load_config().model, None)
    t2s = model_signature(load_config(overrides=['normalize.variants="t2s"']).model, None)
    diffs = [d.split(":")[0] for d in model_differences(none, t2s)]
    assert diffs == ["body.normalize.variants", "body.normalize.variants_model"]
    assert set(t2s["body"]["normalize"]["variants_model"]) == {"opencc", "variants_table_sha256"}


def test_an_unknown_variants_value_names_the_key():
    from simhash_spark.config import load_config
    from simhash_spark.errors import ConfigError

    with pytest.raises(ConfigError, match=r"normalize\.variants: expected one of none, t2s, s2t"):
        load_config(overrides=['normalize.variants="tw2s"'])


def test_the_shipped_invisible_ranges_are_the_running_unicode_data():
    """The ranges a worker uses without scanning every code point are those the scan gives (tables for the
    Unicode versions of Python 3.11 to 3.13; another version is scanned)."""
    import unicodedata

    from simhash_spark.core import normalize as N

    if unicodedata.unidata_version not in N.INVISIBLE_RANGES:
        pytest.skip(f"no shipped table for Unicode {unicodedata.unidata_version}: computed at run time")
    assert N.INVISIBLE_RANGES[unicodedata.unidata_version] == N.invisible_ranges()
    # every range holds what the definition removes, and nothing between ranges does
    pattern = N._invisible()
    for lo, hi in N.INVISIBLE_RANGES[unicodedata.unidata_version]:
        assert pattern.fullmatch(chr(lo)) and pattern.fullmatch(chr(hi))
        assert not pattern.fullmatch(chr(hi + 1))  # the last range ends below U+10FFFF
