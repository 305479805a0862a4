"""The console's charts, drawn on the server as inline SVG: no script, nothing fetched by the browser.

`bars`: values with their 95% intervals (an answer's DP column, one bar per row); `lines`: series of
(x, y) points on linear, logarithmic or time axes (spending over time; expected error against ε).
Every text is escaped; the result is `Markup`, which the templates insert as it is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Sequence

from markupsafe import Markup, escape

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")
WIDTH, HEIGHT = 720, 320
LEFT, RIGHT, TOP, BOTTOM = 70, 160, 28, 56  # margins: the legend is on the right


@dataclass(frozen=True)
class Scale:
    """Maps data values in [low, high] (linear, log10 or time: seconds since the epoch) to [start, end] pixels."""

    low: float
    high: float
    start: float
    end: float
    kind: str = "linear"  # "linear", "log" or "time"

    @classmethod
    def fitted(cls, values: Sequence[float], start: float, end: float, kind: str = "linear",
               zero: bool = False) -> "Scale":
        finite = [v for v in values if math.isfinite(v) and (kind != "log" or v > 0)]
        if not finite:
            finite = [1.0] if kind == "log" else [0.0]
        low, high = min(finite), max(finite)
        if zero and kind == "linear":
            low, high = min(low, 0.0), max(high, 0.0)
        if kind == "log":
            low, high = 10 ** math.floor(math.log10(low)), 10 ** math.ceil(math.log10(high))
            if low == high:
                low, high = low / 10, high * 10
        else:
            if low == high:
                pad = 60.0 if kind == "time" else abs(low) * 0.1 or 1.0
                low, high = low - pad, high + pad
            step = _nice_step((high - low) / 5)
            low, high = math.floor(low / step) * step, math.ceil(high / step) * step
        return cls(low, high, start, end, kind)

    def __call__(self, value: float) -> float:
        if self.kind == "log":
            value, low, high = math.log10(max(value, self.low)), math.log10(self.low), math.log10(self.high)
        else:
            low, high = self.low, self.high
        return self.start + (value - low) / (high - low) * (self.end - self.start)

    def ticks(self) -> list[tuple[float, str]]:
        """(value, label) of the axis' ticks."""
        if self.kind == "log":
            first, last = round(math.log10(self.low)), round(math.log10(self.high))
            every = max(1, (last - first) // 6)
            return [(10.0 ** e, _number(10.0 ** e)) for e in range(first, last + 1, every)]
        step = _nice_step((self.high - self.low) / 5)
        values = [self.low + i * step for i in range(int((self.high - self.low) / step + 1e-9) + 1)]
        if self.kind == "time":
            span = self.high - self.low
            form = "%H:%M:%S" if span < 600 else "%m-%d %H:%M" if span < 5 * 86400 else "%Y-%m-%d"
            return [(v, datetime.fromtimestamp(v, timezone.utc).strftime(form)) for v in values]
        return [(v, _number(v)) for v in values]


def bars(labels: Sequence[str], values: Sequence[float | None], intervals: Sequence[tuple[float, float] | None],
         title: str, value_name: str) -> Markup:
    """A bar per label with its 95% interval as a whisker (None: no value, or no interval claimed)."""
    lows = [iv[0] for iv in intervals if iv is not None]
    highs = [iv[1] for iv in intervals if iv is not None]
    y = Scale.fitted([v for v in values if v is not None] + lows + highs, HEIGHT - BOTTOM, TOP, zero=True)
    slot = (WIDTH - LEFT - 20) / max(len(labels), 1)
    parts = [_frame(title, y, None, value_name, "", right=20)]
    base = y(max(min(0.0, y.high), y.low))
    for i, (label, value, interval) in enumerate(zip(labels, values, intervals)):
        x = LEFT + i * slot
        centre = x + slot / 2
        if value is not None and math.isfinite(value):
            top = y(value)
            tip = f"{label}: {_number(value)}" + (f" (95% interval {_number(interval[0])} to {_number(interval[1])})"
                                                  if interval is not None else "")
            parts.append(f'<rect class="bar" x="{x + slot * 0.15:.1f}" y="{min(top, base):.1f}" '
                         f'width="{slot * 0.7:.1f}" height="{abs(base - top):.1f}" fill="{PALETTE[0]}">'
                         f'<title>{escape(tip)}</title></rect>')
        if interval is not None and all(math.isfinite(v) for v in interval):
            low, high = y(interval[0]), y(interval[1])
            half = slot * 0.15
            parts.append(f'<g class="interval" stroke="#222" stroke-width="1.5">'
                         f'<line x1="{centre:.1f}" y1="{low:.1f}" x2="{centre:.1f}" y2="{high:.1f}"/>'
                         f'<line x1="{centre - half:.1f}" y1="{low:.1f}" x2="{centre + half:.1f}" y2="{low:.1f}"/>'
                         f'<line x1="{centre - half:.1f}" y1="{high:.1f}" x2="{centre + half:.1f}" y2="{high:.1f}"/>'
                         '</g>')
        if len(labels) <= 40:
            parts.append(f'<text x="{centre:.1f}" y="{HEIGHT - BOTTOM + 14}" font-size="11" text-anchor="end" '
                         f'transform="rotate(-30 {centre:.1f} {HEIGHT - BOTTOM + 14})">{escape(_short(label))}</text>')
    return _svg(parts, title)


def lines(series: dict[str, Sequence[tuple[float, float]]], title: str, x_name: str, y_name: str,
          x_kind: str = "linear", y_kind: str = "linear", steps: bool = False,
          levels: dict[str, float] | None = None, marks: Sequence[float] = ()) -> Markup:
    """Each series a line through its points (`steps`: a step after each point, as cumulative spending
    is); `levels`: dashed horizontal lines (allowances); `marks`: dashed vertical lines (a plan's cost).
    x values on a "time" axis are seconds since the epoch (UTC)."""
    levels = levels or {}
    xs = [x for points in series.values() for x, _ in points] + list(marks)
    ys = [y for points in series.values() for _, y in points] + list(levels.values())
    x = Scale.fitted(xs, LEFT, WIDTH - RIGHT, x_kind)
    y = Scale.fitted(ys, HEIGHT - BOTTOM, TOP, y_kind, zero=y_kind == "linear")
    parts = [_frame(title, y, x, y_name, x_name)]
    legend = []
    for i, (name, points) in enumerate(series.items()):
        colour = PALETTE[i % len(PALETTE)]
        shown = [(a, b) for a, b in points if _drawable(a, x_kind) and _drawable(b, y_kind)]
        if not shown:
            continue
        path = []
        for j, (a, b) in enumerate(shown):
            if steps and j:
                path.append(f"{x(a):.1f},{y(shown[j - 1][1]):.1f}")
            path.append(f"{x(a):.1f},{y(b):.1f}")
        if steps:
            path.append(f"{x.end:.1f},{y(shown[-1][1]):.1f}")
        parts.append(f'<polyline class="series" fill="none" stroke="{colour}" stroke-width="2" '
                     f'points="{" ".join(path)}"><title>{escape(name)}</title></polyline>')
        parts += [f'<circle cx="{x(a):.1f}" cy="{y(b):.1f}" r="2.5" fill="{colour}"/>' for a, b in shown]
        legend.append((name, colour, ""))
    for i, (name, level) in enumerate(levels.items()):
        colour = PALETTE[list(series).index(name) % len(PALETTE)] if name in series else "#555"
        parts.append(f'<line class="level" x1="{x.start}" x2="{x.end}" y1="{y(level):.1f}" y2="{y(level):.1f}" '
                     f'stroke="{colour}" stroke-dasharray="5,4"><title>{escape(name)}: '
                     f'{escape(_number(level))}</title></line>')
        legend.append((f"{name} limit", colour, "5,4"))
    for mark in marks:
        parts.append(f'<line x1="{x(mark):.1f}" x2="{x(mark):.1f}" y1="{y.start}" y2="{y.end}" stroke="#888" '
                     'stroke-dasharray="3,3"/>')
    for i, (name, colour, dash) in enumerate(legend[:14]):
        top = TOP + 6 + i * 18
        parts.append(f'<line x1="{WIDTH - RIGHT + 12}" x2="{WIDTH - RIGHT + 34}" y1="{top}" y2="{top}" '
                     f'stroke="{colour}" stroke-width="2" stroke-dasharray="{dash or "none"}"/>'
                     f'<text x="{WIDTH - RIGHT + 40}" y="{top + 4}" font-size="11">{escape(_short(name, 18))}</text>')
    return _svg(parts, title)


def _frame(title: str, y: Scale, x: Scale | None, y_name: str, x_name: str, right: int = RIGHT) -> str:
    """Axes, grid lines, tick labels and titles."""
    out = [f'<text x="{LEFT}" y="16" font-size="13" font-weight="bold">{escape(title)}</text>',
           f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{HEIGHT - BOTTOM}" stroke="#444"/>',
           f'<line x1="{LEFT}" y1="{HEIGHT - BOTTOM}" x2="{WIDTH - right}" y2="{HEIGHT - BOTTOM}" stroke="#444"/>',
           f'<text x="14" y="{(TOP + HEIGHT - BOTTOM) / 2:.0f}" font-size="11" text-anchor="middle" '
           f'transform="rotate(-90 14 {(TOP + HEIGHT - BOTTOM) / 2:.0f})">{escape(y_name)}</text>']
    for value, label in y.ticks():
        at = y(value)
        out.append(f'<line x1="{LEFT}" x2="{WIDTH - right}" y1="{at:.1f}" y2="{at:.1f}" stroke="#ddd"/>'
                   f'<text x="{LEFT - 6}" y="{at + 4:.1f}" font-size="10" text-anchor="end">{escape(label)}</text>')
    if x is not None:
        for value, label in x.ticks():
            at = x(value)
            out.append(f'<line x1="{at:.1f}" x2="{at:.1f}" y1="{TOP}" y2="{HEIGHT - BOTTOM}" stroke="#eee"/>'
                       f'<text x="{at:.1f}" y="{HEIGHT - BOTTOM + 16}" font-size="10" text-anchor="middle">'
                       f'{escape(label)}</text>')
        out.append(f'<text x="{(LEFT + WIDTH - right) / 2:.0f}" y="{HEIGHT - 12}" font-size="11" '
                   f'text-anchor="middle">{escape(x_name)}</text>')
    return "".join(out)


def _svg(parts: list[str], title: str) -> Markup:
    return Markup(f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" role="img" width="{WIDTH}" '
                  f'height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" '
                  f'aria-label="{escape(title)}">{"".join(parts)}</svg>')


def _drawable(value: float, kind: str) -> bool:
    return value is not None and math.isfinite(value) and (kind != "log" or value > 0)


def _nice_step(raw: float) -> float:
    """1, 2 or 5 times a power of ten, at least `raw`."""
    if raw <= 0 or not math.isfinite(raw):
        return 1.0
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def _number(value: float) -> str:
    if math.isfinite(value) and value == int(value) and abs(value) < 1e9:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def _short(text: str, width: int = 24) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"
