"""When a rung's warm-up is over: a change-point on its step times, no torch.

A rung's first steps are slow for reasons that pass (loader workers starting, lazy
initialisation, the allocator growing its pools, cuDNN choosing kernels, a compiled graph's
first runs); a fixed count of warm-up steps either wastes steps where they settle at once (a 30 s
CPU step) or times steps that have not settled (a GPU rung whose kernels take a dozen steps to
choose). Here the warm-up ends where the step times stop changing: the last change-point of the
series, found by binary segmentation on the log step times (a split into two constant means is
taken when it explains the spread beyond a BIC-like penalty), once SETTLE_STEPS steps after it
agree. The steps after the change-point are steady steps, so they are the rung's first timed ones.

tests/packages/lightning_module/test_settle.py checks it on simulated series: a flat series
settles at the first step allowed, a decaying one where the decay has died out, and the false
change-point rate on pure noise is stated there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

SETTLE_STEPS = 3  # steps after the last change-point that must agree before timing starts
# A split of n log step times into two means is a change when n log(SSE_one / SSE_two) exceeds
# PENALTY log(n): BIC's penalty for the two parameters a split adds (the second mean, where it
# falls) is 2 log n; 3 log n keeps a noisy steady series from being split (test_settle.py).
PENALTY = 3.0
MAX_WARMUP_FACTOR = 4  # warm-up never runs past this many times the --warmup-steps it replaces


def _sse(s: float, s2: float, n: int) -> float:
    return max(s2 - s * s / n, 0.0) if n else 0.0


def best_split(x: Sequence[float]) -> tuple[int, float] | None:
    """(k, statistic) of the best split x[:k] | x[k:] into two means, the statistic being
    n log(SSE_one / SSE_two); None for fewer than 3 points."""
    n = len(x)
    if n < 3:
        return None
    total, total2 = math.fsum(x), math.fsum(v * v for v in x)
    whole = _sse(total, total2, n)
    best_k, best = 0, math.inf
    s = s2 = 0.0
    for k in range(1, n):
        s += x[k - 1]
        s2 += x[k - 1] ** 2
        two = _sse(s, s2, k) + _sse(total - s, total2 - s2, n - k)
        if two < best:
            best_k, best = k, two
    if whole <= 0:
        return best_k, 0.0
    stat = n * math.log(whole / best) if best > 0 else math.inf
    return best_k, stat


def last_change(step_times: Sequence[float], first: int = 0) -> int:
    """Where the last regime of the series starts (at `first` or later): splits are taken, each in
    what follows the one before, while they are changes (PENALTY)."""
    x = [math.log(max(t, 1e-12)) for t in step_times]
    start = first
    while True:
        seg = x[start:]
        found = best_split(seg)
        if found is None or found[1] <= PENALTY * math.log(len(seg)):
            return start
        start += found[0]


def settled_at(step_times: Sequence[float], first: int = 1, need: int = SETTLE_STEPS,
               long_s: float | None = None) -> int | None:
    """The index of the first steady step once the steps have settled (at least `need` steps after
    the last change-point, which is never before `first`), else None: not settled yet.

    `long_s` (a raced rung: race.RACE_LOOK_S): once a step after `first` has run that long, the
    warm-up is the first step alone (even a warm rung's: a new batch's buffers, a loader's
    workers starting) and the next step is timed. What settles (workers starting, lazy
    initialisation, the allocator's pools, kernels chosen) costs seconds, not a share of a step,
    so a step of many seconds carries it within its noise after the first; waiting for
    SETTLE_STEPS steps after a change-point cost 30-60 s a rung at 8-10 s a step (issue 32), and
    the race, its step noise known from the rungs before, can judge the rung on its second step."""
    if long_s is not None and len(step_times) > max(first, 1) and step_times[max(first, 1)] >= long_s:
        return max(first, 1)
    start = last_change(step_times, first)
    return start if len(step_times) - start >= need else None
