"""Invalid UTF-8 repaired in Python (``core.utf8``) as Spark repairs it (``valid_text``), and the fingerprint
stage's two ways of repairing (in the Arrow UDF; on the JVM before a pandas UDF) giving the same rows."""

import random

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.config import load_config
from simhash_spark.core.check_filter import CheckFilter
from simhash_spark.core.fingerprint import check_filter
from simhash_spark.core.utf8 import repaired_texts
from simhash_spark.transforms import fingerprint as fingerprint_stage
from simhash_spark.transforms.fingerprint import _is_invalid_utf8, add_fingerprints, valid_text

GOOD = "新华社北京电 国务院总理今天主持召开常务会议，部署进一步做好稳就业工作。"
# valid sequences, truncated ones, overlong forms, surrogates, code points past U+10FFFF, stray bytes
PIECES = [
    "中".encode(), b"a", "😀".encode(), "é".encode(), b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf",
    b"\xe0\x80\xaf", b"\xf8\x88\x80\x80\x80", b"\xff", b"\x80", b"\xe4\xb8", b"\xf0\x9f", b"\xf0\x9f\x98",
    b"\xc3", "\ufffd".encode(), b"\x00",
]  # fmt: skip


def fuzzed(n: int, seed: int) -> list[bytes | None]:
    rnd = random.Random(seed)
    out: list[bytes | None] = [None, b"", GOOD.encode(), b"\xff" + GOOD.encode()]
    for i in range(n):
        if i % 3 == 0:
            out.append(bytes(rnd.randrange(256) for _ in range(rnd.randint(0, 12))))
        else:
            out.append(b"".join(rnd.choice(PIECES) for _ in range(rnd.randint(0, 10))))
    return out


def as_strings(values: list[bytes | None], large: bool = False) -> pa.Array:
    """The bytes as Spark hands them to Python: a string array, whatever the bytes."""
    binary, string = (pa.large_binary(), pa.large_string()) if large else (pa.binary(), pa.string())
    return pa.array(values, binary).view(string)


def test_a_valid_batch_is_decoded_as_it_is():
    texts, repaired = repaired_texts(pa.array([GOOD, None, "", "😀"]))
    assert texts == [GOOD, None, "", "😀"] and repaired is None


@pytest.mark.parametrize("large", [False, True])
def test_only_the_invalid_rows_are_repaired_and_flagged(large):
    values = [GOOD.encode(), None, b"\xed\xa0\x80" + GOOD.encode(), b"ok\xff"]
    texts, repaired = repaired_texts(as_strings(values, large))
    assert texts == [GOOD, None, "\ufffd\ufffd\ufffd" + GOOD, "ok\ufffd"]
    assert repaired is not None and repaired.tolist() == [False, False, True, True]


@pytest.mark.skipif(
    not fingerprint_stage._ARROW_UDFS,
    reason="the Python repair runs only where Spark has Arrow UDFs (4.1 and later); before, the JVM repairs "
    "every text, and Spark 3.5's decoder replaces some malformed sequences with fewer U+FFFD",
)
def test_python_repairs_what_spark_repairs_as_spark_does(spark):
    values = fuzzed(6000, seed=3)
    df = spark.createDataFrame([(i, v) for i, v in enumerate(values)], "i int, b binary")
    text = F.col("b").cast("string")
    rows = df.select("i", valid_text(text).alias("t"), _is_invalid_utf8(text).alias("bad")).collect()
    by_spark = {r["i"]: (r["t"], r["bad"]) for r in rows}
    texts, repaired = repaired_texts(as_strings(values))
    assert repaired is not None and 1000 < int(repaired.sum()) < len(values)
    for i, value in enumerate(values):
        expected_text, expected_bad = by_spark[i]
        assert (texts[i], bool(repaired[i])) == (expected_text, bool(expected_bad) and value is not None), (
            value
        )


def _stage_rows(spark, values, check: CheckFilter | None):
    docs = spark.createDataFrame([(i, v) for i, v in enumerate(values)], "id int, b binary").select(
        C.ID, F.col("b").cast("string").alias(C.TEXT)
    )
    out = add_fingerprints(docs, model=load_config().model, check=check, text_hash=True)
    return sorted(tuple(r) for r in out.collect())


@pytest.mark.skipif(not fingerprint_stage._ARROW_UDFS, reason="Arrow UDFs: Spark 4.1 and later")
def test_the_arrow_udf_repairs_give_the_rows_the_jvm_repairs_give(spark, monkeypatch):
    cfg = load_config()
    check = check_filter(cfg.model, cfg.verify)
    words = [GOOD[i : i + 7].encode() for i in range(0, len(GOOD), 7)]
    rnd = random.Random(5)
    values = [
        b"".join(rnd.choice(words) + (rnd.choice(PIECES) if rnd.random() < 0.3 else b"") for _ in range(8))
        for _ in range(300)
    ]
    values += [None, b"", b"\xff\xfe", GOOD.encode(), b"\xed\xa0\x80" + GOOD.encode()]
    in_python = _stage_rows(spark, values, check)
    monkeypatch.setattr(fingerprint_stage, "_ARROW_UDFS", False)
    on_the_jvm = _stage_rows(spark, values, check)
    assert in_python == on_the_jvm
    statuses = np.array([r[3] for r in in_python])
    assert (statuses == "invalid_utf8").sum() > 50 and (statuses == "ok").sum() > 50
