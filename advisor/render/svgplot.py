"""The cost-vs-time plot of `--format html` as inline SVG, drawn here (no matplotlib): the same
points as `--plot` (plot.plot_points: a sample of every candidate, the Pareto frontier, the
report's rows) on log-log axes, the budget and deadline lines, and one marked point per row
whose figures can be drawn, each carrying the figures it is drawn at (data-hours, data-cost)."""

from __future__ import annotations

import math
from html import escape

import numpy as np

from ..recommend.planner import Plan
from ..recommend.rows import CandidateRow, Rows
from .plot import STYLES, figures, log_limits, plot_points
from .report import duration, instance_label, money

# The page's cloud: enough to see its shape, few enough that the page stays small (~100 B a point).
POINTS_PER_SOURCE = 1500
WIDTH, HEIGHT = 960, 560
LEFT, RIGHT, TOP, BOTTOM = 78, 700, 36, 500  # the axes' frame, in SVG units
COLOURS = {"tab:green": "#2ca02c", "tab:blue": "#1f77b4", "tab:orange": "#ff7f0e"}  # matplotlib's, as --plot
BUDGET_COLOUR, DEADLINE_COLOUR = "#d62728", "#9467bd"
LABELS = 10  # rows tagged with their rank in the plot; every row's point has its figures as a tooltip
LABEL_CHAR = 7.2  # SVG units a label character takes at the labels' font size (12), for placing them


def _log_axis(lo: float, hi: float, a: float, b: float):
    """The map from a value to an SVG coordinate, log scale, lo at a and hi at b."""
    l0, l1 = math.log10(lo), math.log10(hi)
    return lambda v: a + (math.log10(v) - l0) / (l1 - l0) * (b - a)


def ticks(lo: float, hi: float) -> list[float]:
    """Tick values inside [lo, hi]: the decades, and 2 and 5 times them when fewer than three decades show."""
    steps = (1, 2, 5) if math.log10(hi / lo) < 3 else (1,)
    out = [m * 10.0 ** e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1) for m in steps]
    return [t for t in out if lo <= t <= hi]


def _g(v: float) -> str:
    return f"{v:,g}" if v >= 1e-3 else f"{v:.1e}"


def _f(v: float) -> str:
    """A coordinate: one decimal is a tenth of a pixel."""
    return f"{v:.1f}"


def svg(plan: Plan, rows: Rows) -> str:
    """The plot as an <svg> element, for the page."""
    c, job = plan.candidates, plan.job
    hours, cost = figures(c)
    pts = plot_points(plan, rows, per_source=POINTS_PER_SOURCE)
    b = pts.bars
    r_hi, r_lo = c.samples_per_sec[b] / c.high[b], c.samples_per_sec[b] / c.low[b]
    xs = np.concatenate([hours[pts.drawn], c.hours[b] * r_lo, c.hours[b] * r_hi, [job.deadline_hours]])
    ys = np.concatenate([cost[pts.drawn], c.cost[b] * r_lo, c.cost[b] * r_hi, [job.budget_usd]])
    (x0, x1), (y0, y1) = log_limits(xs), log_limits(ys)
    X, Y = _log_axis(x0, x1, LEFT, RIGHT), _log_axis(y0, y1, BOTTOM, TOP)
    at = "expected" if not job.confidence else f"at {job.confidence:.0%} confidence"
    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" id="plot" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
           f'aria-labelledby="plot-title"><title id="plot-title">Cost against time to train ({at}), log-log, '
           f'for {len(pts.drawn):,} of {len(c):,} candidates</title>'),
           f'<rect class="frame" x="{LEFT}" y="{TOP}" width="{RIGHT - LEFT}" height="{BOTTOM - TOP}"/>']
    out += _grid(X, Y, (x0, x1), (y0, y1), at)
    out.append('<g class="cloud">')
    src = plan.types.source[c.type_idx]
    rest = np.setdiff1d(pts.drawn, pts.shown)
    for code, (_, _, colour) in STYLES.items():
        for i in rest[src[rest] == code]:
            fill = f'fill="{COLOURS[colour]}"' if c.feasible[i] else f'fill="none" stroke="{COLOURS[colour]}"'
            out.append(f'<circle cx="{_f(X(hours[i]))}" cy="{_f(Y(cost[i]))}" r="2.5" {fill}/>')
    out.append("</g>")
    out += _frontier(X, Y, hours[pts.frontier], cost[pts.frontier], x1, y1, pts.frontier_within_limits)
    out += _limit_lines(X, Y, job.budget_usd, job.deadline_hours)
    # The band moves time and cost together: bars from its fast end to its slow end around the
    # expected figures (the drawn point, at a confidence, lies inside), as --plot draws them.
    out.append('<g class="bars">')
    for j, i in enumerate(b):
        colour = COLOURS[STYLES[int(src[i])][2]]
        xa, xb = X(c.hours[i] * r_hi[j]), X(c.hours[i] * r_lo[j])
        ya, yb = Y(c.cost[i] * r_hi[j]), Y(c.cost[i] * r_lo[j])
        x, y = X(hours[i]), Y(cost[i])
        out.append(f'<path d="M{_f(xa)} {_f(y)}H{_f(xb)}M{_f(x)} {_f(ya)}V{_f(yb)}" stroke="{colour}"/>')
    out.append("</g>")
    out += _rows(rows, X, Y, src, job.confidence)
    out += _legend(pts.frontier_within_limits, job)
    out.append("</svg>")
    return "\n".join(out)


def drawable(r: CandidateRow, confidence: float) -> bool:
    """A row with figures a log axis can show (not $0: capacity already paid for; not unbounded)."""
    return all(math.isfinite(v) and v > 0 for v in (r.cost_usd_at_confidence, row_hours(r, confidence)))


def row_hours(r: CandidateRow, confidence: float) -> float:
    """The hours a row is drawn at: what the ranking reads (plot.figures), expected at confidence 0."""
    return r.hours_at_confidence if confidence else r.hours


def _grid(X, Y, xlim, ylim, at: str) -> list[str]:
    out = ['<g class="grid">']
    for t in ticks(*xlim):
        x = _f(X(t))
        out.append(f'<path d="M{x} {TOP}V{BOTTOM}"/><text class="tick" x="{x}" y="{BOTTOM + 16}" '
                   f'text-anchor="middle">{escape(_g(t))}</text>')
    for t in ticks(*ylim):
        y = _f(Y(t))
        out.append(f'<path d="M{LEFT} {y}H{RIGHT}"/><text class="tick" x="{LEFT - 6}" y="{y}" '
                   f'text-anchor="end" dominant-baseline="middle">${escape(_g(t))}</text>')
    out.append("</g>")
    out.append(f'<text class="axis" x="{(LEFT + RIGHT) / 2}" y="{BOTTOM + 40}" text-anchor="middle">'
               f'time to train (hours, {escape(at)}; log)</text>')
    out.append(f'<text class="axis" transform="translate(18 {(TOP + BOTTOM) / 2}) rotate(-90)" '
               f'text-anchor="middle">cost (USD, {escape(at)}; log)</text>')
    return out


def _frontier(X, Y, h: np.ndarray, cst: np.ndarray, x1: float, y1: float, within: bool) -> list[str]:
    """The frontier as the edge of what it dominates (as --plot): up from the fastest option, a step
    to each cheaper one, then on to the right edge; its options ringed."""
    if len(h) == 0:
        return []
    d = f"M{_f(X(h[0]))} {_f(Y(y1))}" + "".join(
        f"V{_f(Y(cst[k]))}H{_f(X(h[k + 1]) if k + 1 < len(h) else X(x1))}" for k in range(len(h)))
    out = [f'<g class="frontier{"" if within else " ignoring-limits"}"><path d="{d}"/>']
    out += [f'<circle cx="{_f(X(a))}" cy="{_f(Y(bb))}" r="7"/>' for a, bb in zip(h, cst)]
    return out + ["</g>"]


def _limit_lines(X, Y, budget: float, deadline: float) -> list[str]:
    y, x = _f(Y(budget)), _f(X(deadline))
    return [(f'<g class="limits"><path class="budget" d="M{LEFT} {y}H{RIGHT}" stroke="{BUDGET_COLOUR}"/>'
            f'<text x="{RIGHT - 4}" y="{float(y) - 5:.1f}" text-anchor="end" fill="{BUDGET_COLOUR}">'
            f'budget ${escape(money(budget))}</text>'
            f'<path class="deadline" d="M{x} {TOP}V{BOTTOM}" stroke="{DEADLINE_COLOUR}"/>'
            f'<text x="{float(x) + 4:.1f}" y="{TOP + 14}" fill="{DEADLINE_COLOUR}">deadline {escape(duration(deadline))}'
            "</text></g>")]


def _rows(rows: Rows, X, Y, src, confidence: float) -> list[str]:
    """One marked point per drawable row (data-i: its row in the table, its title its figures); the
    first LABELS tagged #rank (~n when nothing fits), placed where the tag covers no other tag or
    marked point (nearest free spot on rings of growing radius, with a leader line back)."""
    out = ['<g class="rows">']
    taken: list[tuple[float, float, float, float]] = []
    placed = []
    for n, r in enumerate(rows.candidates):
        if not drawable(r, confidence):
            continue
        x, y = X(row_hours(r, confidence)), Y(r.cost_usd_at_confidence)
        taken.append((x - 6, y - 6, x + 6, y + 6))
        placed.append((n, r, x, y))
    for k, (n, r, x, y) in enumerate(placed):
        colour = COLOURS[STYLES[int(src[r.index])][2]]
        tag = f"#{r.rank}" if r.rank is not None else f"~{n + 1}"
        w, h = LABEL_CHAR * len(tag) + 4, 16
        spot = (x, y) if k >= LABELS else next(((cx, cy) for rad in range(14, 120, 8) for ang in range(-45, 315, 45)
                     for cx, cy in [(x + rad * math.cos(math.radians(ang)), y + rad * math.sin(math.radians(ang)))]
                     if LEFT <= cx - w / 2 and cx + w / 2 <= RIGHT and TOP <= cy - h / 2 and cy + h / 2 <= BOTTOM
                     and not any(_overlap((cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2), t) for t in taken)),
                    (x, y))
        taken.append((spot[0] - w / 2, spot[1] - h / 2, spot[0] + w / 2, spot[1] + h / 2))
        label = "" if k >= LABELS else (
            f'<path class="leader" d="M{_f(x)} {_f(y)}L{_f(spot[0])} {_f(spot[1])}"/>'
            f'<text x="{_f(spot[0])}" y="{_f(spot[1])}" text-anchor="middle" dominant-baseline="middle">'
            f"{escape(tag)}</text>")
        figs = f"{duration(row_hours(r, confidence))}, ${money(r.cost_usd_at_confidence)}"
        title = f"{tag} {r.count} x {instance_label(r.instance_type, r.variant)}, {r.market}, {r.region}: {figs}" + (
            f" at {confidence:.0%} confidence" if confidence else "")
        out.append(f'<g class="row-point" data-i="{n}" data-rank="{r.rank if r.rank is not None else ""}" '
                   f'data-hours="{row_hours(r, confidence)!r}" data-cost="{r.cost_usd_at_confidence!r}">'
                   f'<title>{escape(title)}</title><circle cx="{_f(x)}" cy="{_f(y)}" r="6" fill="{colour}"/>{label}</g>')
    return out + ["</g>"]


def _overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _legend(within: bool, job) -> list[str]:
    x, y = RIGHT + 24, TOP + 8
    out = ['<g class="legend">']
    for label, _, colour in STYLES.values():
        out.append(f'<circle cx="{x + 6}" cy="{y}" r="4" fill="{COLOURS[colour]}"/>'
                   f'<text x="{x + 26}" y="{y}" dominant-baseline="middle">{label}</text>')
        y += 22
    out.append(f'<circle cx="{x}" cy="{y}" r="3.5" fill="#888"/><circle cx="{x + 12}" cy="{y}" r="3.5" fill="none" '
               f'stroke="#888"/><text x="{x + 26}" y="{y}" dominant-baseline="middle">filled: feasible; hollow: not</text>')
    y += 22
    out.append(f'<circle cx="{x}" cy="{y}" r="6" fill="#fff" stroke="#000"/><text x="{x + 26}" y="{y}" '
               'dominant-baseline="middle">a row of the table (#rank)</text>')
    y += 22
    label = "Pareto frontier of the feasible" if within else "Pareto frontier, limits ignored"
    out.append(f'<path class="frontier-key{"" if within else " ignoring-limits"}" d="M{x - 6} {y}H{x + 18}"/>'
               f'<text x="{x + 26}" y="{y}" dominant-baseline="middle">{label}</text>')
    y += 22
    for cls, colour, text in (("budget", BUDGET_COLOUR, f"budget ${money(job.budget_usd)}"),
                              ("deadline", DEADLINE_COLOUR, f"deadline {duration(job.deadline_hours)}")):
        out.append(f'<path class="{cls}" d="M{x - 6} {y}H{x + 18}" stroke="{colour}"/>'
                   f'<text x="{x + 26}" y="{y}" dominant-baseline="middle">{escape(text)}</text>')
        y += 22
    out.append(f'<text x="{x - 6}" y="{y + 6}" class="note">bars: the throughput band</text>')
    return out + ["</g>"]
