"""The Python API ``dedup(spark, docs, config)`` and the representative policies."""

import datetime as dt

import pandas as pd
import pytest
from pyspark.testing import assertDataFrameEqual

from simhash_spark.config import load_config
from simhash_spark.pipeline import dedup

BASE = "北京市政府今天发布了城市更新方案，计划在三年内改造一百二十个老旧小区，涉及居民四万多户。"
# The original article's recipe: keywords, k = 3, four 16-bit bands, no second tier.
ORIGINAL = ["features.mode=tfidf", "match.max_distance=3", "bands.scheme=4x16", "verify.measure=none"]
OTHER = "上海气象台发布暴雨蓝色预警，预计今天夜间到明天白天全市有大到暴雨，局部地区伴有雷电和短时强降水。"


@pytest.fixture(scope="module")
def docs(spark):
    rows = [
        ("c", BASE, dt.date(2024, 5, 3), 10),
        ("a", "<p>" + BASE + "</p>", dt.date(2024, 5, 1), 30),
        ("b", BASE.replace("，", ","), None, 20),
        ("d", BASE + "  ", dt.date(2024, 4, 30), None),
        ("x", OTHER, dt.date(2024, 1, 1), 5),
    ]
    return spark.createDataFrame(rows, "id string, text string, published date, score int")


def clusters(result):
    return {r["id"]: (r["cluster_id"], r["is_duplicate"]) for r in result.documents.collect()}


@pytest.mark.parametrize(
    ("policy", "rep"),
    [("min_id", "a"), ("min:published", "d"), ("max:published", "c"), ("max:score", "a"), ("min:score", "c")],
)
def test_representative_policies(spark, docs, policy, rep):
    cfg = load_config(overrides=[f"cluster.representative={policy}"])
    res = dedup(spark, docs, cfg)
    got = clusters(res)
    assert {k: v[0] for k, v in got.items() if k != "x"} == dict.fromkeys("abcd", rep)
    assert got["x"] == ("x", False)
    assert {k for k, v in got.items() if not v[1]} == {rep, "x"}
    assert res.stats["duplicates"] == 3 and res.stats["clusters"] == 1
    res.unpersist()


def test_longest_text_policy(spark):
    rows = [("1", BASE), ("2", BASE + "附图"), ("3", "<b>" + BASE + "</b>"), ("4", BASE + "!!!")]
    df = spark.createDataFrame(rows, "id string, text string")
    res = dedup(spark, df, load_config(overrides=["cluster.representative=longest_text"]))
    got = clusters(res)
    # "2" has two more letters after normalization; markup and punctuation ("!!!") do not count
    assert {v[0] for v in got.values()} == {"2"}


def test_integer_ids_and_passthrough(spark):
    rows = [(10, BASE, "x"), (3, BASE, "y"), (7, OTHER, "z")]
    df = spark.createDataFrame(rows, "doc_id long, body string, src string")
    cfg = load_config(
        overrides=[
            "input.id_column=doc_id",
            'input.text_columns=["body"]',
            'input.passthrough_columns=["src"]',
        ]
    )
    res = dedup(spark, df, cfg)
    out = {r["id"]: r for r in res.documents.collect()}
    assert out[10]["cluster_id"] == 3 and out[10]["is_duplicate"] and out[10]["src"] == "x"
    assert res.documents.schema["id"].dataType.simpleString() == "bigint"
    assert sorted(r["doc_id"] for r in res.deduplicated.collect()) == [3, 7]
    assert res.deduplicated.columns == ["doc_id", "body", "src"]


@pytest.mark.parametrize(
    ("max_group", "expected_pairs", "complete"), [(1000, 15 + 3, True), (2, 5 + 2, False)]
)
def test_identical_fingerprints_joined_once_and_expanded(spark, max_group, expected_pairs, complete):
    rows = [(f"a{i}", BASE) for i in range(5)] + [("a9", "<p>" + BASE + "</p>")]
    rows += [(f"b{i}", OTHER) for i in range(3)] + [
        ("c", "完全无关的第三篇文章，讲的是春季农业生产和种子供应的情况。")
    ]
    df = spark.createDataFrame(rows, "id string, text string")
    res = dedup(spark, df, load_config(overrides=[f"output.pairs_max_group={max_group}"]))
    got = clusters(res)
    assert {k: v[0] for k, v in got.items()} == {
        **dict.fromkeys(["a0", "a1", "a2", "a3", "a4", "a9"], "a0"),
        **dict.fromkeys(["b0", "b1", "b2"], "b0"),
        "c": "c",
    }
    pairs = res.pairs.collect()
    assert len(pairs) == expected_pairs == res.stats["pairs_accepted"]
    assert all(p["id_a"] < p["id_b"] and p["distance"] == 0 for p in pairs)
    assert res.stats["pairs_complete"] is complete
    # with the text check, a9 (same fingerprint, other raw text) is a group of its own: it joins a0's
    # group through a distance-0 pair, accepted without a check
    assert res.stats["identical_groups"] == 2 and res.stats["largest_identical_group"] == 5
    assert res.stats["same_fingerprint_groups"] == 2
    assert res.stats["distinct_fingerprints"] == 3 and res.stats["representatives"] == 4
    assert res.stats["candidate_pairs_within_k"] <= 3  # the join saw 4 representatives, not 10 documents
    res.unpersist()


def test_auto_design_gives_the_exact_pairs_and_reports_its_choice(spark, tmp_path):
    from simhash_spark.demo.corpus import generate

    table = generate(80, seed=4)
    df = spark.createDataFrame(table.to_pandas()[["id", "text"]])
    fixed = dedup(spark, df, load_config(overrides=ORIGINAL))
    auto = dedup(
        spark, df, load_config(overrides=[*ORIGINAL, "bands.scheme=auto", "bands.auto_sample_rows=1000"])
    )
    assert sorted(auto.pairs.collect()) == sorted(fixed.pairs.collect())
    report = auto.stats["bands"]["auto"]
    assert auto.stats["bands"]["exact"] and report["chosen"] == auto.stats["bands"]["scheme"]
    assert {d["scheme"] for d in report["designs"]} >= {"4x16", "blocks:5"}
    # a budget nothing exact can meet falls back to LSH at the required recall
    lsh = dedup(
        spark,
        df,
        load_config(overrides=[*ORIGINAL, "bands.scheme=auto", "bands.auto_max_pairs_per_doc=0.0001"]),
    )
    assert not lsh.stats["bands"]["exact"] and lsh.stats["bands"]["recall_at_k"] >= 0.99
    assert {tuple(r) for r in lsh.pairs.collect()} <= {tuple(r) for r in fixed.pairs.collect()}
    for r in (fixed, auto, lsh):
        r.unpersist()


def test_default_auto_design_finds_the_exact_designs_pairs(spark):
    """Default k = 12: auto may pick sampled-bit LSH tables; what they find is a subset of the exact
    design's pairs, and nearly all of it (recall 0.99 at d = 12, more below)."""
    from simhash_spark.demo.corpus import generate

    df = spark.createDataFrame(generate(120, seed=6).to_pandas()[["id", "text"]])
    exact = dedup(spark, df, load_config(overrides=["bands.scheme=blocks:14"]))
    auto = dedup(spark, df, load_config())
    want = {tuple(r) for r in exact.pairs.collect()}
    got = {tuple(r) for r in auto.pairs.collect()}
    assert got <= want and len(want) > 20
    assert len(got) >= 0.97 * len(want)
    assert auto.stats["bands"]["recall_at_k"] >= 0.99 or auto.stats["bands"]["exact"]
    for r in (exact, auto):
        r.unpersist()


@pytest.mark.parametrize("recipe", ["default", "original", "titles"])
def test_hot_buckets_resolved_locally_keep_clusters_exact(spark, recipe):
    """Default: the local forest checks texts (and per-pair k, and titles with rule "and") like the join
    path does."""
    from simhash_spark.demo.corpus import generate

    base = {
        "original": ORIGINAL,
        "default": ["match.length_steps=[[0, 12], [300, 10]]"],
        "titles": ["input.title_column=title", "title.rule=and", "title.max_distance=2"],
    }[recipe]
    df = spark.createDataFrame(generate(60, seed=8).to_pandas()[["id", "title", "text"]])
    normal = dedup(spark, df, load_config(overrides=base))
    hot = dedup(spark, df, load_config(overrides=[*base, "bands.hot_bucket_limit=2"]))
    assert hot.stats["hot_buckets"] > 0 and hot.stats["pairs_complete"] is False
    assert hot.stats["largest_buckets"][0]["fingerprints"] >= 3
    assert normal.stats["hot_buckets"] == 0 and normal.stats["pairs_complete"] is True
    assertDataFrameEqual(hot.documents, normal.documents)
    assertDataFrameEqual(hot.clusters, normal.clusters)
    full = {tuple(r) for r in normal.pairs.collect()}
    assert {tuple(r) for r in hot.pairs.collect()} <= full
    for r in (normal, hot):
        r.unpersist()


LONG = BASE + (
    "市住建委负责人介绍，改造内容包括加装电梯、更新管线、整治环境和完善社区服务设施，"
    "资金由市区两级财政和社会资本共同承担，首批项目将于今年六月开工，年底前完成三十个小区的改造任务。"
)
TITLED = [
    ("a", "北京发布城市更新方案", LONG),
    ("b", "北京发布城市更新方案！", "<p>" + LONG + "</p>"),  # same story, same title
    ("c", "老旧小区改造三年计划出炉", LONG.replace("四万多户", "四万余户")),  # same story, new title
    ("x", "北京发布城市更新方案", OTHER),  # another story under the same title
    ("y", None, LONG.replace("一百二十个", "一百二十多个")),  # no title
]


def test_title_rule_and_needs_close_titles(spark):
    df = spark.createDataFrame(TITLED, "id string, title string, text string")
    res = dedup(spark, df, load_config(overrides=["input.title_column=title", "title.rule=and"]))
    pairs = {(r["id_a"], r["id_b"]): r["reason"] for r in res.pairs.collect()}
    assert ("a", "b") in pairs  # close titles, same body
    assert ("a", "c") not in pairs and ("b", "c") not in pairs  # same body, unrelated title
    assert ("a", "x") not in pairs  # same title, unrelated body
    assert ("a", "y") in pairs and ("c", "y") in pairs  # no title: the body decides
    assert res.stats["title"] == {"rule": "and", "max_distance": 6}
    res.unpersist()


def test_title_rule_or_adds_title_pairs(spark):
    df = spark.createDataFrame(TITLED, "id string, title string, text string")
    res = dedup(spark, df, load_config(overrides=["input.title_column=title", "title.rule=or"]))
    pairs = {(r["id_a"], r["id_b"]): r for r in res.pairs.collect()}
    assert pairs[("a", "x")]["reason"] == "title" and pairs[("a", "x")]["similarity"] is None
    assert pairs[("a", "x")]["distance"] > 12  # the bodies are far apart
    assert pairs[("a", "c")]["reason"] in ("verified", "identical_fingerprint")
    assert pairs[("a", "b")]["reason"] != "title"  # found by the body: listed once, with the body's reason
    assert len(pairs) == res.stats["pairs_accepted"]
    assert res.stats["title"]["pairs_added_by_title"] >= 2  # a-x, b-x
    clusters = {r["id"]: r["cluster_id"] for r in res.documents.collect()}
    assert len(set(clusters.values())) == 1
    res.unpersist()


def test_title_column_must_be_a_string(spark):
    from simhash_spark.errors import InputError

    df = spark.createDataFrame([("a", 1, BASE)], "id string, title int, text string")
    with pytest.raises(InputError, match="'title'"):
        dedup(spark, df, load_config(overrides=["input.title_column=title"]))


def test_length_steps_give_each_pair_the_k_of_its_shorter_document(spark):
    """Brute force: pairs = identical fingerprints, or within k(shorter length) bits and Jaccard >= 0.8."""
    import numpy as np

    from simhash_spark.core.normalize import normalize
    from simhash_spark.core.verify import similarity
    from simhash_spark.demo.corpus import generate
    from tests.test_candidates_spark import brute_force_pairs

    pdf = generate(120, seed=12).to_pandas()[["id", "text"]]
    df = spark.createDataFrame(pdf)
    steps = "match.length_steps=[[0, 4], [150, 9], [400, 13]]"
    # k by length is the subject: no candidates beyond k from the sketch bands
    cfg = load_config(overrides=[steps, "bands.scheme=blocks:15", "match.sketch_bands=false"])
    res = dedup(spark, df, cfg)
    assert res.stats["bands"]["max_distance"] == 13 and res.stats["bands"]["exact"]
    docs = res.documents.where("fingerprint is not null").select("id", "fingerprint").collect()
    text = dict(zip(pdf["id"], pdf["text"], strict=True))
    n_chars = {i: len(normalize(t, cfg.normalize).text) for i, t in text.items()}
    ids = [r["id"] for r in docs]
    fps = np.array([r["fingerprint"] for r in docs], dtype=np.int64)
    rep: dict[int, str] = {}
    for i, f in sorted(zip(ids, fps.tolist(), strict=True)):
        rep.setdefault(f, i)
    rep_of = {i: rep[f] for i, f in zip(ids, fps.tolist(), strict=True)}
    expected = set()
    for a, b, d in brute_force_pairs(ids, fps, 13):
        ra, rb = rep_of[a], rep_of[b]
        k = cfg.policy.k_for_length(min(n_chars[ra], n_chars[rb]))
        if d == 0 or (d <= k and similarity(text[ra], text[rb], cfg.verify, cfg.normalize) >= 0.8):
            expected.add((a, b, d))
    got = {(r["id_a"], r["id_b"], r["distance"]) for r in res.pairs.collect()}
    assert got == expected
    assert any(d > 4 for _, _, d in got), "steps above the first must admit wider pairs"
    res.unpersist()


def test_the_short_preset_finds_short_reprints_and_variants_join_the_scripts(spark):
    """Comments of ~25 letters with one character changed: the default's 5-grams lose 5 of ~21 shingles
    and miss the pair; --config short (2-grams) finds it. With normalize.variants = "t2s" a comment in
    traditional characters joins its simplified twin; without, it stays alone."""
    short = "这家店的服务态度非常好，菜品也很新鲜，下次还会再来！"
    edited = short.replace("新鲜", "新嫩")
    traditional = "這家店的服務態度非常好，菜品也很新鮮，下次還會再來！"
    rows = [("s1", short), ("s2", edited), ("t1", traditional), ("x", OTHER)]
    frame = spark.createDataFrame(rows, "id string, text string")

    def pairs(cfg):
        res = dedup(spark, frame, cfg)
        found = {(r["id_a"], r["id_b"]) for r in res.pairs.collect()}
        res.unpersist()
        return found

    assert pairs(load_config()) == set()
    assert pairs(load_config("short")) == {("s1", "s2")}
    assert pairs(load_config("short", ['normalize.variants="t2s"'])) == {
        ("s1", "s2"),
        ("s1", "t1"),
        ("s2", "t1"),
    }


# spark.sql.maxPlanStringLength at its largest: a plan's whole text, nothing truncated
UNBOUNDED_PLANS = str(2**31 - 16)


def plan_chars(df) -> int:
    """The length of the whole text of ``df``'s executed plan (as Spark renders it for the UI)."""
    return len(df._jdf.queryExecution().executedPlan().toString())


def test_a_runs_plans_stay_small_and_spark_renders_them_bounded_unless_the_user_set_a_bound(spark):
    """A persisted frame's plan is printed inside every plan that reads it, and persisted frames read
    persisted frames: unchecked, the shuffled path's later plans nested them level upon level (the pairs'
    plan on 120 documents ran to megabytes; with the sketch bands it did not finish rendering in ten
    minutes) and the driver walked that text at every action. The frames later stages read many times are
    materialized as leaves, so the whole plan of the pairs and documents fits the bound a run sets on
    rendered plans (when the user did not set one) without truncation."""
    from simhash_spark.demo.corpus import generate
    from simhash_spark.session import PLAN_STRING_CHARS, PLAN_STRING_LIMIT

    pdf = generate(120, seed=5).to_pandas()[["id", "text"]]
    overrides = [
        "cluster.local_max_documents=0",
        "bands.in_task_max_fingerprints=0",
        "match.max_distance=6",
        "bands.scheme=blocks:7",
        "bands.hot_bucket_limit=2",
        "match.sketch_bands=true",
    ]
    spark.conf.set(PLAN_STRING_LIMIT, UNBOUNDED_PLANS)
    try:
        res = dedup(spark, spark.createDataFrame(pdf), load_config(overrides=overrides))
        assert spark.conf.get(PLAN_STRING_LIMIT) == UNBOUNDED_PLANS
        assert res.stats["hot_buckets"] > 0  # the hot-bucket forest is part of the plan
        for frame in (res.pairs, res.documents):
            assert 0 < plan_chars(frame) <= PLAN_STRING_CHARS
        res.unpersist()
        spark.conf.unset(PLAN_STRING_LIMIT)
        dedup(spark, spark.createDataFrame(pdf.head(10)), load_config(overrides=overrides)).unpersist()
        assert spark.conf.get(PLAN_STRING_LIMIT) == str(PLAN_STRING_CHARS)
    finally:
        spark.conf.unset(PLAN_STRING_LIMIT)


@pytest.mark.parametrize("identical", [False, True])
def test_the_pairs_a_spark_run_returns_are_persisted(spark, identical):
    """pairs/ is written and then read again by the report: its joins with every member must not run
    twice (at a million documents they were most of the report stage)."""
    from simhash_spark.demo.corpus import generate

    pdf = generate(60, seed=8).to_pandas()[["id", "text"]]
    if identical:  # identical groups: pairs expanded from their representatives
        pdf = pd.concat([pdf, pdf.head(5).assign(id=lambda f: f["id"] + "-again")], ignore_index=True)
    cfg = load_config(overrides=["cluster.local_max_documents=0"])
    res = dedup(spark, spark.createDataFrame(pdf), cfg)
    assert res.stats["pairs_accepted"] > 0
    assert res.pairs.is_cached
    res.unpersist()
    assert not res.pairs.is_cached
