"""Charts of the serving trade-off, drawn by our own code: an SVG file (``frontier_svg``) and
plain characters for the terminal (``frontier_text``). No plotting library.

A frontier is a list of points (tokens/s per user, output tokens/s per GPU) in order of rising
tokens/s per user, each the best tokens/s per GPU at or beyond its tokens/s per user; it is
drawn as the staircase that says so. Imports nothing from lts.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape as _html_escape


def escape(text: str) -> str:
    """&, < and > as entities (xml.sax.saxutils.escape's rule; that module imports urllib, 15 ms
    of every start-up)."""
    return _html_escape(text, quote=False)


@dataclass
class Series:
    """One frontier: its label, colour and points [(x, y)] in order of rising x."""
    label: str
    color: str
    points: list


def nice_ticks(hi: float, n: int = 6) -> list:
    """About ``n`` round tick values from 0 to at least ``hi`` (steps of 1, 2 or 5 x 10^k)."""
    if not hi > 0 or not math.isfinite(hi):
        return [0.0, 1.0]
    raw = hi / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(s * mag for s in (1, 2, 5, 10) if s * mag >= raw)
    return [i * step for i in range(int(math.ceil(hi / step - 1e-9)) + 1)]


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def frontier_svg(series: list, title: str, x_label: str, y_label: str, chosen=None,
                 x_limit=None, limit_label: str = "", note: str = "", subtitle: str = "") -> str:
    """A self-contained SVG (640 x 440) of the frontiers in ``series``: a title and subtitle,
    axes with round ticks and units in the labels, each series' staircase and points,
    ``chosen`` (x, y) ringed, and ``x_limit`` (the least x the SLO allows, e.g. 1000 / TPOT
    limit) as a dashed line."""
    W, H, left, right, top, bottom = 640, 440, 78, 24, 66, 58
    xs = [x for s in series for x, _ in s.points] + ([x_limit] if x_limit else [])
    ys = [y for s in series for _, y in s.points]
    xt, yt = nice_ticks(max(xs, default=1.0) * 1.05), nice_ticks(max(ys, default=1.0) * 1.08)
    x_hi, y_hi = xt[-1], yt[-1]

    def px(x):
        return left + (W - left - right) * x / x_hi

    def py(y):
        return H - bottom - (H - top - bottom) * y / y_hi

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           f'viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="14">{escape(title)}</text>',
           f'<text x="{W / 2}" y="40" text-anchor="middle" fill="#555">{escape(subtitle)}</text>']
    for x in xt:                                 # grid, ticks and tick labels
        out.append(f'<line x1="{px(x):.1f}" y1="{top}" x2="{px(x):.1f}" y2="{H - bottom}" '
                   f'stroke="#e4e4e4"/>')
        out.append(f'<text x="{px(x):.1f}" y="{H - bottom + 16}" text-anchor="middle">'
                   f'{_fmt(x)}</text>')
    for y in yt:
        out.append(f'<line x1="{left}" y1="{py(y):.1f}" x2="{W - right}" y2="{py(y):.1f}" '
                   f'stroke="#e4e4e4"/>')
        out.append(f'<text x="{left - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{_fmt(y)}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{W - left - right}" '
               f'height="{H - top - bottom}" fill="none" stroke="#333"/>')
    out.append(f'<text x="{(left + W - right) / 2}" y="{H - 18}" text-anchor="middle">'
               f'{escape(x_label)}</text>')
    out.append(f'<text transform="translate(18 {(top + H - bottom) / 2}) rotate(-90)" '
               f'text-anchor="middle">{escape(y_label)}</text>')
    lx = W - right - 230                         # the legend's left edge (top right corner)
    if x_limit:
        out.append(f'<line x1="{px(x_limit):.1f}" y1="{top}" x2="{px(x_limit):.1f}" '
                   f'y2="{H - bottom}" stroke="#c0392b" stroke-dasharray="5,4"/>')
        # the label runs up the line on its left, where no point is (every point meets the
        # limit), or on its right when the line is too close to the axis
        lx0 = px(x_limit) - 6 if px(x_limit) - left > 18 else px(x_limit) + 14
        out.append(f'<text x="{lx0:.1f}" y="{H - bottom - 6}" fill="#c0392b" '
                   f'transform="rotate(-90 {lx0:.1f} {H - bottom - 6})">'
                   f'{escape(limit_label)}</text>')
    for s in series:
        if not s.points:
            continue
        path = [f"M{px(s.points[0][0]):.1f},{py(s.points[0][1]):.1f}"]
        for (x0, _), (x1, y1) in zip(s.points, s.points[1:]):
            path.append(f"L{px(x0):.1f},{py(y1):.1f} L{px(x1):.1f},{py(y1):.1f}")
        out.append(f'<path d="{" ".join(path)}" fill="none" stroke="{s.color}" '
                   f'stroke-width="2"/>')
        out.extend(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5" fill="{s.color}"/>'
                   for x, y in s.points)
    if chosen is not None:
        cx, cy = px(chosen[0]), py(chosen[1])
        out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="8" fill="none" stroke="black" '
                   f'stroke-width="2"/>')
        # right of the ring, or left of it near the right edge or under the legend
        left_side = cx > W - right - 170 or (cx > lx - 160 and cy < top + 60)
        anchor, tx = ("end", cx - 11) if left_side else ("start", cx + 11)
        out.append(f'<text x="{tx:.1f}" y="{cy - 8:.1f}" text-anchor="{anchor}">chosen: '
                   f'{_fmt(chosen[1])} at {_fmt(chosen[0])}</text>')
    ly = top + 16                                # legend, top right
    for s in series:
        out.append(f'<line x1="{lx}" y1="{ly - 4}" x2="{lx + 20}" y2="{ly - 4}" '
                   f'stroke="{s.color}" stroke-width="2"/>')
        out.append(f'<text x="{lx + 26}" y="{ly}">{escape(s.label)}</text>')
        ly += 16
    if note:
        out.append(f'<text x="{lx}" y="{ly}" fill="#555">{escape(note)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def frontier_text(points: list, chosen=None, x_limit=None, width: int = 60,
                  height: int = 13) -> list:
    """The frontier as lines of plain characters (``width`` + 11 columns): ``o`` a point, ``*``
    the chosen one, ``:`` the least x the SLO allows, the staircase's treads in ``_``."""
    xs = [x for x, _ in points] + ([x_limit] if x_limit else [])
    x_hi = nice_ticks(max(xs, default=1.0) * 1.05)[-1]
    y_hi = nice_ticks(max((y for _, y in points), default=1.0) * 1.08)[-1]
    grid = [[" "] * width for _ in range(height)]

    def cell(x, y):
        c = min(width - 1, max(0, int(round(x / x_hi * (width - 1)))))
        r = min(height - 1, max(0, int(round((1 - y / y_hi) * (height - 1)))))
        return r, c

    for (x0, _), (x1, y1) in zip(points, points[1:]):       # the staircase
        r0, c0 = cell(x0, y1)
        _, c1 = cell(x1, y1)
        for c in range(c0 + 1, c1):
            grid[r0][c] = "_"
    if x_limit:
        c = cell(x_limit, 0)[1]
        for r in range(height):
            grid[r][c] = ":"
    for x, y in points:
        r, c = cell(x, y)
        grid[r][c] = "o"
    if chosen is not None:
        r, c = cell(*chosen)
        grid[r][c] = "*"
    lines = []
    for i, row in enumerate(grid):
        label = _fmt(y_hi * (1 - i / (height - 1))) if i in (0, height // 2, height - 1) else ""
        lines.append(f"{label:>9} |" + "".join(row).rstrip())
    lines.append(" " * 10 + "+" + "-" * width)
    lo, hi = "0", _fmt(x_hi)
    lines.append(" " * 11 + lo + " " * (width - len(lo) - len(hi)) + hi)
    return lines


def timeline_svg(t: list, panels: list, title: str, subtitle: str = "") -> str:
    """A self-contained SVG (720 wide) of quantities over a run's time ``t`` (seconds): one
    panel each, stacked, sharing the time axis. ``panels``: [(label with its unit,
    [(series label, colour, values [len(t)])])]; each series is drawn as a step line (a value
    holds until the next time)."""
    W, left, right, top, ph, gap, bottom = 720, 78, 24, 56, 120, 34, 46
    H = top + len(panels) * (ph + gap) - gap + bottom
    t_hi = nice_ticks(max(t, default=1.0))[-1] if t else 1.0
    xt = nice_ticks(t_hi)

    def px(x):
        return left + (W - left - right) * x / t_hi

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           f'viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14">{escape(title)}</text>',
           f'<text x="{W / 2}" y="38" text-anchor="middle" fill="#555">{escape(subtitle)}</text>']
    for k, (label, series) in enumerate(panels):
        y0 = top + k * (ph + gap)
        hi = max((max(v, default=0.0) for _, _, v in series), default=0.0)
        yt = nice_ticks(hi * 1.05 if hi > 0 else 1.0, 4)
        y_hi = yt[-1]

        def py(y, y0=y0, y_hi=y_hi):
            return y0 + ph - ph * y / y_hi
        for x in xt:
            out.append(f'<line x1="{px(x):.1f}" y1="{y0}" x2="{px(x):.1f}" y2="{y0 + ph}" '
                       f'stroke="#e4e4e4"/>')
        for y in yt:
            out.append(f'<line x1="{left}" y1="{py(y):.1f}" x2="{W - right}" y2="{py(y):.1f}" '
                       f'stroke="#e4e4e4"/>')
            out.append(f'<text x="{left - 6}" y="{py(y) + 4:.1f}" text-anchor="end">'
                       f'{_fmt(y)}</text>')
        out.append(f'<rect x="{left}" y="{y0}" width="{W - left - right}" height="{ph}" '
                   f'fill="none" stroke="#333"/>')
        out.append(f'<text transform="translate(16 {y0 + ph / 2}) rotate(-90)" '
                   f'text-anchor="middle" font-size="11">{escape(label)}</text>')
        lx = left + 8
        for name, color, values in series:
            pts, prev = [], None
            for x, y in zip(t, values):
                if prev is not None:
                    pts.append(f"L{px(x):.1f},{py(prev):.1f}")
                pts.append(f"{'M' if not pts else 'L'}{px(x):.1f},{py(y):.1f}")
                prev = y
            if pts:
                out.append(f'<path d="{" ".join(pts)}" fill="none" stroke="{color}" '
                           f'stroke-width="1.5"/>')
            out.append(f'<text x="{lx}" y="{y0 + 14}" fill="{color}">{escape(name)}</text>')
            lx += 8 * len(name) + 24
    y_axis = top + len(panels) * (ph + gap) - gap
    for x in xt:
        out.append(f'<text x="{px(x):.1f}" y="{y_axis + 16}" text-anchor="middle">'
                   f'{_fmt(x)}</text>')
    out.append(f'<text x="{(left + W - right) / 2}" y="{H - 10}" text-anchor="middle">'
               f'time since the run started (s)</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
