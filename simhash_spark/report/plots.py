"""The report's plots as inline SVG, laid out in Python (no plotting library, no fonts read).

Text widths are estimated from character classes (a wide East Asian character one em, anything else
``NARROW_EM``) so labels can be placed apart without measuring them; ``Plot.texts`` keeps every label
with its box, which is what the tests check for overlaps.
"""

from __future__ import annotations

import html
import itertools
import math
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field

WIDTH = 640
TICK_PX = 11  # tick labels, axis labels
VALUE_PX = 9  # the number printed at a bar
TITLE_PX = 13
NARROW_EM = 0.62  # a generous width for Latin letters and digits in a sans-serif face
BAR = "#3b6ea8"
HIST = "#5a9e6f"
MARK = "#b33"


def text_width(text: str, size: float) -> float:
    """Estimated drawn width: wide and full-width characters one em, others ``NARROW_EM``."""
    return size * sum(1.0 if unicodedata.east_asian_width(ch) in "WF" else NARROW_EM for ch in text)


@dataclass(frozen=True)
class Text:
    """A label: ``anchor`` is SVG's text-anchor, ``y`` its baseline; ``vertical`` reads bottom to top."""

    x: float
    y: float
    text: str
    size: float = TICK_PX
    anchor: str = "middle"
    vertical: bool = False
    color: str = "#222"

    def box(self) -> tuple[float, float, float, float]:
        """(x0, y0, x1, y1) of the drawn text, from the estimated width."""
        long, short = text_width(self.text, self.size), self.size
        start = {"start": 0.0, "middle": -long / 2, "end": -long}[self.anchor]
        if self.vertical:  # rotated -90° about (x, y): the text runs upwards from y
            return (self.x - short * 0.8, self.y - start - long, self.x + short * 0.2, self.y - start)
        return (self.x + start, self.y - short * 0.8, self.x + start + long, self.y + short * 0.2)

    def svg(self) -> str:
        turn = f' transform="rotate(-90 {self.x:.1f} {self.y:.1f})"' if self.vertical else ""
        return (
            f'<text x="{self.x:.1f}" y="{self.y:.1f}" font-size="{self.size}" text-anchor="{self.anchor}" '
            f'fill="{self.color}"{turn}>{html.escape(self.text)}</text>'
        )


@dataclass
class Plot:
    """One figure: shapes (SVG elements as strings) and the labels drawn over them."""

    title: str
    height: float
    shapes: list[str] = field(default_factory=list)
    texts: list[Text] = field(default_factory=list)

    def svg(self) -> str:
        body = "".join(self.shapes) + "".join(t.svg() for t in self.texts)
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{self.height:.0f}" '
            f'viewBox="0 0 {WIDTH} {self.height:.0f}" role="img" font-family="system-ui,sans-serif">'
            f"<title>{html.escape(self.title)}</title>{body}</svg>"
        )


def plain(x: float) -> str:
    """Tick and value labels as plain numbers with thousands separators."""
    return f"{x:,.0f}" if abs(x) >= 10 or float(x).is_integer() else f"{x:g}"


def nice_ticks(high: float, most: int = 6) -> list[float]:
    """0 and round steps (1, 2, 2.5 or 5 × 10ⁿ) up to at least ``high``, at most ``most`` + 1 of them."""
    if high <= 0:
        return [0.0, 1.0]
    raw = high / most
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    return [i * step for i in range(math.ceil(high / step - 1e-9) + 1)]


def _line(x0: float, y0: float, x1: float, y1: float, color: str = "#444", dash: str = "") -> str:
    dashed = f' stroke-dasharray="{dash}"' if dash else ""
    return f'<line x1="{x0:.1f}" y1="{y0:.1f}" x2="{x1:.1f}" y2="{y1:.1f}" stroke="{color}"{dashed}/>'


def _rect(x: float, y: float, w: float, h: float, color: str) -> str:
    return (
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0.0):.1f}" height="{max(h, 0.0):.1f}" fill="{color}"/>'
    )


def _framed(title: str, height: float, xlabel: str) -> Plot:
    """A plot with its title on top and its x-axis label at the bottom."""
    return Plot(
        title, height, texts=[Text(WIDTH / 2, 18, title, TITLE_PX), Text(WIDTH / 2, height - 8, xlabel)]
    )


def _axes(plot: Plot, left: float, right: float, top: float, bottom: float) -> None:
    plot.shapes += [_line(left, top, left, bottom), _line(left, bottom, right, bottom)]


def _empty(plot: Plot, message: str, top: float, bottom: float) -> Plot:
    plot.texts.append(Text(WIDTH / 2, (top + bottom) / 2, message))
    return plot


def barh(title: str, labels: Sequence[str], values: Sequence[float], xlabel: str, fmt: str = "{:,}") -> Plot:
    """Horizontal bars for named categories, first label on top, each value printed at its bar's end."""
    row, top = 22.0, 28.0
    bottom = top + row * max(3, len(labels))
    plot = _framed(title, bottom + 44, xlabel)
    if not labels:
        return _empty(plot, "nothing to show", top, bottom)
    left = 12 + max(text_width(label, TICK_PX) for label in labels)
    printed = [fmt.format(v) for v in values]
    right = WIDTH - 12 - max(text_width(p, VALUE_PX) for p in printed)
    ticks = nice_ticks(max(values))
    scale = (right - left - 4) / ticks[-1]
    _axes(plot, left, right, top, bottom)
    for i, (label, value, shown) in enumerate(zip(labels, values, printed, strict=True)):
        mid = top + row * (i + 0.5)
        plot.shapes.append(_rect(left, mid - row * 0.35, value * scale, row * 0.7, BAR))
        plot.texts.append(Text(left - 6, mid + 4, label, anchor="end"))
        plot.texts.append(Text(left + value * scale + 3, mid + 3, shown, VALUE_PX, anchor="start"))
    _x_ticks(plot, ticks, left, scale, bottom)
    return plot


def _x_ticks(plot: Plot, ticks: Sequence[float], left: float, scale: float, bottom: float) -> None:
    """Tick labels under the axis, thinned until they stand apart."""
    shown = list(ticks)
    while len(shown) > 2:
        boxes = [Text(left + (t - ticks[0]) * scale, bottom + 15, plain(t)).box() for t in shown]
        if all(a[2] + 4 < b[0] for a, b in itertools.pairwise(boxes)):
            break
        shown = shown[::2]
    for t in shown:
        x = left + (t - ticks[0]) * scale
        plot.shapes.append(_line(x, bottom, x, bottom + 4))
        plot.texts.append(Text(x, bottom + 15, plain(t)))


def _y_axis(plot: Plot, ticks: Sequence[float], left: float, bottom: float, scale: float, label: str) -> None:
    for t in ticks:
        y = bottom - t * scale
        plot.shapes.append(_line(left - 4, y, left, y))
        plot.texts.append(Text(left - 6, y + 4, plain(t), anchor="end"))
    plot.texts.append(Text(14, bottom / 2 + 14, label, vertical=True))


def bars(title: str, labels: Sequence[str], counts: Sequence[float], xlabel: str, ylabel: str) -> Plot:
    """Vertical bars for short labels (bits), each bar's count printed on it (upright where it fits
    the bar's width, else turned): a small bar on a linear axis still shows its number."""
    top, bottom = 28.0, 240.0
    plot = _framed(title, 300.0, xlabel)
    if not labels:
        return _empty(plot, "nothing to show", top, bottom)
    ticks = nice_ticks(max(counts))
    left = 30 + max(text_width(plain(t), TICK_PX) for t in ticks)
    slot = (WIDTH - 10 - left) / len(labels)
    printed = [plain(c) for c in counts]
    turned = any(text_width(p, VALUE_PX) > slot - 2 for p in printed)
    headroom = max(text_width(p, VALUE_PX) for p in printed) + 4 if turned else VALUE_PX + 4
    scale = (bottom - top - headroom) / ticks[-1]
    _axes(plot, left, WIDTH - 10, top, bottom)
    _y_axis(plot, ticks, left, bottom, scale, ylabel)
    labels_turned = any(text_width(label, TICK_PX) > slot - 2 for label in labels)
    for i, (label, count, shown) in enumerate(zip(labels, counts, printed, strict=True)):
        x, h = left + slot * (i + 0.5), count * scale
        plot.shapes.append(_rect(x - slot * 0.4, bottom - h, slot * 0.8, h, BAR))
        if turned:
            plot.texts.append(Text(x + 3, bottom - h - 3, shown, VALUE_PX, anchor="start", vertical=True))
        else:
            plot.texts.append(Text(x, bottom - h - 3, shown, VALUE_PX))
        if labels_turned:
            plot.texts.append(Text(x + 4, bottom + 6, label, anchor="end", vertical=True))
        else:
            plot.texts.append(Text(x, bottom + 15, label))
    return plot


def histogram(
    title: str, values: Sequence[float], low: float, threshold: float | None, bins: int = 20
) -> Plot:
    """Counts of ``values`` in ``bins`` equal bins over [low, 1] (at least [0.95, 1]), with ``threshold``
    marked."""
    top, bottom = 28.0, 250.0
    plot = _framed(title, 300.0, "similarity")
    if not values:
        return _empty(plot, "no verified pairs", top, bottom)
    low = min(low, 0.95)  # every pair at 1.0 (a threshold of 1.0) still needs a range to draw over
    width = (1.0 - low) / bins
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, max(0, int((v - low) / width)))] += 1
    ticks = nice_ticks(max(counts))
    left, right = 30 + max(text_width(plain(t), TICK_PX) for t in ticks), WIDTH - 14.0
    # room above the highest bar for the threshold's label
    scale, per_unit = (bottom - top - 20) / ticks[-1], (right - left) / (1.0 - low)
    _axes(plot, left, right, top, bottom)
    _y_axis(plot, ticks, left, bottom, scale, "pairs")
    for i, n in enumerate(counts):
        plot.shapes.append(
            _rect(left + i * width * per_unit, bottom - n * scale, width * per_unit - 1, n * scale, HIST)
        )
    step = 0.05 if 1.0 - low > 0.1 else 0.01
    marks = [round(low + i * step, 2) for i in range(round((1.0 - low) / step) + 1)]
    _x_ticks(plot, marks, left, per_unit, bottom)
    if threshold is not None and low <= threshold <= 1.0:
        x = left + (threshold - low) * per_unit
        plot.shapes.append(_line(x, top, x, bottom, MARK, "4 3"))
        label = f"threshold {threshold:g}"
        fits = x + 4 + text_width(label, VALUE_PX) < WIDTH - 4
        anchor, at = ("start", x + 4) if fits else ("end", x - 4)
        plot.texts.append(Text(at, top + 10, label, VALUE_PX, anchor, color=MARK))
    return plot
