"""Plots as hand-written inline SVG.

Why not matplotlib or a JS chart library: an SVG string built here needs no dependency, no
vendored script and no canvas, renders the same in the live viewer and in the static
``report --html`` file (it is just markup), stays a few KB, and can be inspected by tests as
DOM. Four shapes cover every plot the summary needs: grouped bars (scores per category,
histograms), stacked horizontal bars (tool mix, terminations, errors by kind), a strip plot
(per-seed means around their mean) and a line with a band (a learning curve against the step).
"""

from __future__ import annotations

from html import escape

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac")
_FONT = 'font-family="system-ui, sans-serif" font-size="11"'


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _svg(width: int, height: int, body: list[str], title: str) -> str:
    return (f'<svg class="plot" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}" {_FONT}>'
            f'<title>{escape(title)}</title>{"".join(body)}</svg>')


def _legend(labels: list[str], x: int, y: int) -> list[str]:
    out = []
    for i, label in enumerate(labels):
        yy = y + 16 * i
        out.append(f'<rect x="{x}" y="{yy}" width="10" height="10" fill="{color(i)}"/>'
                   f'<text x="{x + 14}" y="{yy + 9}">{escape(label)}</text>')
    return out


def _fmt(v: float, pct: bool) -> str:
    return f"{100 * v:.0f}" if pct else (f"{v:.0f}" if float(v).is_integer() else f"{v:.2g}")


def grouped_bars(title: str, categories: list[str], series: list[tuple[str, list[float | None]]],
                 *, pct: bool = False, y_label: str = "") -> str:
    """Vertical bars: one group per category, one bar per series (None draws nothing)."""
    if not categories or not series:
        return empty(title)
    values = [v for _, vs in series for v in vs if v is not None]
    top = 1.0 if pct else max(values + [1.0])
    plot_h, left, bottom, top_m = 180, 40, 70, 22
    group_w = max(24, 10 * len(series) + 10)
    legend_w = 20 + 7 * max(len(s[0]) for s in series)
    width = left + group_w * len(categories) + 20 + legend_w
    height = plot_h + bottom + top_m
    body = [f'<text x="4" y="12" font-weight="600">{escape(y_label)}</text>']
    for t in range(5):
        frac = t / 4
        y = top_m + plot_h * (1 - frac)
        body.append(f'<line x1="{left}" x2="{left + group_w * len(categories)}" y1="{y:.1f}" y2="{y:.1f}" '
                    f'stroke="#ddd"/><text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end">'
                    f'{_fmt(top * frac, pct)}</text>')
    bar_w = (group_w - 10) / len(series)
    for ci, cat in enumerate(categories):
        gx = left + group_w * ci + 5
        for si, (label, vs) in enumerate(series):
            v = vs[ci] if ci < len(vs) else None
            if v is None:
                continue
            h = plot_h * (v / top if top else 0.0)
            body.append(f'<rect class="bar" x="{gx + bar_w * si:.1f}" y="{top_m + plot_h - h:.1f}" '
                        f'width="{max(bar_w - 1, 1):.1f}" height="{h:.1f}" fill="{color(si)}">'
                        f'<title>{escape(label)} · {escape(cat)}: {_fmt(v, pct)}{"%" if pct else ""}</title></rect>')
        cx = gx + (group_w - 10) / 2
        body.append(f'<text x="{cx:.1f}" y="{top_m + plot_h + 14}" text-anchor="end" '
                    f'transform="rotate(-35 {cx:.1f} {top_m + plot_h + 14})">{escape(cat[:24])}</text>')
    body += _legend([s[0] for s in series], left + group_w * len(categories) + 20, 14)
    return _svg(width, height, body, title)


def stacked_hbars(title: str, rows: list[tuple[str, dict[str, int]]]) -> str:
    """One horizontal bar per row, split by key (counts), keys coloured consistently."""
    keys = list(dict.fromkeys(k for _, d in rows for k in d))
    if not rows or not keys:
        return empty(title)
    label_w = 8 + 6 * max(len(r[0]) for r in rows)
    bar_len, row_h = 320, 20
    width = label_w + bar_len + 36 + 24 + 7 * max(len(k) for k in keys)
    height = max(row_h * len(rows), 16 * len(keys)) + 16
    body: list[str] = []
    for ri, (label, d) in enumerate(rows):
        y = 6 + row_h * ri
        total = sum(d.values()) or 1
        x = float(label_w)
        body.append(f'<text x="{label_w - 6}" y="{y + 12}" text-anchor="end">{escape(label)}</text>')
        for ki, k in enumerate(keys):
            n = d.get(k, 0)
            if not n:
                continue
            w = bar_len * n / total
            body.append(f'<rect class="bar" x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row_h - 4}" '
                        f'fill="{color(ki)}"><title>{escape(label)} · {escape(k)}: {n}</title></rect>')
            x += w
        body.append(f'<text x="{label_w + bar_len + 4}" y="{y + 12}">{sum(d.values())}</text>')
    body += _legend(keys, label_w + bar_len + 36, 6)
    return _svg(width, height, body, title)


def strip_plot(title: str, rows: list[tuple[str, list[float]]], *, pct: bool = True) -> str:
    """Per row, one dot per seed's mean score and a tick at their mean: how much seeds spread."""
    rows = [r for r in rows if r[1]]
    if not rows:
        return empty(title)
    label_w = 8 + 6 * max(len(r[0]) for r in rows)
    axis_len, row_h = 360, 22
    top = 1.0 if pct else max(max(v) for _, v in rows) or 1.0
    width, height = label_w + axis_len + 20, row_h * len(rows) + 30
    body: list[str] = []
    for t in range(5):
        x = label_w + axis_len * t / 4
        body.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="4" y2="{row_h * len(rows) + 4}" stroke="#ddd"/>'
                    f'<text x="{x:.1f}" y="{row_h * len(rows) + 18}" text-anchor="middle">'
                    f'{_fmt(top * t / 4, pct)}</text>')
    for ri, (label, vs) in enumerate(rows):
        y = 4 + row_h * ri + row_h / 2
        body.append(f'<text x="{label_w - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(label)}</text>')
        for v in vs:
            body.append(f'<circle class="dot" cx="{label_w + axis_len * v / top:.1f}" cy="{y:.1f}" r="4" '
                        f'fill="{color(ri)}" fill-opacity="0.6"><title>{_fmt(v, pct)}</title></circle>')
        m = sum(vs) / len(vs)
        mx = label_w + axis_len * m / top
        body.append(f'<line x1="{mx:.1f}" x2="{mx:.1f}" y1="{y - 8:.1f}" y2="{y + 8:.1f}" stroke="#222" '
                    f'stroke-width="2"/>')
    return _svg(width, height, body, title)


Point = tuple[int, float, float | None, float | None]
"""One point of a curve: step, value, band low, band high (no band: None, None)."""


def line_band(title: str, points: list[Point], *, pct: bool = True,
              best: int | None = None, y_label: str = "") -> str:
    """A curve against the step: (x, y, band low, band high) per point, the band shaded, ``best`` ringed."""
    if not points:
        return empty(title)
    xs = [p[0] for p in points]
    top = 1.0 if pct else max([max(p[1], p[3] if p[3] is not None else p[1]) for p in points] + [1.0])
    left, plot_w, plot_h, top_m, bottom = 44, 360, 160, 22, 34
    lo_x, span = min(xs), (max(xs) - min(xs)) or 1

    def at(x: float, y: float) -> tuple[float, float]:
        cx = left + plot_w * ((x - lo_x) / span if len(xs) > 1 else 0.5)
        return cx, top_m + plot_h * (1 - max(0.0, min(y, top)) / top)

    body = [f'<text x="4" y="12" font-weight="600">{escape(y_label)}</text>']
    for t in range(5):
        y = top_m + plot_h * (1 - t / 4)
        body.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>'
                    f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end">{_fmt(top * t / 4, pct)}</text>')
    banded = [(x, lo, hi) for x, _, lo, hi in points if lo is not None and hi is not None]
    if banded:
        upper = [at(x, hi) for x, _, hi in banded]
        lower = [at(x, lo) for x, lo, _ in reversed(banded)]
        poly = " ".join(f"{x:.1f},{y:.1f}" for x, y in upper + lower)
        body.append(f'<polygon class="band" points="{poly}" fill="{color(0)}" fill-opacity="0.18"/>')
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in (at(p[0], p[1]) for p in points))
    body.append(f'<polyline class="curve" points="{line}" fill="none" stroke="{color(0)}" stroke-width="2"/>')
    for x, y, lo, hi in points:
        cx, cy = at(x, y)
        spread = "" if lo is None or hi is None else f" (band {_fmt(lo, pct)}–{_fmt(hi, pct)})"
        ring = ' stroke="#222" stroke-width="2"' if x == best else ""
        body.append(f'<circle class="dot" cx="{cx:.1f}" cy="{cy:.1f}" r="{5 if x == best else 3}" fill="{color(0)}"'
                    f'{ring}><title>step {x}: {_fmt(y, pct)}{spread}{" · best" if x == best else ""}</title></circle>')
        body.append(f'<text x="{cx:.1f}" y="{top_m + plot_h + 14}" text-anchor="middle">{x}</text>')
    body.append(f'<text x="{left + plot_w / 2:.1f}" y="{top_m + plot_h + 30}" text-anchor="middle">step</text>')
    return _svg(left + plot_w + 24, top_m + plot_h + bottom, body, title)


def empty(title: str) -> str:
    """A small placeholder saying there is nothing to draw (never an empty, broken figure)."""
    return _svg(260, 30, ['<text x="4" y="18" fill="#888">nothing to plot</text>'], title)
