"""A model too big for the probing machine, measured as two shallower copies of itself.

The user names the constructor argument that sets the depth (`advisor probe --depth-arg n_layer
--depths 2,4`): the full model is built on torch's meta device to count its parameters (nothing is
allocated), and copies of the same width at the two depths are trained. A transformer's step is its
layers plus what is outside them (embeddings, head, loss, optimizer over those); every per-step
figure is read as linear in the depth, so the full model's is the deeper copy's plus (full - b)
layers of the per-layer difference. benchmarks/depth_extrapolation.py measures how far that lands
from whole runs of models small enough to run whole; its figure (data/depth_extrapolation.json)
widens the extrapolated CI. Torch-free: the arithmetic, the options' checks and the fits.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

ERROR_FILE = Path(__file__).with_name("data") / "depth_extrapolation.json"


class DepthError(ValueError):
    """--depth-arg / --depths that cannot be used; the message is one line for the user."""


def parse_depths(text: str) -> tuple[int, int]:
    """'a,b': two whole depths, 1 <= a < b."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise DepthError(f"--depths {text!r}: two whole numbers, shallower first (e.g. 2,4)")
    a, b = int(parts[0]), int(parts[1])
    if not 1 <= a < b:
        raise DepthError(f"--depths {text!r}: two different depths of at least 1, shallower first")
    return a, b


def check_full_depth(full, depth_arg: str, depths: tuple[int, int]) -> int:
    """The full model's depth (its init argument, or the constructor's default) above both depths."""
    if not isinstance(full, int) or isinstance(full, bool) or full < 1:
        raise DepthError(f"--depth-arg {depth_arg}: the workload's {depth_arg} is {full!r}, not a whole number of "
                         "layers (set it with --init-args, or give the constructor a default)")
    if full <= depths[1]:
        raise DepthError(f"--depths {depths[0]},{depths[1]}: the full model has {depth_arg}={full}; measure it whole "
                         "(leave --depths out) or give depths below it")
    return full


def at_depth(a: tuple[int, float | None], b: tuple[int, float | None], full: int) -> float | None:
    """A figure measured at depths a and b (depth, value), read as linear in the depth, at `full`.
    The per-layer step is never below 0: a deeper copy that measured less (noise) adds nothing."""
    (da, va), (db, vb) = a, b
    if va is None or vb is None:
        return None
    per_layer = max(0.0, (vb - va) / (db - da))
    return vb + per_layer * (full - db)


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
