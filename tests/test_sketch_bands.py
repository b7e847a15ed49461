"""Sketch bands, the second source of candidate pairs: keys, hot keys and the band join against brute
force, the band join's own pairs left out exactly, and empirically the recall the module promises."""

import itertools
import random

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_spark.core.bucket_pairs import band_join_finds
from simhash_spark.core.simhash import popcount, to_unsigned
from simhash_spark.core.sketch_bands import (
    BAND_BINS,
    BANDS,
    NO_KEY,
    arrow_stored_keys,
    band_pairs,
    drop_hot,
    share_band,
    sketch_keys,
    stored_keys,
    stored_share_band,
)
from simhash_spark.core.sketch_filter import BINS, ngram_sketch


def naive_keys(sketch: bytes) -> list[int]:
    out = []
    for b in range(BANDS):
        part = sketch[b * BAND_BINS : (b + 1) * BAND_BINS]
        out.append(NO_KEY if 0 in part else int.from_bytes(part, "big"))
    return out


def few_valued_sketches(rng: np.random.Generator, n: int, values: int) -> np.ndarray:
    """Sketches over a few byte values (0 = empty bin), so that bands are shared often."""
    return rng.integers(0, values, size=(n, BINS), dtype=np.uint8)


@given(st.lists(st.binary(min_size=BINS, max_size=BINS), min_size=1, max_size=20))
@settings(max_examples=100, deadline=None)
def test_keys_are_the_bands_bytes_and_none_with_an_empty_bin(sketches: list[bytes]) -> None:
    keys = sketch_keys(np.frombuffer(b"".join(sketches), dtype=np.uint8).reshape(-1, BINS))
    assert keys.dtype == np.uint32
    assert keys.tolist() == [naive_keys(s) for s in sketches]
    assert stored_keys([*sketches, None]).tolist() == [*keys.tolist(), [NO_KEY] * BANDS]


@given(
    st.lists(st.one_of(st.none(), st.binary(min_size=BINS, max_size=BINS)), max_size=20),
    st.integers(0, 3),
    st.sampled_from([pa.binary(), pa.large_binary()]),
)
@settings(max_examples=100, deadline=None)
def test_keys_of_an_arrow_column_are_the_stored_keys(
    stored: list[bytes | None], skip: int, kind: pa.DataType
) -> None:
    column = pa.array([b"\x01" * BINS] * skip + stored, type=kind).slice(skip)  # a slice: offset > 0
    keys = arrow_stored_keys(column)
    assert keys.shape == (len(stored), BANDS)
    assert keys.tolist() == stored_keys(stored).tolist()
    assert keys.tolist() == [[NO_KEY] * BANDS if s is None else naive_keys(s) for s in stored]
    chunked = pa.chunked_array([column.slice(0, len(stored) // 2), column.slice(len(stored) // 2)], kind)
    assert arrow_stored_keys(chunked).tolist() == keys.tolist()


def test_a_sketch_of_another_length_is_refused() -> None:
    with pytest.raises(pa.ArrowInvalid):
        arrow_stored_keys(pa.array([b"\x01" * BINS, b"\x01" * (BINS - 1)]))


def brute_force_pairs(keys: np.ndarray) -> set[tuple[int, int]]:
    return {
        (i, j)
        for i, j in itertools.combinations(range(len(keys)), 2)
        if share_band(keys[i : i + 1], keys[j : j + 1])[0]
    }


@pytest.mark.parametrize("seed", range(6))
def test_band_join_gives_every_pair_sharing_a_band_once_however_the_bands_are_split(seed: int) -> None:
    rng = np.random.default_rng(seed)
    keys = sketch_keys(few_valued_sketches(rng, 120, values=3))
    expected = brute_force_pairs(keys)
    assert expected, "the sketches share bands"
    i, j = band_pairs(keys, range(BANDS))
    assert list(zip(i.tolist(), j.tolist(), strict=True)) == sorted(expected)
    for tasks in (2, 3, 8):
        parts = [band_pairs(keys, range(t, BANDS, tasks)) for t in range(tasks)]
        found = [p for a, b in parts for p in zip(a.tolist(), b.tolist(), strict=True)]
        assert sorted(found) == sorted(expected)  # no pair twice across tasks


def test_skipped_pairs_are_left_out_and_no_other() -> None:
    rng = np.random.default_rng(7)
    keys = sketch_keys(few_valued_sketches(rng, 100, values=3))
    expected = brute_force_pairs(keys)
    i, j = band_pairs(keys, range(BANDS), skip=lambda a, b: (a + b) % 3 == 0)
    assert set(zip(i.tolist(), j.tolist(), strict=True)) == {p for p in expected if sum(p) % 3}


def test_hot_keys_are_dropped_and_reported() -> None:
    keys = np.full((6, BANDS), 7, dtype=np.uint32)
    keys[:, 1] = [5, 5, 5, 9, 9, NO_KEY]
    keys[:, 2:] = np.arange(6, dtype=np.uint32)[:, None] + 100  # unique
    cooled, hot = drop_hot(keys, limit=2)
    assert [(h.band, h.key, h.size) for h in hot] == [(0, 7, 6), (1, 5, 3)]
    assert (cooled[:, 0] == NO_KEY).all()
    assert cooled[:, 1].tolist() == [NO_KEY, NO_KEY, NO_KEY, 9, 9, NO_KEY]
    assert (cooled[:, 2:] == keys[:, 2:]).all()
    i, j = band_pairs(cooled, range(BANDS))
    assert list(zip(i.tolist(), j.tolist(), strict=True)) == [(3, 4)]


@pytest.mark.parametrize("seed", range(4))
def test_band_join_finds_is_within_k_and_sharing_a_table_key(seed: int) -> None:
    rng = np.random.default_rng(seed)
    bases = rng.integers(0, 2**64, size=4, dtype=np.uint64)
    flips = [
        sum(1 << int(b) for b in rng.choice(64, size=rng.integers(0, 8), replace=False)) for _ in range(80)
    ]
    fps = (bases[np.arange(80) % 4] ^ np.array(flips, dtype=np.uint64)).view(np.int64)
    masks = [
        int(m)
        for m in (np.uint64(1) << rng.choice(64, size=(3, 20)).astype(np.uint64)).sum(axis=1).view(np.int64)
    ]
    k = 5
    i, j = np.array(list(itertools.combinations(range(len(fps)), 2))).T
    found = band_join_finds(fps, masks, k)(i, j)
    u = to_unsigned(fps)
    for a, b, got in zip(i.tolist(), j.tolist(), found.tolist(), strict=True):
        diff = int(u[a] ^ u[b])
        shares = any(diff & (m & (2**64 - 1)) == 0 for m in masks)
        assert got == (diff.bit_count() <= k and shares)
    within = popcount(u[i] ^ u[j]) <= k
    assert found.any() and (within & ~found).any()  # some within k share no table key


def sets_at(rng: random.Random, jaccard: float, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Two sets of random 64-bit hashes with the given Jaccard similarity."""
    shared = round(2 * size * jaccard / (1 + jaccard))
    pool = [rng.getrandbits(64) for _ in range(2 * size - shared)]  # distinct but once in ~10¹³
    a = pool[:size]
    b = pool[:shared] + pool[size:]
    return np.sort(np.array(a, dtype=np.uint64)), np.sort(np.array(b, dtype=np.uint64))


@pytest.mark.parametrize(
    ("jaccard", "low", "high"), [(0.8, 0.97, 0.995), (0.9, 0.997, 1.0), (0.5, 0.30, 0.45)]
)
def test_recall_at_a_jaccard_is_what_the_bands_promise(jaccard: float, low: float, high: float) -> None:
    # 1 - (1 - J^4)^8: 0.985 at 0.8, 0.9996 at 0.9, 0.40 at 0.5; 2,000 pairs of 600 n-grams
    rng = random.Random(int(jaccard * 100))
    found = 0
    for _ in range(2000):
        a, b = sets_at(rng, jaccard, 600)
        found += bool(stored_share_band([ngram_sketch(a)], [ngram_sketch(b)])[0])
    assert low <= found / 2000 <= high


def test_unrelated_documents_share_no_band() -> None:
    rng = random.Random(3)
    sketches = [ngram_sketch(sets_at(rng, 0.0, 600)[0]) for _ in range(3000)]
    keys = stored_keys(sketches)
    i, _ = band_pairs(keys, range(BANDS))
    assert len(i) == 0  # ~4.5 M pairs, each sharing a band about once in 4·10⁹


def test_short_documents_with_empty_bins_share_no_band_by_their_empty_bins() -> None:
    a = ngram_sketch(np.array([5], dtype=np.uint64))  # one n-gram: 31 empty bins
    assert (stored_keys([a]) == NO_KEY).all()
    assert not stored_share_band([a], [a])[0]
    assert not stored_share_band([bytes(BINS)], [bytes(BINS)])[0]
    assert not stored_share_band([None], [bytes(range(1, 33))])[0]
    assert stored_share_band([bytes(range(1, 33))], [bytes(range(1, 33))])[0]


def expected_pairs(pdf, cfg) -> set[tuple[str, str, str]]:
    """Every pair the rule accepts, by brute force over all documents: identical groups (fingerprint and
    text) stand for their members, and a pair of groups is a candidate when within k or when its
    sketches share a band."""
    from simhash_spark.core.fingerprint import Fingerprinter, check_filter
    from simhash_spark.core.rules import PairRule
    from simhash_spark.core.verify import IDENTICAL

    batch = Fingerprinter(cfg.model, check_filter(cfg.model, cfg.verify)).batch(pdf["text"].tolist())
    docs = [
        (i, t, int(f), int(n), s)
        for i, t, f, n, s, ok in zip(
            pdf["id"],
            pdf["text"],
            batch.fingerprint,
            batch.n_chars,
            batch.check_summary,
            batch.has_fingerprint,
            strict=True,
        )
        if ok
    ]
    groups: dict[tuple[int, str], list] = {}
    for doc in sorted(docs):
        groups.setdefault((doc[2], doc[1]), []).append(doc)
    rule = PairRule(cfg.policy, cfg.verify, cfg.normalize)
    out = {(a[0], b[0], IDENTICAL) for g in groups.values() for a, b in itertools.combinations(g, 2)}
    for ga, gb in itertools.combinations(groups.values(), 2):
        (_, ta, fa, na, sa), (_, tb, fb, nb, sb) = ga[0], gb[0]
        d = ((fa ^ fb) & (2**64 - 1)).bit_count()
        band = bool(stored_share_band([sa], [sb])[0])
        sim = rule.similarity(ta, tb) if rule.needs_text_check(d, within_k=d <= rule.k(na, nb)) else None
        reason = rule.reason(d, na, nb, similarity=sim, shares_band=band)
        if reason is not None:
            out |= {(min(x[0], y[0]), max(x[0], y[0]), reason) for x in ga for y in gb}
    return out


@pytest.mark.parametrize("where", ["driver", "in_task", "shuffled"])
def test_the_job_finds_what_brute_force_finds_within_k_or_sharing_a_band(spark, where):
    from simhash_spark.config import load_config
    from simhash_spark.demo.corpus import generate
    from simhash_spark.pipeline import dedup

    pdf = generate(70, seed=31, dup_share=0.7).to_pandas()[["id", "text"]]
    pdf = pd.concat([pdf, pdf.head(3).assign(id=lambda f: f["id"] + "-copy")], ignore_index=True)
    overrides = ["match.sketch_bands=true", "match.max_distance=2", "bands.scheme=blocks:4"]
    local_max = {"driver": 100_000, "in_task": 0, "shuffled": 0}[where]
    in_task_max = 0 if where == "shuffled" else 10_000_000
    cfg = load_config(
        overrides=[
            *overrides,
            f"cluster.local_max_documents={local_max}",
            f"bands.in_task_max_fingerprints={in_task_max}",
        ]
    )
    res = dedup(spark, spark.createDataFrame(pdf), cfg)
    got = {(r["id_a"], r["id_b"], r["reason"]) for r in res.pairs.collect()}
    assert res.stats["bands"]["join"] == where
    want = expected_pairs(pdf, cfg)
    assert got == want
    beyond_k = [p for p in res.pairs.collect() if p["distance"] > 2]
    assert beyond_k and all(p["reason"] == "verified" for p in beyond_k)
    assert res.stats["sketch_bands"]["candidate_pairs"] > 0
    # every path drops the candidates whose sketches show them unrelated before reading their texts
    assert res.stats["verify"]["sketch_filter"] and res.stats["verify"]["sketch_rejected"] >= 0
    res.unpersist()


def test_the_driver_path_drops_pairs_whose_sketches_barely_agree_before_reading_texts():
    from simhash_spark.config import load_config
    from simhash_spark.core.link_local import Documents, LinkSettings, find_candidates, link_local
    from simhash_spark.link_model import LinkParams
    from simhash_spark.transforms.designs import design_rules

    cfg = load_config(overrides=["match.sketch_bands=true"])
    params = LinkParams.from_config(cfg, titled=False)
    same = bytes(range(1, 33))
    unrelated = bytes(range(101, 133))
    sketches = [same, same, unrelated, None]
    # a, b, c share every band but c's sketch disagrees with theirs; d has no sketch: checked
    docs = Documents(
        ids=np.array(["a", "b", "c", "d"], dtype=object),
        fingerprints=np.array([0, 1, 3, 7], dtype=np.int64),
        n_chars=np.full(4, 500, dtype=np.int64),
        text_hash=np.arange(4, dtype=np.int64),
        sketches=sketches,
        sketch_keys=stored_keys(sketches),
    )
    settings = LinkSettings(params.rule, "blocks:13", design_rules(cfg.bands, in_task=True), 1000, True)
    asked: list[set] = []

    def texts(ids: set) -> dict:
        asked.append(set(ids))
        return dict.fromkeys(ids, "一样的文字" * 20)

    linked = link_local(find_candidates(docs, settings), settings, texts)
    assert linked.sketch_rejected == 2  # (a, c) and (b, c): never checked, though their texts are equal
    assert {(p[0], p[1]) for p in linked.pairs} == {("a", "b"), ("a", "d"), ("b", "d"), ("c", "d")}
    assert asked == [{"a", "b", "c", "d"}]  # c's text for its pair with d, which has no sketch


def _partition(pairs) -> set[frozenset]:
    parent: dict = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b, *_ in pairs:
        parent[find(a)] = find(b)
    groups: dict = {}
    for x in list(parent):
        groups.setdefault(find(x), set()).add(x)
    return {frozenset(g) for g in groups.values()}


@pytest.mark.heavy
@pytest.mark.parametrize("where", ["driver", "in_task", "shuffled"])
def test_hot_bucket_forests_take_pairs_beyond_their_k_that_share_a_band(spark, where):
    """Length steps make every pair's k 2 while the band join is built for 6; with a hot-bucket limit of
    2 most pairs within 6 bits are decided by the forests, which must accept a pair beyond its k that
    shares a sketch band (the clusters of brute force, whatever the path)."""
    from simhash_spark.config import load_config
    from simhash_spark.demo.corpus import generate
    from simhash_spark.pipeline import dedup

    # pairs only (an edited copy of each of 40 articles): no sketch key is shared by more than two
    base = generate(90, seed=31, dup_share=0.0).to_pandas()[["id", "text"]]

    def edited(text: str) -> str:  # one sentence of the middle left out
        parts = text.split("。")
        return "。".join(parts[: len(parts) // 2] + parts[len(parts) // 2 + 1 :])

    copies = base.head(40).assign(id=lambda f: f["id"] + "-copy", text=lambda f: f["text"].map(edited))
    pdf = pd.concat([base, copies], ignore_index=True)
    overrides = [
        "match.sketch_bands=true",
        "match.max_distance=2",
        "match.length_steps=[[0, 2], [100000, 6]]",
        "bands.scheme=blocks:7",
        "bands.hot_bucket_limit=2",
    ]
    local_max = {"driver": 100_000, "in_task": 0, "shuffled": 0}[where]
    in_task_max = 0 if where == "shuffled" else 10_000_000
    cfg = load_config(
        overrides=[
            *overrides,
            f"cluster.local_max_documents={local_max}",
            f"bands.in_task_max_fingerprints={in_task_max}",
        ]
    )
    res = dedup(spark, spark.createDataFrame(pdf), cfg)
    assert res.stats["hot_buckets"] > 0 and res.stats["bands"]["join"] == where
    assert res.stats["sketch_bands"]["hot_keys"] == 0
    got = {}
    for r in res.documents.where("cluster_size > 1").collect():
        got.setdefault(r["cluster_id"], set()).add(r["id"])
    want = _partition(expected_pairs(pdf, cfg))
    assert {frozenset(g) for g in got.values()} == want
    res.unpersist()


def test_through_spark_connect_auto_turns_them_off_and_true_is_refused(spark, monkeypatch):
    """A Spark Connect session's fingerprint pass keeps no sketches: "auto" runs without the sketch
    bands there, an explicit true fails before any work."""
    from simhash_spark import pipeline
    from simhash_spark.config import load_config
    from simhash_spark.errors import ConfigError

    assert pipeline.for_session(spark, load_config()).sketch_bands  # classic: on
    monkeypatch.setattr(pipeline, "spark_context", lambda session: None)  # what a Connect session gives
    resolved = pipeline.for_session(spark, load_config())
    assert (resolved.match.sketch_bands, resolved.sketch_bands) == ("false", False)
    with pytest.raises(ConfigError, match=r"match\.sketch_bands: not through Spark Connect"):
        pipeline.for_session(spark, load_config(overrides=["match.sketch_bands=true"]))


@pytest.mark.heavy
def test_pairs_judged_inside_the_band_join_tasks_match_the_joins_of_the_sketches(spark):
    """The in-task band join judges each candidate by the sketch filter where it finds it; the shuffled
    join judges them afterwards by joining the sketches: the same candidates rejected, the same outputs."""
    from simhash_spark.config import load_config
    from simhash_spark.demo.corpus import generate
    from simhash_spark.pipeline import dedup

    raw = spark.createDataFrame(generate(150, seed=12, dup_share=0.5).to_pandas()[["id", "text"]])
    wide = ["cluster.local_max_documents=0", "match.max_distance=16", "match.sketch_bands=true"]

    def run(in_task_max: int):
        cfg = load_config(overrides=[*wide, f"bands.in_task_max_fingerprints={in_task_max}"])
        res = dedup(spark, raw, cfg)
        out = sorted(map(tuple, res.pairs.collect())), sorted(map(tuple, res.documents.collect())), res.stats
        res.unpersist()
        return out

    pairs, docs, stats = run(10_000_000)
    s_pairs, s_docs, s_stats = run(0)
    assert (stats["bands"]["join"], s_stats["bands"]["join"]) == ("in_task", "shuffled")
    assert stats["verify"]["sketch_rejected"] == s_stats["verify"]["sketch_rejected"] > 0
    assert stats["verify"]["passed"] == s_stats["verify"]["passed"]
    assert (pairs, docs) == (s_pairs, s_docs) and pairs
