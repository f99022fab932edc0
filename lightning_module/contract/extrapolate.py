"""A model too big for the probing machine, measured as shallower copies of itself.

The user names the constructor argument that sets the depth (`advisor probe --depth-arg n_layer
--depths 1,2,3`): the full model is built on torch's meta device to count its parameters (nothing is
allocated), and copies of the same width at the given depths are trained. A transformer's step is
what is outside its layers (embeddings, head, loss, the host's dispatch, the optimizer over those
parameters) plus the same work per layer (the optimizer over a layer's parameters included, so a
stack of like layers keeps the step linear in its depth): step(L) = a + b x L.

The copies are timed in rounds, every depth once a round, back to back: the machine's drift (other
work, clocks, caches) falls on all depths of a round alike instead of on the difference between
two depths timed minutes apart, a difference the extrapolation multiplies by (full - b) / (b - a).
Each round gives its own line (a_r, b_r) and so its own full-depth step; their spread over the rounds
is the band, with the t quantile of rounds - 1 degrees of freedom: intercept and slope each carry
their uncertainty and their covariance to the full depth (fit_depths). benchmarks/depth_extrapolation.py
times models small enough to run whole in the same rounds as their copies and checks that the band
covers them; its figure (data/depth_extrapolation.json), the largest |error| it saw, widens the band
for what the line itself misses (a step not quite linear in the depth). Torch-free: the arithmetic, the options' checks
and the fits.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from .timing import t95

ERROR_FILE = Path(__file__).with_name("data") / "depth_extrapolation.json"
MAX_DEPTHS = 8  # shallow depths one probe measures at most


class DepthError(ValueError):
    """--depth-arg / --depths that cannot be used; the message is one line for the user."""


def parse_depths(text: str) -> tuple[int, ...]:
    """'a,b[,c...]': two to MAX_DEPTHS whole depths, 1 <= a < b < c ... (three give the line a check)."""
    parts = [p.strip() for p in text.split(",")]
    if not 2 <= len(parts) <= MAX_DEPTHS or not all(p.isdigit() for p in parts):
        raise DepthError(f"--depths {text!r}: two to {MAX_DEPTHS} whole numbers, shallowest first (e.g. 1,2,3)")
    depths = tuple(int(p) for p in parts)
    if depths[0] < 1 or any(x >= y for x, y in pairwise(depths)):
        raise DepthError(f"--depths {text!r}: different depths of at least 1, shallowest first")
    return depths


def check_full_depth(full, depth_arg: str, depths: tuple[int, ...]) -> int:
    """The full model's depth (its init argument, or the constructor's default) above both depths."""
    if not isinstance(full, int) or isinstance(full, bool) or full < 1:
        raise DepthError(f"--depth-arg {depth_arg}: the workload's {depth_arg} is {full!r}, not a whole number of "
                         "layers (set it with --init-args, or give the constructor a default)")
    if full <= depths[-1]:
        raise DepthError(f"--depths {','.join(map(str, depths))}: the full model has {depth_arg}={full}; measure it whole "
                         "(leave --depths out) or give depths below it")
    return full


def line(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line through (x, y) points of two or more x."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    return my - slope * mx, slope


def at_depth(points: Sequence[tuple[int, float | None]], full: int) -> float | None:
    """A figure counted at two or more depths (depth, value), read as linear in the depth, at `full`.
    The per-layer step is never below 0: a deeper copy that counted less adds nothing."""
    if any(v is None for _, v in points):
        return None
    _, b = line(points)
    deepest = max(points)
    return deepest[1] + max(0.0, b) * (full - deepest[0])


@dataclass(frozen=True)
class DepthFit:
    """step(L) = intercept + slope x L from rounds of step times, with what the rounds' spread says
    about each: standard errors, their covariance, and the band at any depth (95%, t of rounds - 1)."""

    depths: tuple[int, ...]
    rounds: int
    intercept_s: float
    slope_s: float
    intercept_se: float
    slope_se: float
    covariance: float  # of intercept and slope (s^2); negative for depths above 0: they trade off
    floor_s: float  # the deepest copy's mean step: a model with more layers is not faster

    def step_s(self, depth: int) -> float:
        return max(self.floor_s, self.intercept_s + self.slope_s * depth)

    def se(self, depth: int) -> float:
        var = self.intercept_se**2 + depth**2 * self.slope_se**2 + 2 * depth * self.covariance
        return math.sqrt(max(0.0, var))

    def band(self, depth: int) -> tuple[float, float]:
        """The 95% band of the mean step time at `depth` (seconds), never below the floor."""
        mid = self.intercept_s + self.slope_s * depth
        half = t95(self.rounds - 1) * self.se(depth)
        return max(self.floor_s, mid - half), max(self.floor_s, mid + half)


def fit_depths(rounds: Sequence[Mapping[int, float]]) -> DepthFit:
    """The line through rounds of mean step times ({depth: seconds} a round, the same depths in
    each): every round fitted on its own, the estimate their mean, its uncertainty their spread.
    A round's drift moves its whole line, so it shows in the band rather than in a slope that
    pairs a quiet depth with a busy one."""
    if len(rounds) < 2:
        raise DepthError(f"{len(rounds)} round(s) of the shallow copies timed: two or more give the band")
    depths = tuple(sorted(rounds[0]))
    if len(depths) < 2 or any(tuple(sorted(r)) != depths for r in rounds):
        raise DepthError(f"rounds of depths {[sorted(r) for r in rounds]}: every round times the same two or more depths")
    lines = [line([(d, r[d]) for d in depths]) for r in rounds]
    n = len(lines)
    a = statistics.fmean(x for x, _ in lines)
    b = statistics.fmean(y for _, y in lines)
    cov = sum((x - a) * (y - b) for x, y in lines) / (n - 1) / n
    return DepthFit(depths=depths, rounds=n, intercept_s=a, slope_s=b,
                    intercept_se=statistics.stdev(x for x, _ in lines) / math.sqrt(n),
                    slope_se=statistics.stdev(y for _, y in lines) / math.sqrt(n), covariance=cov,
                    floor_s=statistics.fmean(r[depths[-1]] for r in rounds))


@dataclass(frozen=True)
class ErrorFigure:
    relative_error: float  # the extrapolated step time's |error| against whole runs (the band's widening)
    source: str


def error_figure() -> ErrorFigure:
    """benchmarks/depth_extrapolation.py's measured error: the share each side of the CI widens."""
    d = json.loads(ERROR_FILE.read_text(encoding="utf-8"))
    return ErrorFigure(float(d["relative_error"]), f"{ERROR_FILE.name} ({d['measured']})")


def widen(ci: tuple[float, float], rate: float, relative_error: float) -> tuple[float, float]:
    """The CI around an extrapolated rate, widened by the extrapolation's error each side."""
    lo, hi = ci
    return max(0.0, min(lo, rate) * (1 - relative_error)), max(hi, rate) * (1 + relative_error)


def least_squares(rows: list[list[float]], ys: list[float]) -> list[float] | None:
    """The coefficients minimising |rows x c - ys| (normal equations, Gauss-Jordan with pivoting);
    None when the columns are not independent over these rows."""
    n = len(rows[0])
    a = [[sum(r[i] * r[j] for r in rows) for j in range(n)] + [sum(r[i] * y for r, y in zip(rows, ys))]
         for i in range(n)]
    for col in range(n):
        piv = max(range(col, n), key=lambda k: abs(a[k][col]))
        scale = max(abs(a[k][col]) for k in range(n)) or 1.0
        if abs(a[piv][col]) <= 1e-12 * scale:
            return None
        a[col], a[piv] = a[piv], a[col]
        for k in range(n):
            if k != col:
                f = a[k][col] / a[col][col]
                a[k] = [x - f * y for x, y in zip(a[k], a[col])]
    return [a[i][n] / a[i][i] for i in range(n)]


def activation_terms(points: list[tuple[int, int, float]]) -> tuple[float, float, float, str | None]:
    """(batch, sequence, bytes) -> (fixed, per token, per token per position), none below 0:
    bytes = fixed + per_token x batch x sequence + per_position x batch x sequence^2 where the points
    vary both batch and sequence, else without the quadratic term; the note says which."""
    rows = [[1.0, b * s, b * s * s] for b, s, _ in points]
    ys = [y for _, _, y in points]
    full = least_squares(rows, ys) if len({(b, s) for b, s, _ in points}) >= 3 else None
    if full is not None and min(full) >= -1e-6 * max(ys or [1.0]):
        return max(0.0, full[0]), max(0.0, full[1]), max(0.0, full[2]), None
    lin = least_squares([r[:2] for r in rows], ys)
    if lin is not None and min(lin) >= 0:
        return lin[0], lin[1], 0.0, "linear in the tokens (no term that grows with the length fitted)"
    tokens = [r[1] for r in rows]
    through0 = sum(t * y for t, y in zip(tokens, ys)) / sum(t * t for t in tokens)
    return 0.0, max(0.0, through0), 0.0, "fitted through 0 (the intercept came out negative)"
