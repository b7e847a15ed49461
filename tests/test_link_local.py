"""Linking on the driver (``core.link_local``, runs of at most ``cluster.local_max_documents``) gives the
same documents, pairs, clusters and statistics as the Spark linking (its band join inside tasks; and, for
a fixed design, the same outputs with the shuffled band join), over the rule's branches: text check
or not, identical groups written as stars, hot buckets resolved by spanning forests, the title rule "and"
with length steps."""

import json

import pyarrow as pa
import pytest

from simhash_spark.config import load_config
from simhash_spark.demo.corpus import generate
from simhash_spark.pipeline import dedup

CONFIGS = {
    "defaults": [],
    "no_check_stars": [
        "verify.measure=none",
        "bands.scheme=4x16",
        "match.max_distance=3",
        "output.pairs_max_group=2",
    ],
    "hot_buckets": ["bands.scheme=blocks:5", "match.max_distance=4", "bands.hot_bucket_limit=2"],
    "titles_and_steps": [
        "input.title_column=title",
        "title.rule=and",
        "title.max_distance=12",
        "match.length_steps=[[0, 14], [1200, 12]]",
        "verify.accept_distance=2",
    ],
    # documents on both sides of the short-text length: 2-gram and 5-gram fingerprints, mixed pairs
    "short_texts": ["short_texts.below_letters=400", "match.length_steps=[[0, 14], [400, 12]]"],
    # a small k: most near-duplicates are found by their sketch bands alone
    "sketch_bands": ["match.sketch_bands=true", "match.max_distance=3", "bands.scheme=blocks:5"],
}


@pytest.fixture(scope="module")
def corpus(spark):
    table = generate(90, seed=23, dup_share=0.6)
    # exact copies: identical groups larger than pairs_max_group
    copies = table.slice(0, 4)
    ids = [f"copy{i}-{j}" for j in range(3) for i in range(copies.num_rows)]
    extra = pa.concat_tables([copies] * 3).set_column(0, "id", pa.array(ids))
    return spark.createDataFrame(pa.concat_tables([table, extra]).to_pandas())


def _rows(df):
    return sorted(json.dumps(r.asDict(), sort_keys=True, default=str) for r in df.collect())


def _run(spark, raw, overrides, local_max, in_task_max=10_000_000):
    cfg = load_config(
        overrides=[
            *overrides,
            f"cluster.local_max_documents={local_max}",
            f"bands.in_task_max_fingerprints={in_task_max}",
        ]
    )
    res = dedup(spark, raw, cfg)
    out = {
        "documents": _rows(res.documents),
        "pairs": _rows(res.pairs),
        "clusters": _rows(res.clusters),
        # where the fingerprints, the band join and the components ran differ by design; nothing else may
        # (and the Spark steps drop unrelated pairs by their sketches before the check: verify.sketch_*)
        "stats": {k: v for k, v in res.stats.items() if k not in ("components_method", "fingerprinted_on")}
        | {"bands": {k: v for k, v in res.stats["bands"].items() if k != "join"}}
        | {"verify": {k: v for k, v in res.stats["verify"].items() if not k.startswith("sketch_")}},
        "join": res.stats["bands"]["join"],
        "stages": list(res.timings),
    }
    res.unpersist()
    return out


def _same_whatever_the_join(stats):
    """The shuffled join finds floods by bucket size alone (it cannot sort every fingerprint on the
    driver), so where a flood was resolved its pairs/ may hold other spanning pairs of the same clusters."""
    return ("documents", "clusters") if stats["flood"]["members"] else ("documents", "pairs", "clusters")


@pytest.mark.heavy
@pytest.mark.parametrize("name", list(CONFIGS))
def test_driver_linking_equals_the_spark_linking(spark, corpus, name):
    on_driver = _run(spark, corpus, CONFIGS[name], 100_000)
    in_spark = _run(spark, corpus, CONFIGS[name], 0)
    for key in ("documents", "pairs", "clusters", "stats"):
        assert on_driver[key] == in_spark[key], key
    assert on_driver["stages"] == in_spark["stages"]
    assert (on_driver["join"], in_spark["join"]) == ("driver", "in_task")
    stats = on_driver["stats"]
    assert stats["pairs_accepted"] == len(on_driver["pairs"]) > 0
    if name == "hot_buckets":
        assert stats["hot_buckets"] > 0 and stats["hot_bucket_forest_edges"] > 0
    if name == "sketch_bands":
        assert stats["sketch_bands"]["candidate_pairs"] > 0
        assert any(r["distance"] > 3 for r in map(json.loads, on_driver["pairs"]))
    if name == "no_check_stars":
        assert stats["groups_written_as_stars"] > 0
    if any(o.startswith("bands.scheme=") for o in CONFIGS[name]):  # auto prices the two joins differently
        shuffled = _run(spark, corpus, CONFIGS[name], 0, in_task_max=0)
        for key in _same_whatever_the_join(stats):
            assert shuffled[key] == in_spark[key], key
        if not stats["flood"]["members"]:  # the shuffled join finds floods by bucket size alone
            assert shuffled["stats"]["hot_buckets"] == stats["hot_buckets"]
        assert shuffled["join"] == "shuffled"


def test_the_driver_path_is_taken_only_when_small(spark, corpus):
    scheduler = spark.sparkContext._jsc.sc().dagScheduler()

    def jobs_and_join(local_max):
        before = scheduler.nextJobId()
        res = dedup(spark, corpus, load_config(overrides=[f"cluster.local_max_documents={local_max}"]))
        jobs = scheduler.nextJobId() - before
        join = res.stats["bands"]["join"]
        res.unpersist()
        return jobs, join

    small_jobs, small_join = jobs_and_join(100_000)
    big_jobs, big_join = jobs_and_join(10)  # more documents than that: the Spark linking
    assert (small_join, big_join) == ("driver", "in_task")
    assert small_jobs < big_jobs - 10


@pytest.mark.heavy
def test_fingerprints_that_would_crowd_the_driver_take_the_shuffled_join(spark, corpus, monkeypatch):
    """The join inside tasks collects every fingerprint to the driver first: only when they fit a quarter of
    its heap (here made to need ~1 TB each); otherwise the shuffled join, with the same outputs."""
    from simhash_spark.transforms import candidates

    config = CONFIGS["hot_buckets"]
    in_task = _run(spark, corpus, config, 0)
    monkeypatch.setattr(candidates, "COLLECT_BYTES", 1 << 40)
    crowded = _run(spark, corpus, config, 0)
    assert (in_task["join"], crowded["join"]) == ("in_task", "shuffled")
    for key in _same_whatever_the_join(in_task["stats"]):
        assert crowded[key] == in_task[key], key
