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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

RACE_ALPHA = 0.05  # the stated bound on a rung's false-stop rate, over all its looks
RACE_MIN_STEPS = 3  # the first look: two degrees of freedom (fewer give no usable interval)
# With the step noise known from the rungs before (a prior: Race.prior), the first look comes as
# soon as the rung has timed this many seconds, at one step at the least: a 10 s CPU step is
# judged after one step, not three (issue 32: ResNet-50 on a 2-core AVX2 EPYC, 8-10 s a step,
# spent 30-60 s a rung before its first look); steps shorter than a third of it still look first
# at RACE_MIN_STEPS, where the steps cost nothing much and the rung's own spread is worth having.
RACE_LOOK_S = 3.0
# The prior is taken wide: its variance times PRIOR_INFLATION, its degrees of freedom at most
# PRIOR_DF. A rung's step noise need not be the rungs' before (the quiet run's rungs read 3-10% a
# step): taken as it is, a rung twice as noisy as the prior at the threshold was stopped wrongly
# 27% of the time; taken wide, 3.8% (and 0.1% at the prior's own noise), for one step more on a
# rung 28% faster than the best (simulated: tests/packages/lightning_module/test_race_budget.py).
PRIOR_INFLATION = 2.5
PRIOR_DF = 4
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
    # (variance of log step time, degrees of freedom) pooled over the probe's rungs before this one
    # (pooled_log_variance); None: the rung's own steps alone, first looked at after min_steps.
    prior: tuple[float, int] | None = None

    def first_look(self, step_times: Sequence[float]) -> int:
        """The steps the first look waits for: min_steps, or with a prior, fewer for long steps
        (RACE_LOOK_S of them, at least one), fixed by the first step's length."""
        if self.prior is None or not step_times:
            return self.min_steps
        return max(1, min(self.min_steps, math.ceil(RACE_LOOK_S / max(step_times[0], 1e-9))))

    def interval(self, step_times: Sequence[float]) -> tuple[float, float] | None:
        """samples/s's interval at this look's level (the look is the number of steps past the
        first look's, plus one), or None before the first look."""
        n = len(step_times)
        first = self.first_look(step_times)
        if n < first:
            return None
        k = n - first + 1
        if self.prior is not None:
            return self._pooled_interval(step_times, k)
        mean = math.fsum(step_times) / n  # not statistics.stdev: exact fractions, slow at a look per step
        sd = math.sqrt(math.fsum((x - mean) ** 2 for x in step_times) / (n - 1))
        half = t_critical(n - 1, look_alpha(k, self.alpha)) * sd / math.sqrt(n)
        low = self.samples_per_step / (mean + half)
        high = self.samples_per_step / (mean - half) if mean > half else math.inf
        return low, high

    def _pooled_interval(self, step_times: Sequence[float], k: int) -> tuple[float, float]:
        """On log step times, the variance pooled with the (widened) prior's: a t interval with
        the prior's degrees of freedom and the rung's own (its steps weigh in as they come, so a
        rung noisier than the ones before widens its own interval once it has a few). Where the
        rung's noise is the prior's, the pooled variance over sigma^2 is chi-squared with the
        pooled df, independent of the rung's mean, so each look's interval is an exact t interval
        and the error-spending argument above holds as it does without a prior."""
        logs = [math.log(max(x, 1e-12)) for x in step_times]
        n = len(logs)
        mean = math.fsum(logs) / n
        var0, df0 = self.prior[0] * PRIOR_INFLATION, min(int(self.prior[1]), PRIOR_DF)
        df = df0 + n - 1
        var = (df0 * var0 + math.fsum((x - mean) ** 2 for x in logs)) / df
        half = t_critical(df, look_alpha(k, self.alpha)) * math.sqrt(var / n)
        return self.samples_per_step / math.exp(mean + half), self.samples_per_step / math.exp(mean - half)

    def verdict(self, step_times: Sequence[float]) -> str | None:
        """"won", "lost", "tied" (with a floor), or None (not known yet)."""
        ci = self.interval(step_times)
        return None if ci is None else judge(ci[0], ci[1], self.threshold, self.floor)


def judge(low: float, high: float, threshold: float, floor: float | None = None) -> str | None:
    """An interval of samples/s against a rung's lines (ladder.race_lines): "won" (its low end above
    the threshold), "lost" (its high end below the floor, or the threshold without one), "tied" (a
    batch step inside the band the margin draws either side of the best), else None."""
    floor = threshold if floor is None else floor
    if low > threshold:
        return "won"
    if high < floor:
        return "lost"
    if floor < threshold and low > 2 * floor - threshold and high < threshold:
        return "tied"
    return None


def known_slower_after(samples_per_step: float, threshold: float) -> float:
    """The step time past which one step of `samples_per_step` samples is known slower than
    `threshold` samples/s. The one-step check of a rung known to lose (run/probe.py's one_step)
    skips the rung when its step is slower than the best so far, so the step is cut there: the
    same answer as the whole step's (an emulated bf16 ResNet-50 step ran 32 s on a 2-core AVX2 EPYC, issue 32),
    for at most the best's own step time."""
    return samples_per_step / threshold


def pooled_log_variance(series: Iterable[Sequence[float]]) -> tuple[float, int] | None:
    """(variance, degrees of freedom) of log step time pooled over several rungs' timed steps
    (each about its own mean): the step noise of this workload on this machine, which the next
    rung's race takes as its prior (Race.prior). The log makes it relative, so rungs of different
    step lengths pool. None: no rung with two steps."""
    ss, df = 0.0, 0
    for steps in series:
        logs = [math.log(x) for x in steps if x > 0]
        if len(logs) >= 2:
            m = math.fsum(logs) / len(logs)
            ss += math.fsum((x - m) ** 2 for x in logs)
            df += len(logs) - 1
    return (ss / df, df) if df else None
