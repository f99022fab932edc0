"""Racing a rung against the best so far: stop timing as soon as the answer is known, no torch.

A rung is there to answer one question: does it beat the best configuration so far by its
decision margin (the gain the ladder asks of it: 0 for an on/off rung, BATCH_GAIN for a batch
step)? Timing it until its own CI reaches +-3% answers a question nobody asked; a rung 30% slower
than the best is known to lose after a few steps. `Race.verdict` looks at the rung's step times
after every step and says "won" (the CI's low end of samples/s is above the threshold) or "lost"
(its high end is below it), else None: keep timing (the ordinary stopping rule still ends a rung
whose answer stays inside the noise).

The error rate, stated: looking after every step inflates a fixed-level test's error, so look k
(k = 1, 2, ...) uses a t interval at level 1 - alpha_k with alpha_k = alpha / (k (k + 1)). These
sum to alpha over any number of looks (a telescoping series), so by the union bound the chance
that any look's interval misses the rung's true mean step time is at most alpha (= RACE_ALPHA,
5%). A stop is wrong only when an interval misses the true mean (a true rate above the threshold
cannot produce an interval wholly below it otherwise), so the false-stop rate of a rung is at
most alpha, for step times that are independent and near normal; tests/.../test_race.py checks it
on simulated step times. The best so far is taken as its point estimate, as the ladder's own
keep rule takes it.

A batch step is raced on two lines (`floor`, below `threshold`): it has won above the threshold
(the best by the batch gain), lost below the floor (the best itself: it is known to be slower,
so the batch search stops there), and "tied" when its interval lies inside the band the margin
draws either side of the best (floor - (threshold - floor) to threshold): it neither wins nor
loses by the margin, and the batch search walks on past it (ladder._batch_search). The same
coverage argument bounds all three: each verdict is wrong only when an interval misses the mean.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

RACE_ALPHA = 0.05  # the stated bound on a rung's false-stop rate, over all its looks
RACE_MIN_STEPS = 3  # the first look: two degrees of freedom (fewer give no usable interval)
RACED = ("won", "lost", "tied")  # the stop reasons a race gives (timing.stop_reason's others: its own rule)


def look_alpha(k: int, alpha: float = RACE_ALPHA) -> float:
    """The error spent at look k (1-based): alpha / (k (k + 1)), which sums to alpha over k >= 1."""
    if k < 1:
        raise ValueError("looks are counted from 1")
    return alpha / (k * (k + 1))


def _t_abs_cdf(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with integer df: the closed forms of Abramowitz & Stegun 26.7.3
    and 26.7.4 (finite sums, exact), so no statistics library is needed."""
    theta = math.atan(t / math.sqrt(df))
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if df % 2 == 0:
        term, total = 1.0, 1.0
        for j in range(1, df // 2):
            term *= c2 * (2 * j - 1) / (2 * j)
            total += term
        return s * total
    if df == 1:
        return 2 * theta / math.pi
    term = math.cos(theta)
    total = term
    for j in range(1, (df - 1) // 2):
        term *= c2 * (2 * j) / (2 * j + 1)
        total += term
    return 2 / math.pi * (theta + s * total)


def _cornish_fisher(z: float, df: int) -> float:
    """Student t's quantile from the normal one (A&S 26.7.5): within 1e-4 for df over 100."""
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


@lru_cache(maxsize=4096)
def t_critical(df: int, alpha: float) -> float:
    """The two-sided critical value: P(|T_df| > t) = alpha."""
    if df < 1:
        return math.inf
    z = statistics.NormalDist().inv_cdf(1 - alpha / 2)
    if df > 100:
        return _cornish_fisher(z, df)
    lo, hi = z, max(z, 1.0)
    while _t_abs_cdf(hi, df) < 1 - alpha:
        hi *= 2
    for _ in range(100):  # bisection to machine precision
        mid = (lo + hi) / 2
        if _t_abs_cdf(mid, df) < 1 - alpha:
            lo = mid
        else:
            hi = mid
    return hi


@dataclass(frozen=True)
class Race:
    """A rung raced against `threshold` samples/s: the best so far times (1 + the rung's gain)."""

    threshold: float
    samples_per_step: float
    alpha: float = RACE_ALPHA
    min_steps: int = RACE_MIN_STEPS
    floor: float | None = None  # lost below this (None: the threshold); set, a "tied" band too

    def interval(self, step_times: Sequence[float]) -> tuple[float, float] | None:
        """samples/s's interval at this look's level (the look is the number of steps past
        min_steps, plus one), or None before the first look."""
        n = len(step_times)
        if n < self.min_steps:
            return None
        k = n - self.min_steps + 1
        mean = math.fsum(step_times) / n  # not statistics.stdev: exact fractions, slow at a look per step
        sd = math.sqrt(math.fsum((x - mean) ** 2 for x in step_times) / (n - 1))
        half = t_critical(n - 1, look_alpha(k, self.alpha)) * sd / math.sqrt(n)
        low = self.samples_per_step / (mean + half)
        high = self.samples_per_step / (mean - half) if mean > half else math.inf
        return low, high

    def verdict(self, step_times: Sequence[float]) -> str | None:
        """"won", "lost", "tied" (with a floor), or None (not known yet)."""
        ci = self.interval(step_times)
        if ci is None:
            return None
        floor = self.threshold if self.floor is None else self.floor
        if ci[0] > self.threshold:
            return "won"
        if ci[1] < floor:
            return "lost"
        if floor < self.threshold and ci[0] > 2 * floor - self.threshold and ci[1] < self.threshold:
            return "tied"
        return None
