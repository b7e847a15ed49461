"""Rendering the run report from plain data (no Spark): plots as inline SVG (``report.plots``), texts
diffed with difflib. The example texts are shown as they are: a browser needs a CJK font to show Chinese
(README).

The page is one file with everything inline (SVG elements, CSS in a style element), so it can be mailed,
attached to a ticket or opened from object storage without the output folder around it.
"""

from __future__ import annotations

import difflib
import html
import itertools
import json
from dataclasses import dataclass, field
from typing import Any

from simhash_spark.report.plots import Plot, barh, bars, histogram

MAX_TEXT = 3000  # characters of each example text shown


@dataclass(frozen=True)
class Member:
    """A shown cluster member and an accepted pair it is in (``partner_*``): the pair with a shown member
    if it has one, else its best pair. ``partner_text`` is None when the partner's text is not in this
    batch (a document matched in the index)."""

    id: str
    text: str
    partner_id: str | None = None
    partner_text: str | None = None
    distance: int | None = None
    similarity: float | None = None


@dataclass(frozen=True)
class ExampleCluster:
    cluster_id: str
    size: int
    members: list[Member]


@dataclass(frozen=True)
class ReportData:
    summary: dict[str, Any]
    cluster_sizes: dict[int, int]  # cluster size -> number of clusters (size >= 2)
    pair_distances: dict[int, int]  # Hamming distance -> accepted pairs
    pair_similarities: list[float] = field(default_factory=list)  # a sample of verified similarities
    examples: list[ExampleCluster] = field(default_factory=list)


def _size_buckets(sizes: dict[int, int]) -> tuple[list[str], list[int]]:
    """Cluster sizes in powers-of-two ranges, so one giant cluster does not flatten the plot."""
    edges = [2, 3, 4, 5, 9, 17, 33, 65, 129, 257, 1025, 10**18]
    labels, counts = [], []
    for lo, hi in itertools.pairwise(edges):
        n = sum(c for s, c in sizes.items() if lo <= s < hi)
        if n or lo < 5:
            labels.append(str(lo) if hi == lo + 1 else (f"{lo}-{hi - 1}" if hi < 10**18 else f"{lo}+"))
            counts.append(n)
    return labels, counts


def highlight(base: str, other: str) -> tuple[str, str]:
    """HTML of both texts with the characters that differ marked (<del> in the first, <ins> in the other)."""
    a, b = base[:MAX_TEXT], other[:MAX_TEXT]
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    out_a, out_b = [], []
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        sa, sb = html.escape(a[i1:i2]), html.escape(b[j1:j2])
        if op == "equal":
            out_a.append(sa)
            out_b.append(sb)
        else:
            if sa:
                out_a.append(f"<del>{sa}</del>")
            if sb:
                out_b.append(f"<ins>{sb}</ins>")
    more_a = "…" if len(base) > MAX_TEXT else ""
    more_b = "…" if len(other) > MAX_TEXT else ""
    return "".join(out_a) + more_a, "".join(out_b) + more_b


def _table(rows: list[tuple[Any, ...]], head: tuple[str, ...]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _member(m: Member) -> str:
    meta = f"distance {m.distance if m.distance is not None else '—'} bits"
    if m.similarity is not None:
        meta += f", similarity {m.similarity:.3f}"
    partner = html.escape(str(m.partner_id))
    if m.partner_id is None or m.partner_text is None:
        why = (
            "no accepted pair found"
            if m.partner_id is None
            else f"joined by its pair with {partner}, whose text is not in this batch: {meta}"
        )
        text = html.escape(m.text[:MAX_TEXT]) + ("…" if len(m.text) > MAX_TEXT else "")
        return (
            f'<div class="pair"><div class="doc"><h4>{html.escape(m.id)} <small>({why})</small></h4>'
            f"<p>{text}</p></div></div>"
        )
    left, right = highlight(m.partner_text, m.text)
    return (
        f'<div class="pair"><div class="doc"><h4>{partner}</h4><p>{left}</p></div>'
        f'<div class="doc"><h4>{html.escape(m.id)} <small>(its pair with {partner}: {meta})</small></h4>'
        f"<p>{right}</p></div></div>"
    )


def _example(ex: ExampleCluster) -> str:
    shown = len(ex.members)
    note = f" (first {shown} members by id)" if shown < ex.size else ""
    return (
        f'<section class="cluster"><h3>cluster {html.escape(str(ex.cluster_id))}: {ex.size} documents{note}</h3>'
        + "".join(_member(m) for m in ex.members)
        + "</section>"
    )


_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1200px}
h1{font-size:1.5em}h2{margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left}
.grid{display:flex;flex-wrap:wrap;gap:1em}.grid svg{max-width:100%;height:auto}
.pair{display:flex;gap:1em;margin:.6em 0}.doc{flex:1;background:#fafafa;border:1px solid #ddd;padding:.4em}
.doc p{white-space:pre-wrap;font-size:.9em;margin:.2em 0}.doc h4{margin:.2em 0;font-size:.9em}
del{background:#f6c6c6;text-decoration:none}ins{background:#c6f0c6;text-decoration:none}
.kpi{display:flex;gap:2em;flex-wrap:wrap}.kpi div{font-size:1.1em}.kpi b{display:block;font-size:1.6em}
.warn{background:#fff4d6;border:1px solid #e0b84c;padding:.5em}
"""


def figures(data: ReportData) -> list[Plot]:
    """The report's plots (``render`` inlines their SVG; tests inspect their labels)."""
    s = data.summary
    statuses = {k: v for k, v in s.get("status", {}).items() if v}  # every status is in the table below
    stages = _stages(s)
    total = s.get("timings_s", {}).get("total")
    size_labels, size_counts = _size_buckets(data.cluster_sizes)
    dists = sorted(data.pair_distances)
    plots = [
        barh("cluster sizes (documents per cluster)", size_labels, size_counts, "clusters"),
        bars(
            "Hamming distance of accepted pairs",
            [str(d) for d in dists],
            [data.pair_distances[d] for d in dists],
            "bits",
            "pairs",
        ),
        barh("documents per status", list(statuses), list(statuses.values()), "documents"),
        barh(
            "time per stage" + (f" (whole run {total:.1f} s)" if total is not None else ""),
            list(stages),
            [float(v["seconds"]) for v in stages.values()],
            "seconds",
            fmt="{:.1f}",
        ),
    ]
    if data.pair_similarities:
        threshold = (s.get("verify") or {}).get("min_similarity")
        plots.append(_similarities(data.pair_similarities, threshold))
    return plots


def _similarities(values: list[float], threshold: float | None) -> Plot:
    """Over the range the similarities occupy (accepted pairs sit above the threshold), from a multiple
    of 0.05, with the threshold marked."""
    low = min([*values, threshold if threshold is not None else 1.0])
    low = max(0.0, int(low * 20) / 20)
    return histogram("similarity of verified pairs", values, low, threshold)


def _stages(s: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per-stage timings without the whole-run total (which would dwarf every stage)."""
    stages = s.get("stages") or {k: {"seconds": v} for k, v in s.get("timings_s", {}).items()}
    return {k: v for k, v in stages.items() if k != "total"}


def _completeness(s: dict[str, Any]) -> str:
    """Whether pairs/ lists every pair, the buckets that were too large to compare in full, and whether
    resolving their members stayed within its bounds."""
    flood = s.get("flood") or {}
    rows = [
        ("pairs_complete", s.get("pairs_complete", "—")),
        ("groups written as stars", s.get("groups_written_as_stars", 0)),
        ("hot buckets (members resolved together)", s.get("hot_buckets", 0)),
        ("hot buckets' members", flood.get("members", 0)),
        ("pairs spanning their clusters", s.get("hot_bucket_forest_edges", 0)),
        ("members over the flood limits", flood.get("capped", 0)),
    ]
    if "largest_bit_skew" in s:
        rows.append(("largest bit skew", s["largest_bit_skew"]))
    warning = ""
    if s.get("pairs_complete") is False or s.get("hot_buckets"):
        warning = (
            '<p class="warn">Not every pair is listed: identical groups larger than output.pairs_max_group '
            "are written as stars, and the members of hot buckets (over bands.hot_bucket_limit fingerprints) "
            "are linked by accepted pairs spanning their clusters.</p>"
        )
    if flood.get("capped"):
        warning += (
            f'<p class="warn">{flood["capped"]} of the hot buckets\' members reached bands.flood_max_candidates '
            "or bands.flood_max_checks: their clusters may miss a member.</p>"
        )
    elif s.get("hot_buckets"):
        warning += "<p>Clusters are complete.</p>"
    return warning + _table(rows, ("measure", "value"))


def render(data: ReportData) -> str:
    s = data.summary
    statuses = s.get("status", {})
    stages = _stages(s)
    bands = s.get("bands", {})
    kpis = [
        ("documents", s.get("input_rows", 0)),
        ("duplicates", s.get("duplicates", 0)),
        ("dedup rate", f"{100 * s.get('dedup_rate', 0.0):.2f} %"),
        ("clusters", s.get("clusters", 0)),
        ("largest cluster", s.get("largest_cluster", 0)),
        ("pairs", s.get("pairs_accepted", 0)),
        ("pairs complete", "yes" if s.get("pairs_complete", True) else "no"),
    ]
    plots = [plot.svg() for plot in figures(data)]
    buckets = [(b.get("band"), b.get("key"), b.get("fingerprints")) for b in s.get("largest_buckets", [])]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>simhash_spark run report</title>',
        f"<style>{_CSS}</style></head><body>",
        "<h1>simhash_spark run report</h1>",
        f"<p>input: <code>{html.escape(str(s.get('input', '')))}</code></p>",
        '<div class="kpi">'
        + "".join(f"<div>{html.escape(k)}<b>{html.escape(str(v))}</b></div>" for k, v in kpis)
        + "</div>",
        "<h2>Plots</h2>",
        '<div class="grid">' + "".join(plots) + "</div>",
        "<h2>Completeness</h2>",
        _completeness(s),
        "<h2>Documents per status</h2>",
        _table(sorted(statuses.items()), ("status", "documents")),
        "<h2>Largest buckets</h2>",
        _table(buckets, ("band", "key", "distinct fingerprints")) if buckets else "<p>none</p>",
        "<h2>Time per stage</h2>",
        _table(
            [(k, v["seconds"], v.get("tasks", ""), v.get("rows", "")) for k, v in stages.items()],
            ("stage", "seconds", "Spark tasks", "rows read"),
        ),
        "<h2>Bands and verification</h2>",
        f"<pre>{html.escape(json.dumps({'bands': bands, 'verify': s.get('verify')}, indent=1, ensure_ascii=False))}</pre>",
        f"<h2>Example clusters ({len(data.examples)})</h2>",
        "<p>Each member is shown with an accepted pair it is in (the pair with another shown member where "
        "there is one), its distance and similarity those of that pair: "
        "<del>only in the pair's other document</del>, <ins>only in the member</ins>.</p>",
        *(_example(e) for e in data.examples),
        "</body></html>",
    ]
    return "\n".join(parts)
