"""The persistent fingerprint index of incremental runs (``--index PATH``).

- ``store``: the index on storage — manifest versions (atomic create-if-absent commits), snapshot folders
  with their writer marks, cleanup of what is provably the index's own (no Spark);
- ``snapshots``: reading and writing snapshot folders with Spark;
- ``session``: one run's use of the index — ``IndexSession`` owns the run date, the rule that a run sees
  only earlier dates, and the open → lookup → commit → finish protocol;
- ``admin``: ``index stats`` and ``index compact``; ``check``: the online check (no Spark).

The index as data (layout, manifest, model signature, monitor) is pure Python in
``simhash_spark.core.index_model``.
"""
