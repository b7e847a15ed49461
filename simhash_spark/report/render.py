"""Rendering the run report from plain data (no Spark): plots with matplotlib, texts diffed with difflib.

The page is one file with everything inline (PNG as data URIs, CSS in a style element), so it can be
mailed, attached to a ticket or opened from object storage without the output folder around it.
"""

from __future__ import annotations

import base64
import difflib
import html
import io
import itertools
import json
from dataclasses import dataclass, field
from typing import Any

MAX_TEXT = 3000  # characters of each example text shown


@dataclass(frozen=True)
class ExampleCluster:
    cluster_id: str
    size: int
    members: list[tuple[str, str, int | None, float | None]]  # (id, text, distance, similarity) to the first


@dataclass(frozen=True)
class ReportData:
    summary: dict[str, Any]
    cluster_sizes: dict[int, int]  # cluster size -> number of clusters (size >= 2)
    pair_distances: dict[int, int]  # Hamming distance -> accepted pairs
    pair_similarities: list[float] = field(default_factory=list)  # a sample of verified similarities
    examples: list[ExampleCluster] = field(default_factory=list)


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _bar(title: str, xs: list[Any], ys: list[int], xlabel: str, ylabel: str, *, log: bool = False) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    if xs:
        ax.bar([str(x) for x in xs], ys, color="#3b6ea8")
        if log and max(ys) > 50 * max(1, min(ys)):
            ax.set_yscale("log")
    else:
        ax.text(0.5, 0.5, "nothing to show", ha="center", va="center", transform=ax.transAxes)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if len(xs) > 20:
        ax.tick_params(axis="x", labelrotation=90, labelsize=7)
    return _png(fig)


def _hist(title: str, values: list[float], xlabel: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    if values:
        ax.hist(values, bins=20, range=(min(0.0, min(values)), 1.0), color="#5a9e6f")
    else:
        ax.text(0.5, 0.5, "no verified pairs", ha="center", va="center", transform=ax.transAxes)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("pairs")
    return _png(fig)


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


def _example(ex: ExampleCluster) -> str:
    first_id, first_text, _, _ = ex.members[0]
    cells = []
    for mid, text, dist, sim in ex.members[1:]:
        left, right = highlight(first_text, text)
        meta = f"distance {dist if dist is not None else '—'} bits"
        if sim is not None:
            meta += f", similarity {sim:.3f}"
        cells.append(
            f'<div class="pair"><div class="doc"><h4>{html.escape(str(first_id))}</h4><p>{left}</p></div>'
            f'<div class="doc"><h4>{html.escape(str(mid))} <small>({meta})</small></h4><p>{right}</p></div></div>'
        )
    shown = len(ex.members)
    note = f" (first {shown} members)" if shown < ex.size else ""
    return (
        f'<section class="cluster"><h3>cluster {html.escape(str(ex.cluster_id))}: {ex.size} documents{note}</h3>'
        + "".join(cells)
        + "</section>"
    )


_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1200px}
h1{font-size:1.5em}h2{margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left}
.grid{display:flex;flex-wrap:wrap;gap:1em}.grid img{max-width:100%}
.pair{display:flex;gap:1em;margin:.6em 0}.doc{flex:1;background:#fafafa;border:1px solid #ddd;padding:.4em}
.doc p{white-space:pre-wrap;font-size:.9em;margin:.2em 0}.doc h4{margin:.2em 0;font-size:.9em}
del{background:#f6c6c6;text-decoration:none}ins{background:#c6f0c6;text-decoration:none}
.kpi{display:flex;gap:2em;flex-wrap:wrap}.kpi div{font-size:1.1em}.kpi b{display:block;font-size:1.6em}
"""


def _plots(data: ReportData, statuses: dict[str, int], stages: dict[str, dict[str, Any]]) -> list[str]:
    size_labels, size_counts = _size_buckets(data.cluster_sizes)
    dists = sorted(data.pair_distances)
    plots = [
        _bar("cluster sizes", size_labels, size_counts, "documents per cluster", "clusters", log=True),
        _bar(
            "Hamming distance of accepted pairs",
            dists,
            [data.pair_distances[d] for d in dists],
            "bits",
            "pairs",
        ),
        _bar(
            "documents per status", list(statuses), list(statuses.values()), "status", "documents", log=True
        ),
        _bar(
            "time per stage", list(stages), [round(v["seconds"]) for v in stages.values()], "stage", "seconds"
        ),
    ]
    if data.pair_similarities:
        plots.append(_hist("similarity of verified pairs", data.pair_similarities, "similarity"))
    return plots


def render(data: ReportData) -> str:
    s = data.summary
    statuses = s.get("status", {})
    stages = s.get("stages") or {k: {"seconds": v} for k, v in s.get("timings_s", {}).items() if k != "total"}
    bands = s.get("bands", {})
    kpis = [
        ("documents", s.get("input_rows", 0)),
        ("duplicates", s.get("duplicates", 0)),
        ("dedup rate", f"{100 * s.get('dedup_rate', 0.0):.2f} %"),
        ("clusters", s.get("clusters", 0)),
        ("largest cluster", s.get("largest_cluster", 0)),
        ("pairs", s.get("pairs_accepted", 0)),
    ]
    plots = _plots(data, statuses, stages)
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
        '<div class="grid">' + "".join(f'<img alt="plot" src="{p}">' for p in plots) + "</div>",
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
        "<p>Each member is compared with the cluster's first document: "
        "<del>only in the first</del>, <ins>only in the member</ins>.</p>",
        *(_example(e) for e in data.examples),
        "</body></html>",
    ]
    return "\n".join(parts)
