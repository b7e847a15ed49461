"""The job's stages as DataFrame → DataFrame functions: no I/O, each taking the frames it needs and its own
small parameters, each ending in a ``select`` that fixes its output columns (the column contract is in its
docstring). In the order a document meets them:

- ``fingerprint``: text → fingerprint, status, length;
- ``identical``: documents grouped by fingerprint (and text), expanded back for pairs/;
- ``designs``, ``hot_buckets``, ``candidates``: the band design, buckets too large to join, the band join;
- ``verify``: candidates → accepted pairs under the pair rule (``core.rules``);
- ``components``, ``clusters``: connected components, then documents/, clusters/, deduplicated/ rows;
- ``index_rows``, ``incremental``: the index's key rows, and a batch's view of what it touches.

Helpers, not stages: ``driver_frames`` (rows the driver computed, as DataFrames) and ``classic`` (what a
classic session has that Spark Connect has not).

Stages that return numbers run actions: ``designs.choose_design`` (one aggregation over a sample),
``identical.cross_group_pair_count`` (one aggregation) and ``components.connected_components`` (one
count per round until a fixpoint).
"""
