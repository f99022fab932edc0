"""`--plot FILE.png|.svg|.pdf`: cost against time for every candidate, so the trade-off is visible.

The data (which candidates are drawn, which form the Pareto frontier) is worked out by
plot_points without matplotlib, so tests check it; draw() turns it into a figure. matplotlib is
imported only when a plot is asked for: it is heavy and optional.
"""

from __future__ import annotations

import importlib.util
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from safeio import check_name, current_umask

from ..errors import AdvisorError
from ..recommend import rank as rk
from ..recommend.planner import Plan
from ..recommend.rows import Rows
from .report import duration, instance_label, money

# Enough to see the shape of the cloud without drawing 1.2M points.
MAX_POINTS_PER_SOURCE = 4000
LABEL_TOP = 5
FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}  # what matplotlib's Agg, SVG and PDF backends write
STYLES = {0: ("measured", "o", "tab:green"), 1: ("reference", "s", "tab:blue"), 2: ("estimated", "^", "tab:orange")}
LABEL_SIZE = 8  # points


def check_target(path: str) -> tuple[Path, str]:
    """The file and format --plot writes, refused in one line before anything is computed or
    printed: a folder, an ending matplotlib is not asked to write, a folder that is missing or
    cannot be written, or no matplotlib."""
    target = check_name(path, "--plot", AdvisorError)  # length and encoding first
    if target.is_dir():
        raise AdvisorError(f"--plot {path} is a folder: give a file name ending in .png, .svg or .pdf")
    fmt = FORMATS.get(target.suffix.lower())
    if fmt is None:
        raise AdvisorError(f"--plot writes PNG, SVG or PDF: give a file name ending in .png, .svg or .pdf, not {path!r}")
    folder = target.parent
    if not folder.is_dir():
        raise AdvisorError(f"--plot: folder {folder} does not exist")
    try:  # the real test (permissions, read-only mounts, root): make a file there and remove it
        fd, probe = tempfile.mkstemp(prefix=".advisor-plot-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise AdvisorError(f"--plot: cannot write in folder {folder} ({e.strerror}); choose another place") from None
    if importlib.util.find_spec("matplotlib") is None:
        raise AdvisorError("--plot needs matplotlib: pip install 'instance-advisor[plot]'")
    return target, fmt


@dataclass(frozen=True, kw_only=True)
class PlotPoints:
    """Candidate indices to draw."""

    drawn: np.ndarray  # a sample of the cloud plus everything below
    frontier: np.ndarray  # not dominated on the ranked (hours, cost) (figures()); fastest first
    frontier_within_limits: bool  # among the feasible (else: nothing is, and the limits are ignored)
    shown: np.ndarray  # the report's rows, in order
    bars: np.ndarray  # the ones with error bars (shown and frontier)


def figures(c: rk.Candidates) -> tuple[np.ndarray, np.ndarray]:
    """(hours, cost) each point is drawn at: what the ranking reads (expected at confidence 0, the
    quantiles at a confidence); its error bars span the throughput band."""
    return c.rank_hours, c.cost_q


def plot_points(plan: Plan, rows: Rows, per_source: int = MAX_POINTS_PER_SOURCE) -> PlotPoints:
    """What to draw: the frontier, the rows, and at most `per_source` others of each throughput source."""
    c = plan.candidates
    hours, cost = figures(c)
    ok = np.isfinite(cost) & np.isfinite(hours) & (cost > 0) & (hours > 0)  # log axes
    feasible = np.flatnonzero(c.feasible & ok)
    within = len(feasible) > 0
    front = rk.pareto_front(cost, hours, feasible if within else np.flatnonzero(ok), c)
    front = front[np.argsort(hours[front], kind="stable")]
    shown = np.array([r.index for r in rows.candidates], dtype=np.int64)
    src = plan.types.source[c.type_idx]
    rng = np.random.default_rng(0)
    parts = [front, shown[ok[shown]]]
    for code in STYLES:
        idx = np.flatnonzero(ok & (src == code))
        if len(idx) > per_source:
            idx = rng.choice(idx, per_source, replace=False)
        parts.append(idx)
    drawn = np.unique(np.concatenate(parts).astype(np.int64))
    bars = np.unique(np.concatenate([shown[ok[shown]], front]).astype(np.int64))
    return PlotPoints(drawn=drawn, frontier=front, frontier_within_limits=within, shown=shown, bars=bars)


def plot_plan(plan: Plan, rows: Rows, path: str) -> None:
    target, fmt = check_target(path)
    fig = draw(plan, rows)
    try:
        _save(fig, target, fmt)
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def draw(plan: Plan, rows: Rows):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise AdvisorError("--plot needs matplotlib: pip install 'instance-advisor[plot]'") from None

    c, job = plan.candidates, plan.job
    hours, cost = figures(c)
    pts = plot_points(plan, rows)
    # A fixed layout: the labels are placed in display space, which must not move afterwards.
    fig = plt.figure(figsize=(12, 6.5), dpi=110)
    ax = fig.add_axes((0.07, 0.09, 0.65, 0.84))
    src = plan.types.source[c.type_idx]
    for code, (label, marker, colour) in STYLES.items():
        idx = pts.drawn[src[pts.drawn] == code]
        if len(idx) == 0:
            continue
        feas = c.feasible[idx]
        if feas.any():
            ax.scatter(hours[idx][feas], cost[idx][feas], marker=marker, c=colour, s=22,
                       label=f"{label} (feasible)", edgecolors="black", linewidths=0.3, zorder=3)
        if not feas.all():
            ax.scatter(hours[idx][~feas], cost[idx][~feas], marker=marker, facecolors="none",
                       edgecolors=colour, s=14, alpha=0.5, label=f"{label} (infeasible)", zorder=2)
    # Error bars on the options that matter (the rows and the frontier): a throughput band moves
    # time and cost together, so each gets bars in both directions, from the band's fast end to its
    # slow end around the expected figures (the drawn point, at a confidence, lies inside).
    b = pts.bars
    r_hi, r_lo = c.samples_per_sec[b] / c.high[b], c.samples_per_sec[b] / c.low[b]
    for code, (_, _, colour) in STYLES.items():
        m = src[b] == code
        if m.any():
            x, y, xe, ye = hours[b][m], cost[b][m], c.hours[b][m], c.cost[b][m]
            ax.errorbar(x, y, xerr=[np.maximum(x - xe * r_hi[m], 0), np.maximum(xe * r_lo[m] - x, 0)],
                        yerr=[np.maximum(y - ye * r_hi[m], 0), np.maximum(ye * r_lo[m] - y, 0)], fmt="none",
                        ecolor=colour, alpha=0.8, lw=0.9, capsize=2, zorder=5)
    ax.set_xscale("log")
    ax.set_yscale("log")
    xs = np.concatenate([hours[pts.drawn], c.hours[b] * r_lo, c.hours[b] * r_hi, [job.deadline_hours]])
    ys = np.concatenate([cost[pts.drawn], c.cost[b] * r_lo, c.cost[b] * r_hi, [job.budget_usd]])
    xlim, ylim = log_limits(xs), log_limits(ys)
    _frontier(ax, hours[pts.frontier], cost[pts.frontier], xlim, ylim, pts.frontier_within_limits)
    ax.axhline(job.budget_usd, color="tab:red", ls="--", lw=1, label=f"budget ${job.budget_usd:,.0f}")
    ax.axvline(job.deadline_hours, color="tab:purple", ls="--", lw=1, label=f"deadline {job.deadline_hours:,.3g} h")
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    at = "expected" if not job.confidence else f"at {job.confidence:.0%} confidence"
    ax.set_xlabel(f"time to train (hours, {at}; log)")
    ax.set_ylabel(f"cost (USD, {at}; log)")
    ax.set_title(f"{plan.workload_id}: {job.samples:,.3g} samples, objective {job.objective}, market {job.market}")
    ax.grid(True, which="both", alpha=0.2)
    # The key and the option list sit beside the axes, where they cannot hide a point.
    key = ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    key_bottom = fig.transFigure.inverted().transform(key.get_window_extent(fig.canvas.get_renderer()))[0][1]
    shown = rows.candidates[:LABEL_TOP]
    tags = [f"#{n + 1}" if rows.feasible else f"~{n + 1}" for n in range(len(shown))]
    if shown:
        head = "best options" if rows.feasible else "nothing feasible; closest"
        lines = [f"{t} {r.count}x {instance_label(r.instance_type, r.variant)}, {r.market}:\n"
                 f"    {duration(r.hours)}, ${money(r.cost_usd)}"
                 # one $ a line: two would start matplotlib's mathtext
                 + (f" ({duration(r.hours_at_confidence)}, {money(r.cost_usd_at_confidence)} at {job.confidence:.0%})"
                    if job.confidence else "") for t, r in zip(tags, shown)]
        fig.text(0.74, key_bottom - 0.03, head + "\n" + "\n".join(lines), va="top", ha="left", fontsize=8, family="monospace",
                 bbox={"boxstyle": "round", "fc": "white", "ec": "grey"})
        _label(ax, np.array([[hours[r.index], cost[r.index]] for r in shown]), tags)
    return fig


LOG_FLOOR = 1e-300  # the log axes' ends stay inside [1e-300, 1e300]: finite logs, finite ratios


def log_limits(v: np.ndarray) -> tuple[float, float]:
    v = v[np.isfinite(v) & (v > 0)]
    lo, hi = float(v.min()), float(v.max())
    # Bounded here, where the log axis is made: half a subnormal is 0 and twice 1e308 is inf, both
    # outside log10's domain (a $5e-324/h override once ended --format html in "math domain error").
    return max(lo / 2.0, LOG_FLOOR), min(hi * 2.0, 1.0 / LOG_FLOOR)


def _frontier(ax, hours: np.ndarray, cost: np.ndarray, xlim, ylim, within: bool) -> None:
    """The frontier as the edge of what it dominates: up from the fastest option, a step to each
    cheaper one, then on to the right edge; its options ringed."""
    if len(hours) == 0:
        return
    x = np.concatenate([[hours[0]], np.repeat(hours, 2)[1:], [xlim[1]]])
    y = np.concatenate([[ylim[1]], np.repeat(cost, 2)])
    label = (f"Pareto frontier of the feasible ({len(hours)})" if within
             else "Pareto frontier, budget and deadline ignored")
    ax.plot(x, y, color="black", lw=1.6, ls="-" if within else ":", label=label, zorder=6)
    ax.scatter(hours, cost, s=70, facecolors="none", edgecolors="black", linewidths=1.2, zorder=6)


LABEL_PAD = 0.1  # a label's white box around its text, in font sizes


def _label(ax, xy: np.ndarray, tags: list[str]) -> None:
    """Each tag beside its point, where it covers no other tag and no labelled point: nearest
    free spot on rings of growing radius, with a leader line back to the point."""
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    px = ax.transData.transform(xy)
    frame = ax.get_window_extent(renderer)
    per_pt = fig.dpi / 72.0
    taken = [(x - 5, y - 5, x + 5, y + 5) for x, y in px]  # the points themselves
    angles = [math.radians(a) for a in (-45, -135, 45, 135, -90, 90, 0, 180, -20, -160, 20, 160)]
    for (x, y), tag, (hx, hy) in zip(px, tags, xy):
        probe = ax.text(0, 0, tag, fontsize=LABEL_SIZE, fontweight="bold")
        box = probe.get_window_extent(renderer)
        probe.remove()
        # The white box's pad (0.1 of the font size on each side, as annotate draws it) and a pixel.
        pad = LABEL_PAD * LABEL_SIZE * per_pt + 1
        w, h = box.width + 2 * pad, box.height + 2 * pad
        spot = None
        for r in range(14, 200, 8):  # points
            for a in angles:
                cx, cy = x + r * per_pt * math.cos(a), y + r * per_pt * math.sin(a)
                cand = (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)
                inside = frame.x0 <= cand[0] and cand[2] <= frame.x1 and frame.y0 <= cand[1] and cand[3] <= frame.y1
                if inside and not any(_overlap(cand, t) for t in taken):
                    spot = (cx, cy, cand)
                    break
            if spot:
                break
        if spot is None:  # nowhere free inside the axes: put it on the point
            spot = (x, y, (x - w / 2, y - h / 2, x + w / 2, y + h / 2))
        cx, cy, cand = spot
        taken.append(cand)
        ax.annotate(tag, (hx, hy), xytext=((cx - x) / per_pt, (cy - y) / per_pt), textcoords="offset points",
                    ha="center", va="center", fontsize=LABEL_SIZE, fontweight="bold", zorder=7,
                    bbox={"boxstyle": f"square,pad={LABEL_PAD}", "fc": "white", "ec": "none", "alpha": 0.8},
                    arrowprops={"arrowstyle": "-", "lw": 0.6, "color": "dimgrey", "shrinkA": 0, "shrinkB": 2})


def _overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _save(fig, target: Path, fmt: str) -> None:
    folder = target.parent
    try:
        fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix="." + fmt, dir=folder)
    except OSError as e:
        raise AdvisorError(f"--plot: cannot write in folder {folder} ({e.strerror}); choose another place") from None
    os.close(fd)
    try:
        fig.savefig(tmp, format=fmt)
        # mkstemp makes the file 0600; a plot is an ordinary file, so honour the umask instead.
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, target)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise AdvisorError(f"--plot: could not write {target} ({e.strerror})") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
