"""The column functions give the job's fingerprints on any DataFrame; dedup takes overrides as a mapping."""

from simhash_spark import columns as C
from simhash_spark import dedup
from simhash_spark.config import load_config
from simhash_spark.functions import simhash, simhash_hex
from simhash_spark.transforms.fingerprint import add_fingerprints

TEXTS = [
    "国务院常务会议部署稳就业工作，强调就业是最大的民生。",
    None,
    "",
    "短",
    "同一篇文章的另一个版本，内容大体相同。",
]


def test_simhash_of_any_string_column_equals_the_jobs_fingerprint(spark):
    df = spark.createDataFrame([(i, t) for i, t in enumerate(TEXTS)], "key long, body string")
    got = {
        r["key"]: (r["fp"], r["hex"])
        for r in df.select("key", simhash("body").alias("fp"), simhash_hex(df.body).alias("hex")).collect()
    }
    job = add_fingerprints(df.selectExpr("key as id", "body as text"), model=load_config().model).collect()
    assert {r[C.ID]: (r[C.FINGERPRINT], r[C.FINGERPRINT_HEX]) for r in job} == got
    assert got[0][0] is not None and got[1] == (None, None)


def test_dedup_takes_overrides_as_a_mapping(spark):
    df = spark.createDataFrame([(i, t) for i, t in enumerate(TEXTS * 2)], "id long, text string")
    res = dedup(
        spark, df, overrides={"match.max_distance": 3, "bands.scheme": "4x16", "output.write_report": False}
    )
    assert res.stats["bands"]["scheme"] == "4x16" and res.stats["bands"]["max_distance"] == 3
    assert res.documents.count() == len(TEXTS) * 2
    res.unpersist()


def test_simhash_of_a_number_or_bytes_column_fails_naming_the_column_and_its_type(spark):
    import pytest

    df = spark.createDataFrame([(1, 2, b"x", "text")], "key long, n int, raw binary, body string")
    for column, kind in (("n", "int"), ("raw", "binary")):
        with pytest.raises(
            Exception, match=rf"simhash: column '{column}' has type {kind}; expected a string"
        ):
            df.select(simhash(column)).collect()
    with pytest.raises(Exception, match=r"has type bigint; expected a string"):
        df.select(simhash(df.key)).collect()
    assert df.select(simhash("body")).collect()[0][0] is not None
