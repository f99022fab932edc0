"""`--plot FILE.png`: cost against time for every candidate, so the trade-off is visible.

Imported only when a plot is asked for: matplotlib is heavy and optional.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from . import rank as rk
from .errors import UserError
from .planner import Plan
from .rows import Rows

# Enough to see the shape of the cloud without drawing 1.2M points.
MAX_POINTS_PER_SOURCE = 4000
LABEL_TOP = 5


def plot_plan(plan: Plan, rows: Rows, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UserError("--plot needs matplotlib: pip install 'instance-advisor[plot]'") from None

    c = plan.candidates
    job = plan.job
    fig, ax = plt.subplots(figsize=(10, 6.5), dpi=110)
    ok = np.isfinite(c.cost) & np.isfinite(c.hours) & (c.cost > 0)
    src = plan.types.source[c.type_idx]
    styles = {0: ("measured", "o", "tab:green"), 1: ("reference", "s", "tab:blue"), 2: ("estimated", "^", "tab:orange")}
    rng = np.random.default_rng(0)
    for code, (label, marker, colour) in styles.items():
        idx = np.flatnonzero(ok & (src == code))
        if len(idx) == 0:
            continue
        if len(idx) > MAX_POINTS_PER_SOURCE:
            idx = np.sort(rng.choice(idx, MAX_POINTS_PER_SOURCE, replace=False))
        feas = c.feasible[idx]
        ax.scatter(c.hours[idx][feas], c.cost[idx][feas], marker=marker, c=colour, s=22,
                   label=f"{label} (feasible)", edgecolors="black", linewidths=0.3, zorder=3)
        ax.scatter(c.hours[idx][~feas], c.cost[idx][~feas], marker=marker, facecolors="none",
                   edgecolors=colour, s=14, alpha=0.5, label=f"{label} (infeasible)", zorder=2)
    front = plan.pareto if plan.pareto is not None else rk.pareto_front(c.cost, c.hours, np.flatnonzero(c.feasible), c)
    shown = np.array([r.index for r in rows.candidates], dtype=np.int64)
    # Error bars on the options that matter (the ranked ones and the frontier): a throughput
    # band moves time and cost together, so each gets bars in both directions.
    bars = np.unique(np.concatenate([shown, front])).astype(np.int64)
    bars = bars[ok[bars]]
    for code, (_, _, colour) in styles.items():
        b = bars[src[bars] == code]
        if len(b) == 0:
            continue
        r_hi, r_lo = c.sps[b] / c.sps_high[b], c.sps[b] / c.sps_low[b]
        ax.errorbar(c.hours[b], c.cost[b], xerr=[c.hours[b] * (1 - r_hi), c.hours[b] * (r_lo - 1)],
                    yerr=[c.cost[b] * (1 - r_hi), c.cost[b] * (r_lo - 1)], fmt="none", ecolor=colour,
                    alpha=0.8, lw=0.9, capsize=2, zorder=5)
    if len(front):
        order = front[np.argsort(c.hours[front])]
        ax.step(c.hours[order], c.cost[order], where="post", color="black", lw=1.2, label="Pareto frontier", zorder=4)
    ax.axhline(job.budget_usd, color="tab:red", ls="--", lw=1, label=f"budget ${job.budget_usd:,.0f}")
    ax.axvline(job.deadline_hours, color="tab:purple", ls="--", lw=1, label=f"deadline {job.deadline_hours:,.1f} h")
    # Numbers at the points, the words in a box: labels for neighbouring points do not collide.
    lines = []
    for n, r in enumerate(rows.candidates[:LABEL_TOP]):
        tag = f"#{n + 1}" if rows.feasible else f"~{n + 1}"
        ax.annotate(tag, (r.hours, r.cost_usd), xytext=(4 + 12 * (n % 3), -12 - 8 * n), textcoords="offset points",
                    fontsize=7, fontweight="bold", arrowprops={"arrowstyle": "-", "lw": 0.4, "color": "grey"})
        lines.append(f"{tag} {r.count}x {r.instance_type}, {r.market}: {r.hours:,.1f} h, ${r.cost_usd:,.2f}")
    if lines:
        head = "best options" if rows.feasible else "nothing feasible; closest"
        ax.text(0.01, 0.99, head + "\n" + "\n".join(lines), transform=ax.transAxes, va="top", ha="left",
                fontsize=7, family="monospace", bbox={"boxstyle": "round", "fc": "white", "ec": "grey", "alpha": 0.9},
                zorder=6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("time to train (hours, expected; log)")
    ax.set_ylabel("cost (USD, log)")
    ax.set_title(f"{plan.workload_id}: {job.samples:,.3g} samples, objective {job.objective}, market {job.market}")
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(fontsize=7, loc="upper right", ncol=2)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def _save(fig, path: str) -> None:
    target = Path(path)
    if target.parent and not target.parent.exists():
        raise UserError(f"--plot: folder {target.parent} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix=".png", dir=target.parent or ".")
    os.close(fd)
    try:
        fig.savefig(tmp, format="png")
        # mkstemp makes the file 0600; a plot is an ordinary file, so honour the umask instead.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
