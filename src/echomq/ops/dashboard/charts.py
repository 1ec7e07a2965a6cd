"""Line charts as inline SVG, drawn on the server. Pure: no I/O, no script, no asset.

A chart is a few polylines over a shared time axis, with the axis' maximum, the
latest value of each series in the legend, and a ``<title>`` per point so hovering
shows the exact value. A gap in a series (``None``) breaks its line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from echomq.ops.dashboard.render import esc

__all__ = ["Series", "line_chart"]

COLOURS = ("#2f6fde", "#d9480f", "#2b8a3e", "#9c36b5")


@dataclass(frozen=True, slots=True)
class Series:
    label: str
    values: Sequence[float | None]


def _fmt(v: float, unit: str) -> str:
    if unit == "ms" and v >= 1000:
        return f"{v / 1000:.1f} s"
    if v >= 100 or v == int(v):
        return f"{v:,.0f}{' ' + unit if unit else ''}"
    return f"{v:.1f}{' ' + unit if unit else ''}"


def line_chart(title: str, series: Sequence[Series], *, unit: str = "", span_s: float = 0,
               slots: int = 0, width: int = 372, height: int = 160) -> str:
    """An SVG chart of ``series`` (oldest first, the newest at the right edge). With ``slots``
    the axis holds that many samples covering ``span_s`` seconds, so a young history
    fills only its right part instead of being stretched."""
    pad_l, pad_r, pad_t, pad_b = 8, 8, 44, 18
    w, h = width - pad_l - pad_r, height - pad_t - pad_b
    n = max((len(s.values) for s in series), default=0)
    top = max((v for s in series for v in s.values if v is not None), default=0.0) or 1.0
    parts = [f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
             f'role="img" aria-label="{esc(title)}">',
             f'<text x="{pad_l}" y="14" class="ct">{esc(title)}</text>',
             f'<line x1="{pad_l}" y1="{pad_t + h}" x2="{pad_l + w}" y2="{pad_t + h}" class="axis"/>',
             f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l + w}" y2="{pad_t}" class="grid"/>',
             f'<text x="{pad_l + w}" y="{pad_t - 3}" class="cv" text-anchor="end">'
             f'max {esc(_fmt(top, unit))}</text>']
    if span_s:
        parts.append(f'<text x="{pad_l}" y="{height - 4}" class="cv">-{esc(_span(span_s))}</text>'
                     f'<text x="{pad_l + w}" y="{height - 4}" class="cv" text-anchor="end">now</text>')
    legend_x: float = pad_l
    for idx, s in enumerate(series):
        colour = COLOURS[idx % len(COLOURS)]
        step = w / max(max(slots, n) - 1, 1)
        offset = (max(slots, n) - len(s.values)) * step
        segments: list[list[str]] = [[]]
        dots = []
        for i, v in enumerate(s.values):
            if v is None:
                segments.append([])
                continue
            x, y = pad_l + offset + i * step, pad_t + h - (v / top) * h
            segments[-1].append(f"{x:.1f},{y:.1f}")
            dots.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="6" class="hit">'
                        f'<title>{esc(s.label)}: {esc(_fmt(v, unit))}</title></circle>')
        for seg in segments:
            if len(seg) == 1:
                cx, cy = seg[0].split(",")
                parts.append(f'<circle cx="{cx}" cy="{cy}" r="2" fill="{colour}"/>')
            elif seg:
                parts.append(f'<polyline points="{" ".join(seg)}" fill="none" stroke="{colour}" '
                             'stroke-width="1.8" stroke-linejoin="round"/>')
        parts += dots
        last = next((v for v in reversed(s.values) if v is not None), None)
        now = _fmt(last, unit) if last is not None else "–"
        parts.append(f'<text x="{legend_x}" y="30" class="cl" fill="{colour}">'
                     f'■ {esc(s.label)} <tspan class="lv">{esc(now)}</tspan></text>')
        legend_x += 18 + 6.4 * (len(s.label) + len(now) + 2)
    if n == 0:
        parts.append(f'<text x="{pad_l + w / 2}" y="{pad_t + h / 2}" class="cv" text-anchor="middle">'
                     'collecting samples…</text>')
    parts.append("</svg>")
    return "".join(parts)


def _span(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"
