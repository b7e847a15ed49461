"""The fingerprint stage in Spark gives what the pure fingerprinter gives, row by row."""

from simhash_spark import columns as C
from simhash_spark.config import load_config
from simhash_spark.core.fingerprint import Fingerprinter
from simhash_spark.transforms.fingerprint import add_fingerprints

TEXTS = [
    "新华社北京电 国务院总理今天主持召开常务会议，部署进一步做好稳就业工作。",
    "<p>新华社北京电 国务院总理今天主持召开常务会议，部署进一步做好稳就业工作。</p>",
    None,
    "",
    "短",
    "English text mixed with 中文 and numbers 2026.",
]


def test_spark_fingerprints_equal_the_pure_fingerprinter(spark):
    cfg = load_config()
    docs = spark.createDataFrame([(i, t) for i, t in enumerate(TEXTS)], "id long, text string")
    got = {
        r[C.ID]: (r[C.FINGERPRINT], r[C.STATUS], r[C.N_CHARS])
        for r in add_fingerprints(docs, model=cfg.model).collect()
    }
    batch = Fingerprinter(cfg.model).batch(TEXTS)
    for i in range(len(TEXTS)):
        fp = int(batch.fingerprint[i]) if batch.has_fingerprint[i] else None
        assert got[i] == (fp, batch.status[i], int(batch.n_chars[i])), i


def test_spark_fingerprints_with_variants_equal_the_pure_fingerprinter(spark):
    """OpenCC's converter is built in each worker (never pickled): the Spark stage gives the same
    fingerprints, and a traditional text gets its simplified edition's fingerprint."""
    cfg = load_config(overrides=['normalize.variants="t2s"'])
    texts = ["新華社北京電 國務院總理今天主持召開常務會議，部署進一步做好穩就業工作。", TEXTS[0], *TEXTS[2:]]
    docs = spark.createDataFrame([(i, t) for i, t in enumerate(texts)], "id long, text string")
    got = {r[C.ID]: r[C.FINGERPRINT] for r in add_fingerprints(docs, model=cfg.model).collect()}
    batch = Fingerprinter(cfg.model).batch(texts)
    assert [got[i] for i in range(len(texts))] == [
        int(f) if ok else None for f, ok in zip(batch.fingerprint, batch.has_fingerprint, strict=True)
    ]
    assert got[0] is not None and got[0] == Fingerprinter(cfg.model).batch([TEXTS[0]]).fingerprint[0]
