"""Fingerprinting on the driver (inputs of at most ``cluster.local_max_documents`` rows and
``cluster.local_max_characters`` characters) gives the outputs of the Spark UDF path, row by row, over the
awkward rows: null, empty and markup-only texts, invalid UTF-8 in a text and in a title, pass-through
columns of other types, a representative chosen by a column, titles under the rule "and". It is taken only
when the input is small."""

import datetime as dt
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from simhash_spark import columns as C
from simhash_spark.config import load_config
from simhash_spark.demo.corpus import generate
from simhash_spark.io import prepare_docs
from simhash_spark.pipeline import dedup
from simhash_spark.report.collect import collect_report
from simhash_spark.transforms.fingerprint import is_small_input, local_fingerprints

OUTPUTS = ("documents", "pairs", "clusters", "deduplicated")
CASES = {
    "defaults": [],
    "titles_policy_passthrough": [
        "input.title_column=title",
        "title.rule=and",
        "title.max_distance=16",
        "cluster.representative=max:score",
        'input.passthrough_columns=["published", "tags"]',
    ],
}


def _invalid(prefix: bytes, text: str) -> pa.Array:
    return pa.array([prefix + text.encode()], pa.binary()).view(pa.string())


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    table = generate(40, seed=31, dup_share=0.6).select(["id", "title", "text"])
    good, title = table.column("text")[0].as_py(), table.column("title")[0].as_py()
    odd = {
        "id": ["null-text", "empty", "markup", "bad-text", "bad-title"],
        "title": pa.concat_arrays(
            [pa.array([None, "", "<b></b>", title], pa.string()), _invalid(b"\xff", title)]
        ),
        "text": pa.concat_arrays(
            [
                pa.array([None, "", "<p>&nbsp;</p>"], pa.string()),
                _invalid(b"\xed\xa0\x80", good),
                pa.array([good + "。"], pa.string()),
            ]
        ),
    }
    table = pa.concat_tables([table, pa.table(odd, schema=table.schema)])
    n = table.num_rows
    published = [dt.datetime(2026, 1, 1) + dt.timedelta(hours=i) for i in range(n)]
    table = table.append_column("published", pa.array(published, pa.timestamp("us")))
    table = table.append_column("tags", pa.array([[f"t{i % 3}"] * (i % 2) for i in range(n)]))
    table = table.append_column("score", pa.array([None if i % 5 == 0 else float(i % 7) for i in range(n)]))
    path = tmp_path_factory.mktemp("local-fp") / "corpus.parquet"
    pq.write_table(table, path)
    return str(path)


def _rows(df):
    return sorted(json.dumps(r.asDict(), sort_keys=True, default=str) for r in df.collect())


def _run(spark, path, overrides):
    res = dedup(spark, spark.read.parquet(path), load_config(overrides=overrides))
    out = {name: _rows(getattr(res, name)) for name in OUTPUTS}
    out["texts"] = _rows(res.texts)
    # small runs draw the report's data on the driver (min_id, longest_text), others by Spark: the same
    held = res.report_at_hand
    report = held({}) if held else collect_report({}, res.documents, res.pairs, res.texts)
    out["report"] = report
    stats = {**res.stats, "report_on_driver": held is not None}
    res.unpersist()
    return out, stats


@pytest.mark.heavy
@pytest.mark.parametrize("name", list(CASES))
def test_driver_fingerprints_equal_the_spark_fingerprints(spark, corpus, name):
    on_driver, driver_stats = _run(spark, corpus, CASES[name])
    in_spark, spark_stats = _run(spark, corpus, [*CASES[name], "cluster.local_max_characters=0"])
    assert (driver_stats.pop("fingerprinted_on"), spark_stats.pop("fingerprinted_on")) == (
        "driver",
        "executors",
    )
    for key in (*OUTPUTS, "texts", "report"):
        assert on_driver[key] == in_spark[key], key
    assert (driver_stats.pop("report_on_driver"), spark_stats.pop("report_on_driver")) == (
        name == "defaults",
        False,
    )
    assert driver_stats == spark_stats
    statuses = driver_stats["status"]
    assert statuses["invalid_utf8"] == 1 and statuses["null_text"] == 1 and statuses["empty"] == 2
    assert driver_stats["pairs_accepted"] > 10
    documents = [json.loads(r) for r in on_driver["documents"]]
    assert len(documents) == spark.read.parquet(corpus).count()
    bad = next(d for d in documents if d["id"] == "bad-text")
    assert bad["status"] == "invalid_utf8" and bad["cluster_size"] > 1  # repaired, still matched


def test_small_means_few_rows_few_characters_and_ids_arrow_can_carry(spark, tmp_path):
    texts = [*generate(10, seed=5, dup_share=0).column("text").to_pylist(), None]
    table = pa.table({"id": [f"d{i}" for i in range(11)], "text": texts})
    chars = sum(len(t or "") for t in texts)
    path = str(tmp_path / "t.parquet")
    pq.write_table(table, path)
    docs = prepare_docs(spark.read.parquet(path), load_config())

    def small(rows, max_chars):
        return is_small_input(docs, max_documents=rows, max_characters=max_chars)

    assert small(11, chars)
    assert not small(10, chars)  # one row too many
    assert not small(11, chars - 1)  # one character too many
    assert not small(0, chars) and not small(11, 0)  # 0 = never
    assert not small(11, 10)  # planned larger than 4 bytes a character: not even probed
    bad_ids = pa.table({"id": _invalid(b"\xff", "x"), "text": ["新闻"]})
    pq.write_table(bad_ids, tmp_path / "bad.parquet")
    bad_docs = prepare_docs(spark.read.parquet(str(tmp_path / "bad.parquet")), load_config())
    assert not is_small_input(bad_docs, max_documents=10, max_characters=1_000_000)


def test_a_large_input_is_fingerprinted_by_the_executors(spark, corpus):
    res = dedup(spark, spark.read.parquet(corpus), load_config(overrides=["cluster.local_max_documents=10"]))
    assert res.stats["fingerprinted_on"] == "executors"
    assert C.FINGERPRINT in res.documents.columns
    res.unpersist()


def test_forked_workers_give_the_fingerprints_of_one_process():
    # more than one batch of documents, odd rows among them, so the batches split across the workers
    table = generate(1200, seed=5, dup_share=0.3)
    texts = table.column("text").to_pylist()
    texts[7], texts[1100], texts[1101] = None, "", "<p>&nbsp;</p>"
    local = pd.DataFrame(
        {
            C.ID: table.column("id").to_pylist(),
            C.TEXT: texts,
            "_invalid": [i == 1150 for i in range(len(texts))],
            C.TEXT_HASH: np.arange(len(texts), dtype=np.int64),
        }
    )
    model = load_config().model
    one = local_fingerprints(local, model=model, title_model=None, processes=1)
    two = local_fingerprints(local, model=model, title_model=None, processes=2)
    pd.testing.assert_frame_equal(one, two)
    assert one[C.STATUS].nunique() > 2  # the odd rows kept their statuses
