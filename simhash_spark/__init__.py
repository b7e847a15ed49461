"""simhash_spark: near-duplicate detection with 64-bit SimHash on PySpark."""

__version__ = "0.1.0"
