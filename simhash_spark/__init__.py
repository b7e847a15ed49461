"""simhash_spark: near-duplicate detection with 64-bit SimHash on PySpark.

The Python API::

    from simhash_spark import build_session, dedup, load_config

    cfg = load_config(overrides=["match.max_distance=10"])
    spark = build_session(cfg)
    result = dedup(spark, spark.read.parquet("corpus.parquet"), cfg)
    result.pairs.show()
    result.unpersist()  # the returned DataFrames are persisted until then

Names are imported on first use, so ``import simhash_spark`` alone does not start (or need) Spark.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "dedup": "simhash_spark.pipeline",
    "run": "simhash_spark.pipeline",
    "DedupResult": "simhash_spark.pipeline",
    "load_config": "simhash_spark.config",
    "Config": "simhash_spark.config",
    "build_session": "simhash_spark.session",
}
__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'simhash_spark' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
