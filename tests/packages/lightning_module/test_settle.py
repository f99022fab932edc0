"""The warm-up ends where the step times settle: a change-point on simulated step series
(lightning_module/contract/settle.py) and the Stopwatch that uses it (contract/timing.py)."""

from __future__ import annotations

import math
import random
import statistics

from lightning_module.contract.settle import MAX_WARMUP_FACTOR, last_change, settled_at
from lightning_module.contract.timing import Stopwatch

N = 60


def series(rng, cv=0.05, amp=0.0, tau=2.0, first=5.0):
    """Step times around 1 s, lognormal noise `cv`, a warm-up decaying as amp x exp(-i / tau), and
    a first step `first` times longer (set-up)."""
    out = [(1 + amp * math.exp(-i / tau)) * math.exp(rng.gauss(0, cv)) for i in range(N)]
    out[0] *= first
    return out


def settle_index(s):
    """Where the warm-up ends as the steps come in one at a time (None: never within the series)."""
    for n in range(1, len(s) + 1):
        if (at := settled_at(s[:n])) is not None:
            return at, n
    return None, len(s)


def test_a_steady_series_settles_after_its_first_step_nearly_always():
    rng = random.Random(11)
    got = [settle_index(series(rng))[0] for _ in range(1000)]
    # The first step (set-up) is always warm-up; a false change-point in the noise keeps a few more
    # steps in it: 17% of steady series on this seed, 1.33 steps on average (a fixed count spends 3).
    assert sum(a == 1 for a in got) / len(got) >= 0.75
    assert statistics.fmean(got) <= 1.5
    # It never settles before SETTLE_STEPS steps agree after the change-point.
    assert settled_at([5.0, 1.0, 1.0]) is None and settled_at([5.0, 1.0, 1.0, 1.0]) == 1


def test_a_decaying_series_settles_once_the_decay_has_died_out():
    rng = random.Random(12)
    idx, bias_settled, bias_fixed = [], [], []
    for _ in range(500):
        s = series(rng, cv=0.02, amp=1.0, tau=2.0)  # +100% at first, e-folding in 2 steps
        at, _ = settle_index(s)
        assert at is not None
        idx.append(at)
        bias_settled.append(statistics.fmean(s[at:at + 10]) - 1)
        bias_fixed.append(statistics.fmean(s[3:13]) - 1)  # the fixed 3-step warm-up it replaces
    assert 5 <= statistics.median(idx) <= 9  # the decay is under 8% from step 5 on, under 2% from step 8
    assert statistics.median(bias_settled) < 0.015 and statistics.median(bias_fixed) > 0.04


def test_the_last_change_point_is_where_the_last_regime_starts():
    assert last_change([3.0, 3.0, 3.0, 3.0, 1.0, 1.0, 1.0, 1.0, 1.0]) == 4
    assert last_change([9.0, 3.0, 3.0, 3.0, 1.0, 1.0, 1.0, 1.0]) == 4  # two changes: the later one
    assert last_change([1.0] * 8) == 0


def feed(clock, durations):
    now = 0.0
    clock.start(now)
    for d in durations:
        now += d
        clock.step(now)
    return clock.timing


def test_the_stopwatch_times_from_where_the_steps_settled():
    t = feed(Stopwatch(3, 0.0, math.inf, settle_from=1), [5.0, 2.0, 2.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    assert (t.warmup_steps, t.warmup_seconds) == (4, 11.0)
    assert t.step_times == [1.0] * 5  # the settled steps are the first timed ones
    # Steps that never settle (a steady climb): the warm-up stops at its cap, and timing starts after it.
    climbing = [1.0 + 0.5 * i for i in range(20)]
    t = feed(Stopwatch(3, 0.0, math.inf, settle_from=1), climbing)
    assert t.warmup_steps == 3 * MAX_WARMUP_FACTOR and len(t.step_times) == 20 - 3 * MAX_WARMUP_FACTOR
    # Without settle_from, or without warm-up: the fixed count, as before.
    assert feed(Stopwatch(3, 0.0, math.inf), [5.0, 1.0, 1.0, 1.0, 1.0]).step_times == [1.0, 1.0]
    assert len(feed(Stopwatch(0, 0.0, math.inf, settle_from=1), [5.0, 1.0]).step_times) == 2
