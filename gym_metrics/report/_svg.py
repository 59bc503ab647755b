"""Inline SVG charts drawn in Python: no JavaScript library to ship, nothing fetched when the
page opens, and a chart's size depends on the points drawn, never on the number of tasks."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from typing import TypeVar

PALETTE = ("#4269d0", "#efb118", "#ff725c", "#6cc5b0", "#3ca951", "#ff8ab7", "#a463f2", "#97bbf5")
W, H = 560, 260
LEFT, RIGHT, TOP, BOTTOM = 56, 130, 14, 40
T = TypeVar("T")


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


@dataclass
class Series:
    """One agent's line: x, y and an optional interval (low, high) per point."""

    name: str
    x: Sequence[float]
    y: Sequence[float]
    low: Sequence[float] | None = None
    high: Sequence[float] | None = None
    color: str = PALETTE[0]
    labels: Sequence[str] = field(default_factory=list)
    """A tooltip per point (defaults to x, y)."""


def fmt(v: float) -> str:
    """A number for a label: 4 significant digits, no exponent for everyday sizes."""
    if not math.isfinite(v):
        return "n/a"
    if abs(v) >= 1e12 or (v != 0 and abs(v) < 1e-3):
        return f"{v:.3g}"
    if abs(v) >= 1e4:
        return f"{v:,.0f}"
    return f"{v:.4g}"


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def _domain(values: Sequence[float], pad: float = 0.0) -> tuple[float, float]:
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return 0.0, 1.0
    lo, hi = min(finite), max(finite)
    if hi == lo:
        return lo - 0.5, hi + 0.5
    span = hi - lo
    return lo - pad * span, hi + pad * span


class Frame:
    """An x/y plot area with axes: maps data to pixels and draws ticks, labels and a legend."""

    def __init__(self, xs: Sequence[float], ys: Sequence[float], x_label: str, y_label: str, *, log_x: bool = False):
        self.log_x = log_x
        self.x0, self.x1 = _domain([math.log10(x) if log_x and x > 0 else x for x in xs], 0.03)
        self.y0, self.y1 = _domain(ys, 0.05)
        self.x_label, self.y_label = x_label, y_label

    def px(self, x: float) -> float:
        v = math.log10(x) if self.log_x and x > 0 else x
        return LEFT + (v - self.x0) / (self.x1 - self.x0) * (W - LEFT - RIGHT)

    def py(self, y: float) -> float:
        return H - BOTTOM - (y - self.y0) / (self.y1 - self.y0) * (H - TOP - BOTTOM)

    def axes(self) -> str:
        parts = [f'<line x1="{LEFT}" y1="{H - BOTTOM}" x2="{W - RIGHT}" y2="{H - BOTTOM}" class="ax"/>',
                 f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{H - BOTTOM}" class="ax"/>']  # fmt: skip
        for t in _ticks(self.y0, self.y1):
            y = self.py(t)
            parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{W - RIGHT}" y2="{y:.1f}" class="grid"/>'
                         f'<text x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end">{fmt(t)}</text>')  # fmt: skip
        for t in _ticks(self.x0, self.x1):
            x = self.px(10**t if self.log_x else t)
            label = fmt(10**t) if self.log_x else fmt(t)
            parts.append(f'<text x="{x:.1f}" y="{H - BOTTOM + 15}" text-anchor="middle">{label}</text>')
        parts.append(f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 6}" text-anchor="middle" class="lab">{escape(self.x_label)}</text>')
        parts.append(f'<text transform="translate(13,{(TOP + H - BOTTOM) / 2}) rotate(-90)" text-anchor="middle" '
                     f'class="lab">{escape(self.y_label)}</text>')  # fmt: skip
        return "".join(parts)


def legend(names: Sequence[tuple[str, str]]) -> str:
    out = []
    for i, (name, c) in enumerate(names):
        y = TOP + 6 + 16 * i
        out.append(f'<rect x="{W - RIGHT + 10}" y="{y - 8}" width="10" height="10" fill="{c}"/>'
                   f'<text x="{W - RIGHT + 24}" y="{y + 1}">{escape(name[:18])}</text>')  # fmt: skip
    return "".join(out)


def svg(kind: str, body: str, title: str, width: int = W, height: int = H) -> str:
    return (f'<svg class="chart" data-chart="{kind}" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
            f'role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>{body}</svg>')  # fmt: skip


def in_x_order(s: Series) -> Series:
    """The series with its points (and their intervals and tooltips) sorted by x, ties kept in
    order: a line drawn in the given order would run backwards wherever x falls."""
    order = sorted(range(len(s.x)), key=lambda i: s.x[i])
    if order == list(range(len(s.x))):
        return s

    def pick(seq: Sequence[T]) -> list[T]:
        return [seq[i] for i in order]

    return Series(s.name, pick(s.x), pick(s.y), None if s.low is None else pick(s.low), None if s.high is None else pick(s.high),
                  s.color, pick(s.labels) if len(s.labels) == len(s.x) else s.labels)  # fmt: skip


def line_chart(kind: str, title: str, series: Sequence[Series], x_label: str, y_label: str, *, log_x: bool = False) -> str:
    """Lines with points and, where given, a shaded interval band, each drawn in x order."""
    series = [in_x_order(s) for s in series]
    xs = [x for s in series for x in s.x]
    ys = [y for s in series for y in (*s.y, *(s.low or ()), *(s.high or ()))]
    f = Frame(xs, ys, x_label, y_label, log_x=log_x)
    body = [f.axes()]
    for s in series:
        if s.low is not None and s.high is not None and len(s.x) == 1:  # one point: a whisker
            x = f.px(s.x[0])
            body.append(f'<line class="whisker" x1="{x:.1f}" y1="{f.py(s.low[0]):.1f}" x2="{x:.1f}" y2="{f.py(s.high[0]):.1f}" stroke="{s.color}"/>')
        elif s.low is not None and s.high is not None:
            top = [f"{f.px(x):.1f},{f.py(h):.1f}" for x, h in zip(s.x, s.high)]
            bottom = [f"{f.px(x):.1f},{f.py(lo):.1f}" for x, lo in zip(reversed(s.x), reversed(s.low))]
            body.append(f'<polygon class="band" points="{" ".join(top + bottom)}" fill="{s.color}"/>')
        pts = " ".join(f"{f.px(x):.1f},{f.py(y):.1f}" for x, y in zip(s.x, s.y))
        body.append(f'<polyline class="line" points="{pts}" stroke="{s.color}"/>')
        for i, (x, y) in enumerate(zip(s.x, s.y)):
            tip = s.labels[i] if i < len(s.labels) else f"{s.name}: {fmt(x)}, {fmt(y)}"
            if s.low is not None and s.high is not None and not s.labels:
                tip += f" [{fmt(s.low[i])}, {fmt(s.high[i])}]"
            body.append(f'<circle class="pt" cx="{f.px(x):.1f}" cy="{f.py(y):.1f}" r="3" fill="{s.color}"><title>{escape(tip)}</title></circle>')
    body.append(legend([(s.name, s.color) for s in series]))
    return svg(kind, "".join(body), title)


def bar_chart(kind: str, title: str, edges: Sequence[float], counts: Sequence[tuple[str, str, Sequence[float]]], x_label: str, y_label: str) -> str:
    """Grouped bars over bins [edges[i], edges[i+1]): one bar per (name, color, heights)."""
    tops = [h for _, _, hs in counts for h in hs]
    f = Frame([edges[0], edges[-1]], [0.0, max(tops, default=1.0) or 1.0], x_label, y_label)
    f.y0 = 0.0
    body = [f.axes()]
    k = max(len(counts), 1)
    for j, (name, c, hs) in enumerate(counts):
        for i, h in enumerate(hs):
            x0, x1 = f.px(edges[i]), f.px(edges[i + 1])
            w = (x1 - x0) / k
            tip = f"{name}: {fmt(h)} in [{fmt(edges[i])}, {fmt(edges[i + 1])})"
            body.append(f'<rect class="bar" x="{x0 + j * w:.1f}" y="{f.py(h):.1f}" width="{max(w - 0.5, 0.5):.1f}" '
                        f'height="{f.py(0) - f.py(h):.1f}" fill="{c}"><title>{escape(tip)}</title></rect>')  # fmt: skip
    body.append(legend([(n, c) for n, c, _ in counts]))
    return svg(kind, "".join(body), title)


def forest(kind: str, title: str, rows: Sequence[tuple[str, float, float, float, str]], x_label: str, ref: float | None = 0.0) -> str:
    """One row per estimate: a dot at the value, a whisker over (low, high), a label on the left."""
    height = TOP + BOTTOM + 24 * max(len(rows), 1)
    label_w = 230
    lo, hi = _domain([v for _, a, b, c, _ in rows for v in (a, b, c)] + ([ref] if ref is not None else []), 0.08)

    def px(v: float) -> float:
        return label_w + (v - lo) / (hi - lo) * (W - label_w - 20)

    body = []
    for t in _ticks(lo, hi):
        body.append(f'<line x1="{px(t):.1f}" y1="{TOP}" x2="{px(t):.1f}" y2="{height - BOTTOM}" class="grid"/>'
                    f'<text x="{px(t):.1f}" y="{height - BOTTOM + 15}" text-anchor="middle">{fmt(t)}</text>')  # fmt: skip
    if ref is not None:
        body.append(f'<line x1="{px(ref):.1f}" y1="{TOP}" x2="{px(ref):.1f}" y2="{height - BOTTOM}" class="ref"/>')
    for i, (label, value, low, high, c) in enumerate(rows):
        y = TOP + 12 + 24 * i
        tip = f"{label}: {fmt(value)} [{fmt(low)}, {fmt(high)}]"
        whisker = (f'<line class="whisker" x1="{px(low):.1f}" y1="{y}" x2="{px(high):.1f}" y2="{y}" stroke="{c}"/>'
                   if math.isfinite(low) and math.isfinite(high) else "")  # fmt: skip
        body.append(f'<text x="{label_w - 8}" y="{y + 4}" text-anchor="end">{escape(label[:40])}</text>{whisker}'
                    f'<circle class="pt" cx="{px(value):.1f}" cy="{y}" r="4" fill="{c}"><title>{escape(tip)}</title></circle>')  # fmt: skip
    body.append(f'<text x="{(label_w + W - 20) / 2}" y="{height - 6}" text-anchor="middle" class="lab">{escape(x_label)}</text>')
    return svg(kind, "".join(body), title, height=height)


def heat_color(v: float, lo: float, hi: float) -> str:
    """Red (low) through yellow to green (high); grey for no value."""
    if not math.isfinite(v):
        return "#ddd"
    t = 0.5 if hi <= lo else min(max((v - lo) / (hi - lo), 0.0), 1.0)
    stops = ((215, 48, 39), (254, 224, 139), (26, 152, 80))
    a, b, u = (stops[0], stops[1], t * 2) if t < 0.5 else (stops[1], stops[2], t * 2 - 1)
    return "#" + "".join(f"{round(x + (y - x) * u):02x}" for x, y in zip(a, b))


def heat_strip(kind: str, title: str, rows: Sequence[tuple[str, Sequence[float]]], lo: float, hi: float, x_label: str) -> str:
    """Agents x bins of tasks: one cell per bin, coloured by the bin's mean."""
    label_w, cell_h = 150, 22
    bins = max((len(v) for _, v in rows), default=1)
    cell_w = (W - label_w - 10) / max(bins, 1)
    height = TOP + cell_h * len(rows) + BOTTOM
    body = []
    for r, (name, values) in enumerate(rows):
        y = TOP + r * cell_h
        body.append(f'<text x="{label_w - 6}" y="{y + 15}" text-anchor="end">{escape(name[:22])}</text>')
        for i, v in enumerate(values):
            body.append(f'<rect class="cell" x="{label_w + i * cell_w:.1f}" y="{y}" width="{cell_w + 0.3:.1f}" height="{cell_h - 2}" '
                        f'fill="{heat_color(v, lo, hi)}"><title>{escape(f"{name}, bin {i + 1}: {fmt(v)}")}</title></rect>')  # fmt: skip
    body.append(f'<text x="{(label_w + W) / 2}" y="{height - 10}" text-anchor="middle" class="lab">{escape(x_label)}</text>')
    return svg(kind, "".join(body), title, height=height)
