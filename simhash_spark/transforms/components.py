"""Connected components in Spark by alternating large-star / small-star rounds.

Kiveris et al., "Connected Components in MapReduce and Beyond" (SoCC 2014): both operations keep the
connectivity of the graph and shrink it towards a forest of stars, each centred on its component's
smallest node, in O(log² n) rounds whatever the shape (long chains included; min-label propagation
would need as many rounds as the diameter). Every round is materialized with ``localCheckpoint`` so
the plan stays flat. Nothing is collected to the driver but one count per round.

It runs actions: one count per round, until a fixpoint.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.core.components import component_labels


@dataclass(frozen=True)
class Components:
    assignments: DataFrame  # node, component (the component's smallest node); only nodes with an edge
    iterations: int  # distributed rounds (0 when solved on the driver)
    method: str  # "local" (collected, numpy) or "distributed"
    # (nodes, labels) as ``assignments`` holds them, when solved on the driver: what the assembly can use
    # there without reading ``assignments`` back
    labelled: tuple[np.ndarray, np.ndarray] | None = None


class ComponentsDidNotConverge(RuntimeError):
    pass


def _oriented(edges: DataFrame) -> DataFrame:
    """(u, v) with v < u, no self loops, no duplicates: u = larger endpoint."""
    return (
        edges.where(F.col(C.SRC) != F.col(C.DST))
        .select(
            F.greatest(C.SRC, C.DST).alias("u"),
            F.least(C.SRC, C.DST).alias("v"),
        )
        .distinct()
    )


def _large_star(e: DataFrame) -> DataFrame:
    """Every node x links its larger neighbours to m(x) = min(neighbours ∪ {x})."""
    both = e.select(F.col("u").alias("x"), F.col("v").alias("y")).unionByName(
        e.select(F.col("v").alias("x"), F.col("u").alias("y"))
    )
    m = both.groupBy("x").agg(F.min("y").alias("my"))
    return (
        both.where(F.col("y") > F.col("x"))
        .join(m, on="x", how="inner")
        .select(F.col("y").alias("u"), F.least(F.col("x"), F.col("my")).alias("v"))
        .distinct()
    )


def _small_star(e: DataFrame) -> DataFrame:
    """Every node u links itself and its smaller neighbours to the smallest of them."""
    m = e.groupBy("u").agg(F.min("v").alias("m"))
    j = e.join(m, on="u", how="inner")
    moved = j.where(F.col("v") != F.col("m")).select(F.col("v").alias("u"), F.col("m").alias("v"))
    own = m.select(F.col("u"), F.col("m").alias("v"))
    return moved.unionByName(own).distinct()


def _is_star_forest(e: DataFrame) -> bool:
    """Every larger end has exactly one edge, and no smaller end is itself a larger end: each component is
    then one star centred on its minimum (connectivity is preserved by both operations)."""
    larger_ends = e.select(F.col("u").alias("v")).distinct()
    if not e.join(larger_ends, on="v", how="left_semi").isEmpty():
        return False
    return e.groupBy("u").count().where(F.col("count") > 1).isEmpty()


def connected_components(
    edges: DataFrame, *, max_iterations: int = 100, local_max_edges: int = 0
) -> Components:
    """Connected components of an undirected graph.

    In: ``src``, ``dst`` (any orderable type, both non-null). Out (``assignments``): ``node``,
    ``component`` = the smallest node of its component, one row per node that has an edge. A graph of at
    most ``local_max_edges`` distinct edges is collected and solved on the driver
    (``core.components``); a larger one by the distributed rounds.
    """
    e = _oriented(edges).localCheckpoint(eager=True)
    n_edges = e.count()
    if n_edges == 0:
        none = np.array([], dtype=object)
        assignments = e.select(F.col("u").alias(C.NODE), F.col("v").alias(C.COMPONENT))
        return Components(assignments, 0, "local", (none, none))
    if n_edges <= local_max_edges:
        return _local(e)
    for i in range(1, max_iterations + 1):
        nxt = _small_star(_large_star(e)).localCheckpoint(eager=True)
        e = nxt
        if _is_star_forest(e):
            assignments = e.select(F.col("u").alias(C.NODE), F.col("v").alias(C.COMPONENT)).unionByName(
                e.select(F.col("v").alias(C.NODE), F.col("v").alias(C.COMPONENT)).distinct()
            )
            return Components(assignments, i, "distributed")
    raise ComponentsDidNotConverge(
        f"connected components did not converge in {max_iterations} rounds (cluster.max_iterations)"
    )


def _local(e: DataFrame) -> Components:
    """The oriented edges collected, labelled on the driver, and handed back as a DataFrame."""
    node_type = e.schema["u"].dataType.simpleString()
    pdf: pd.DataFrame = e.toPandas()
    nodes, labels = component_labels(pdf["u"].to_numpy(), pdf["v"].to_numpy())
    out = pd.DataFrame({C.NODE: nodes, C.COMPONENT: labels})
    schema = f"{C.NODE} {node_type}, {C.COMPONENT} {node_type}"
    return Components(e.sparkSession.createDataFrame(out, schema=schema), 0, "local", (nodes, labels))
