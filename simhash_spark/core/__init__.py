"""Pure-Python core: normalization, tokenization, features and SimHash. Never imports pyspark."""
