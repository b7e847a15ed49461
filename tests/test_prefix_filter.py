"""The prefix filter never rejects a pair the check passes, and rejects unrelated documents."""

import random
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_spark import columns as C
from simhash_spark.core.check_filter import PREFIX, SKETCH, CheckFilter
from simhash_spark.core.fingerprint import Fingerprinter, ModelOptions, check_filter
from simhash_spark.core.normalize import NormalizeOptions, normalize
from simhash_spark.core.prefix_filter import (
    from_bytes,
    may_pass,
    ngram_prefix,
    prefix_length,
    stored_prefixes_meet,
    to_bytes,
)
from simhash_spark.core.shingles import ShortTextOptions, char_ngram_hashes, hashed_jaccard
from simhash_spark.core.verify import VerifyOptions, similarities

PREFIX_08 = CheckFilter(PREFIX, 0.8)
ALPHABET = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可也你能"


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=ALPHABET, min_size=0, max_size=80),
    st.text(alphabet=ALPHABET, min_size=0, max_size=80),
    st.sampled_from([0.5, 0.7, 0.8, 0.9, 1.0]),
    st.sampled_from([2, 3, 5]),
)
def test_no_pair_that_passes_is_rejected(a, b, t, n):
    ha, hb = char_ngram_hashes(a, n)[0], char_ngram_hashes(b + a[: len(a) // 2], n)[0]
    if hashed_jaccard(ha, hb) >= t:
        assert may_pass(ngram_prefix(ha, t), ngram_prefix(hb, t))


def test_near_copies_pass_and_unrelated_documents_are_rejected():
    rng = random.Random(3)
    chars = [chr(c) for c in range(0x4E00, 0x4E00 + 3000)]
    base = "".join(rng.choice(chars) for _ in range(1000))
    edited = base[:300] + "".join(rng.choice(chars) for _ in range(20)) + base[320:]
    others = ["".join(rng.choice(chars) for _ in range(1000)) for _ in range(50)]
    h = {name: char_ngram_hashes(text, 5)[0] for name, text in [("base", base), ("edited", edited)]}
    assert hashed_jaccard(h["base"], h["edited"]) >= 0.8
    assert may_pass(ngram_prefix(h["base"], 0.8), ngram_prefix(h["edited"], 0.8))
    rejected = sum(
        not may_pass(ngram_prefix(h["base"], 0.8), ngram_prefix(char_ngram_hashes(o, 5)[0], 0.8))
        for o in others
    )
    assert rejected == len(others)


def test_prefix_length():
    assert [prefix_length(n, 0.8) for n in (0, 1, 5, 10, 11)] == [0, 1, 2, 3, 3]
    assert prefix_length(10, 1.0) == 1
    assert len(ngram_prefix(np.arange(1, 11, dtype=np.uint64) << np.uint64(32), 0.8)) == 3


def _corpus(seed: int = 7) -> list[str | None]:
    """Documents of ~300 characters: a base, an edited copy (passes 0.8), a related text sharing half of
    it, unrelated texts, a short text, an exact copy and a null."""
    rng = random.Random(seed)
    chars = [chr(c) for c in range(0x4E00, 0x4E00 + 3000)]

    def words(k: int) -> str:
        return "".join(rng.choice(chars) for _ in range(k))

    base = words(300)
    edited, related = base[:150] + words(5) + base[155:], base[:150] + words(150)
    return [base, edited, related, words(300), words(300), "短文本", base, None]


def test_prefixes_are_emitted_only_when_asked_for_and_the_features_are_the_checks_ngrams():
    model, on = ModelOptions(), VerifyOptions(prefix_filter=True)  # the prefix replaces the sketch
    assert check_filter(model, replace(on, min_similarity=0.7)) == CheckFilter(PREFIX, 0.7)
    sketch = replace(VerifyOptions(sketch_filter=True), min_similarity=0.7)
    assert check_filter(model, sketch) == CheckFilter(SKETCH, 0.7)
    assert check_filter(model, VerifyOptions()) == CheckFilter(SKETCH, 0.8)  # the sketch, by default
    assert check_filter(model, VerifyOptions(sketch_filter=False)) is None
    assert check_filter(model, replace(on, measure="edit")) is None
    assert check_filter(model, replace(on, ngram_size=3)) is None
    assert check_filter(model, replace(sketch, ngram_size=3)) is None
    other_hash = replace(model, fingerprint=replace(model.fingerprint, hash="xxhash64"))
    assert check_filter(other_hash, on) is None
    words = replace(model, features=replace(model.features, mode="word"))
    assert check_filter(words, on) is None


def test_a_prefix_filter_the_features_cannot_serve_is_a_config_error_naming_the_key():
    from simhash_spark.config import load_config
    from simhash_spark.errors import ConfigError

    assert load_config(overrides=["verify.prefix_filter=true"]).verify.prefix_filter
    with pytest.raises(ConfigError, match=r"verify\.prefix_filter: needs features\.ngram_size"):
        load_config(overrides=["verify.prefix_filter=true", "verify.ngram_size=4"])
    # the sketch filter, on by default, applies only where it can: no error for other measures or features
    assert load_config(overrides=['verify.measure="edit"']).verify.sketch_filter


def test_the_fingerprinter_emits_each_documents_prefix_and_the_same_fingerprints():
    docs = _corpus()
    model = replace(ModelOptions(), short_texts=ShortTextOptions(below_letters=10, ngram_size=2))
    plain = Fingerprinter(model).batch(docs)
    fp = Fingerprinter(model, PREFIX_08)
    first, again = fp.batch(docs), fp.batch(docs)  # the second batch is answered from the memo
    assert plain.check_summary is None
    for res in (first, again):
        assert res.fingerprint.tolist() == plain.fingerprint.tolist() and res.status == plain.status
        assert res.check_summary is not None
        for text, prefix in zip(docs, res.check_summary, strict=True):
            if text is None or text == "短文本":  # null; a short text is checked on the short n
                assert prefix is None
                continue
            hashes = char_ngram_hashes(normalize(text, model.normalize).text, 5)[0]
            assert prefix is not None and prefix == to_bytes(ngram_prefix(hashes, 0.8))
    held = [from_bytes(p) for p in first.check_summary or [] if p is not None]
    assert may_pass(held[0], held[1]) and not may_pass(held[0], held[3])


def test_stored_prefixes_reject_only_pairs_the_check_fails():
    docs = [d for d in _corpus(5) if d is not None]
    stored = [p for p in Fingerprinter(ModelOptions(), PREFIX_08).batch(docs).check_summary or []]
    pairs = [(a, b) for a in range(len(docs)) for b in range(a + 1, len(docs))]
    scores = similarities(
        [docs[a] for a, _ in pairs], [docs[b] for _, b in pairs], VerifyOptions(), NormalizeOptions()
    )
    meet = stored_prefixes_meet([stored[a] for a, _ in pairs], [stored[b] for _, b in pairs])
    passing = scores >= 0.8
    assert passing.any() and meet[passing].all()  # never a pair the check passes
    assert not meet[~passing].all()  # and some of the others: unrelated documents
    # a document without a stored prefix (an index entry) is checked whatever the other holds
    assert stored_prefixes_meet([None, stored[0], None], [stored[1], None, None]).tolist() == [True] * 3
    assert stored[0] == (Fingerprinter(ModelOptions(), PREFIX_08).batch(docs[:1]).check_summary or [])[0]


@pytest.mark.parametrize("check", [PREFIX_08, CheckFilter(SKETCH, 0.8)], ids=[PREFIX, SKETCH])
def test_the_verify_stage_gives_the_same_pairs_with_the_check_filter(spark, check):
    from simhash_spark.core.rules import PairRule
    from simhash_spark.core.verify import ThresholdPolicy
    from simhash_spark.transforms.fingerprint import add_fingerprints
    from simhash_spark.transforms.verify import accept_pairs, drop_unreachable, rows_of_pairs

    docs = _corpus(11)
    frame = spark.createDataFrame(list(enumerate(docs)), "id long, text string")
    fps = add_fingerprints(frame, model=ModelOptions(), check=check).collect()
    core = Fingerprinter(ModelOptions(), check).batch(docs).check_summary
    assert core is not None  # the UDF hands the core's summaries to Spark unchanged
    assert [r["check_summary"] for r in fps] == core
    prefixes = spark.createDataFrame(
        [(r["id"], r["check_summary"]) for r in fps], "id long, check_summary binary"
    )
    n = len(docs)
    cands = spark.createDataFrame(
        [(a, b, 6) for a in range(n) for b in range(a + 1, n)], "id_a long, id_b long, distance int"
    )
    rule = PairRule(ThresholdPolicy(12), VerifyOptions(), NormalizeOptions())
    lengths = spark.createDataFrame([(i, 300) for i in range(n)], "id long, n_chars int")
    for few in (False, True):
        kept = drop_unreachable(cands, rule=rule, check=check, summaries=prefixes, few=few)
        assert 3 <= kept.count() < cands.count()  # unrelated documents' pairs are dropped
        texts = rows_of_pairs(kept, frame) if few else frame
        filtered = accept_pairs(kept, rule=rule, lengths=lengths, texts=texts).collect()
        everything = accept_pairs(cands, rule=rule, lengths=lengths, texts=frame).collect()
        assert sorted(filtered) == sorted(everything)
        assert {(r["id_a"], r["id_b"]) for r in filtered} == {(0, 1), (0, 6), (1, 6)}
    # pairs the rule accepts unchecked stay, and so do pairs of a document without a prefix
    unchecked = PairRule(ThresholdPolicy(12), VerifyOptions(accept_distance=6), NormalizeOptions())
    assert drop_unreachable(cands, rule=unchecked, check=check, summaries=prefixes).count() == cands.count()
    without_0 = prefixes.where("id != 0")
    kept_ids = {
        (r["id_a"], r["id_b"])
        for r in drop_unreachable(cands, rule=rule, check=check, summaries=without_0).collect()
    }
    assert {(0, b) for b in range(1, n)} <= kept_ids


def test_the_verify_stage_runs_each_python_udf_once_per_pair(spark):
    """The text check and the check filter read their UDF's result in a filter and in the output: Spark
    must not copy the UDF into the filter (then every pair's texts would go to Python twice)."""
    from simhash_spark.core.rules import PairRule
    from simhash_spark.core.verify import ThresholdPolicy
    from simhash_spark.transforms.verify import accept_pairs, drop_unreachable

    docs = _corpus(11)[:4]
    texts = spark.createDataFrame(list(enumerate(docs)), "id long, text string")
    cands = spark.createDataFrame([(0, 1, 6), (0, 2, 6), (1, 3, 6)], "id_a long, id_b long, distance int")
    lengths = spark.createDataFrame([(i, 300) for i in range(4)], "id long, n_chars int")
    check = CheckFilter(SKETCH, 0.8)
    summaries = spark.createDataFrame(
        [(i, check.summary(char_ngram_hashes(t, 5)[0])) for i, t in enumerate(docs)],
        "id long, check_summary binary",
    )
    rule = PairRule(ThresholdPolicy(12), VerifyOptions(), NormalizeOptions())
    accepted = accept_pairs(cands, rule=rule, lengths=lengths, texts=texts)
    kept = drop_unreachable(cands, rule=rule, check=check, summaries=summaries, sketch_bands=True)
    for frame in (accepted, kept):
        plan = frame._jdf.queryExecution().executedPlan().toString()
        assert plan.count("ArrowEvalPython") == 1, plan
    assert {(r["id_a"], r["id_b"]) for r in accepted.collect()} == {(0, 1)}


@pytest.mark.heavy
@pytest.mark.parametrize("kind", [PREFIX, SKETCH])
def test_a_run_linked_by_spark_finds_the_same_duplicates_with_the_check_filter(spark, kind):
    from simhash_spark.config import load_config
    from simhash_spark.demo.corpus import generate
    from simhash_spark.pipeline import dedup

    raw = spark.createDataFrame(generate(300, seed=3).to_pandas())
    outputs = []
    for on in ("false", "true"):
        overrides = [
            "cluster.local_max_documents=0",
            "verify.sketch_filter=false",
            "verify.prefix_filter=false",
            f"verify.{kind}_filter={on}",
        ]
        res = dedup(spark, raw, load_config(overrides=overrides))
        outputs.append(
            (sorted(map(tuple, res.pairs.collect())), sorted(map(tuple, res.documents.collect())), res.stats)
        )
        assert C.CHECK_SUMMARY not in res.documents.columns
        res.unpersist()
    (pairs_off, docs_off, stats_off), (pairs_on, docs_on, stats_on) = outputs
    assert pairs_on == pairs_off and docs_on == docs_off and stats_off["verify"]["passed"] > 0
    assert stats_on["verify"].pop(f"{kind}_filter") is True and f"{kind}_filter" not in stats_off["verify"]
    # rejected by the filter: never more than the check rejects (the stage test shows that it rejects)
    failed = stats_off["candidate_pairs_within_k"] - stats_off["verify"]["passed"]
    assert 0 <= stats_on["verify"].pop(f"{kind}_rejected") <= failed
    assert stats_on["verify"] == stats_off["verify"]


def test_texts_partitioned_by_id_are_shuffled_once_for_both_ends(spark):
    """The check joins a text to each end of a pair. The texts persisted partitioned and sorted by id
    (``rows_of_pairs`` with ``partitions``) enter neither join through a shuffle: both ends read them as
    they lie; the accepted pairs are the same."""
    from simhash_spark.core.rules import PairRule
    from simhash_spark.core.verify import ThresholdPolicy
    from simhash_spark.transforms.verify import accept_pairs, rows_of_pairs

    docs = _corpus(11)[:6]
    texts = spark.createDataFrame(list(enumerate(docs)), "id long, text string")
    cands = spark.createDataFrame(
        [(0, 1, 6), (0, 2, 6), (1, 3, 6), (4, 5, 6)], "id_a long, id_b long, distance int"
    )
    lengths = spark.createDataFrame([(i, 300) for i in range(6)], "id long, n_chars int")
    rule = PairRule(ThresholdPolicy(12), VerifyOptions(), NormalizeOptions())
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
    results, shuffled = [], []
    before = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")  # joined as many texts would be
    try:
        for by_id in (None, partitions):
            rows = rows_of_pairs(cands, texts, partitions=by_id).persist()
            accepted = accept_pairs(cands, rule=rule, lengths=lengths, texts=rows)
            results.append(sorted(tuple(r) for r in accepted.collect()))
            # as adaptive execution ran it: planned before the texts were persisted, both joins shuffle them
            final = accepted._jdf.queryExecution().executedPlan().executedPlan().toString()
            shuffled.append(sum(final.count(f"Exchange hashpartitioning(_{e}text_id") for e in "ab"))
            rows.unpersist()
    finally:
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", before)
    assert results[0] == results[1] and results[0]
    assert shuffled == [2, 0], shuffled


def test_shuffle_partitions_is_a_number_or_none_never_an_error():
    """``context.shuffle_partitions``, read by the check (how to partition its texts) and by the fingerprint
    pass under Spark Connect: ``spark.sql.shuffle.partitions`` set to something other than a number (some
    platforms say "auto") gives None, so the texts stay unpartitioned, instead of failing the run."""
    from types import SimpleNamespace

    from simhash_spark.context import shuffle_partitions

    def session(value):
        return SimpleNamespace(conf=SimpleNamespace(get=lambda key, default=None: value))

    assert shuffle_partitions(session("8")) == 8
    assert shuffle_partitions(session("auto")) is None
    assert shuffle_partitions(session(None)) is None
