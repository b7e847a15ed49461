"""``bands.scheme = "auto"``: the choice of a table design from bucket counts (pure Python).

For every exact design worth considering, the number of candidate pairs its tables would produce is
Σ size·(size−1)/2 over its buckets, counted on (a deterministic hash sample of) the distinct fingerprints
and scaled by 1/fraction² when sampled — by Spark (``transforms.designs``) or on the driver
(``core.link_local``); both hand the counts to ``decide_design``. The estimated work of a design is its
rows (fingerprints × tables) plus its candidate pairs at ``pair_cost`` rows each. What a row costs depends on
the join: exploded, shuffled and sorted by Spark (``SHUFFLED_PAIR_COST``: a pair, one vectorized popcount
inside its bucket, is nearly free beside it), or one element of a table sorted in numpy inside a task
(``IN_TASK_PAIR_COST``: rows and pairs cost the same order of time, so designs of more bits win). The
cheapest exact design wins when its candidate pairs per fingerprint fit the budget; otherwise the cheapest
LSH design that reaches the recall, its bucket sizes estimated from the sample's bit frequencies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from simhash_spark.core.bands import BandScheme, BitModel, cheapest_lsh, exact_candidates

MAX_TABLES_COUNTED = 80  # tables across all counted designs: bounds the counting work
# The cost of comparing one in-bucket pair in place (core.bucket_pairs) relative to one row of a table:
# through explode, shuffle, sort and Arrow (calibrated with bench/scale.py), or sorted in numpy inside a task
# (calibrated with bench/band_join.py); docs/benchmarks.md has the numbers.
SHUFFLED_PAIR_COST = 0.005
IN_TASK_PAIR_COST = 0.08


@dataclass(frozen=True)
class DesignRules:
    min_recall: float  # LSH designs: recall at distance k
    max_pairs_per_doc: float  # exact designs: candidate pairs per distinct fingerprint
    hot_bucket_limit: int  # LSH designs keep random buckets under a quarter of it
    sample_rows: int  # bucket counts on a deterministic sample of about this many fingerprints
    pair_cost: float = SHUFFLED_PAIR_COST  # a candidate pair's cost in rows of a table (see the module doc)


def auto_designs(k: int) -> list[BandScheme]:
    """The exact designs whose buckets are counted, cheapest first, within ``MAX_TABLES_COUNTED`` tables."""
    chosen: list[BandScheme] = []
    total = 0
    for d in exact_candidates(k, max_tables=MAX_TABLES_COUNTED):
        if total + d.n_tables(k) > MAX_TABLES_COUNTED and chosen:
            break
        chosen.append(d)
        total += d.n_tables(k)
    return chosen


def decide_design(
    designs: list[BandScheme],
    measured: dict[int, tuple[float, int]],
    *,
    n: int,
    k: int,
    fraction: float,
    rules: DesignRules,
    bits: Callable[[], BitModel],
) -> tuple[BandScheme, dict[str, Any]]:
    """``measured``: per design (its index in ``designs``) the sample's random-collision pairs and largest
    bucket; ``bits``: the sample's bit frequencies, asked for only when LSH is needed. Returns the design
    and the numbers behind the choice (for summary.json)."""
    report: list[dict[str, Any]] = []
    best: tuple[float, BandScheme] | None = None
    for i, d in enumerate(designs):
        sampled_pairs, largest = measured.get(i, (0.0, 0))
        pairs = sampled_pairs / (fraction * fraction)
        work = rules.pair_cost * pairs + n * d.n_tables(k)
        report.append(
            {
                "scheme": d.spec,
                "tables": d.n_tables(k),
                "estimated_candidate_pairs": round(pairs),
                "largest_bucket_in_sample": largest,
                "estimated_work": round(work),
            }
        )
        if pairs <= rules.max_pairs_per_doc * max(n, 1) and (best is None or work < best[0]):
            best = (work, d)
    extra: dict[str, Any] = {}
    if best is not None:
        chosen, why = best[1], "cheapest exact design within the pair budget"
    else:
        # random buckets well under the hot-bucket limit, so that only real pile-ups take the forest path;
        # bucket sizes from the sample's own bit frequencies (real SimHash bits are skewed), not 2^-r
        model = bits() if n else BitModel.uniform()
        chosen = cheapest_lsh(
            k,
            rules.min_recall,
            max(n, 1),
            pair_cost=rules.pair_cost,
            max_bucket=rules.hot_bucket_limit / 4,
            bits=model,
        )
        why = (
            f"no exact design within {rules.max_pairs_per_doc} pairs per fingerprint: "
            f"cheapest LSH at recall >= {rules.min_recall}"
        )
        extra = {"largest_bit_skew": round(max(abs(p - 0.5) for p in model.ones), 4)}
    return chosen, {
        "chosen": chosen.spec,
        "reason": why,
        "exact": chosen.exact,
        "recall_at_k": round(chosen.recall(k), 6),
        "sample_fraction": round(fraction, 6),
        "designs": report,
        **extra,
    }
