"""Step timing's maths, no torch: samples/s with its 95% CI from timed steps, the stopping rule, and
`Stopwatch`, which turns one rung's step boundaries into a `Timing` and says when to stop.

As Lightning's `Throughput` and `ThroughputMonitor`: the maths here are fed times and readings;
the Lightning callback that reads the clocks at each step boundary (StepTimer, run/callbacks.py)
adapts them. A step is measured from one on_train_batch_end to the next, so data loading, the
host-to-device copy and the optimizer step all count: that is what a training run pays for.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from .contention import ContentionMeter, GpuState, Reading
from .race import RACE_LOOK_S, Race
from .result import Contention, StepTimeStats
from .settle import MAX_WARMUP_FACTOR, settled_at

# Two-sided 95% Student t critical values by degrees of freedom; beyond 30 the normal 1.96 is close.
_T95 = {
    1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
    10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110,
    18: 2.101, 19: 2.093, 20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060,
    26: 2.056, 27: 2.052, 28: 2.048, 29: 2.045, 30: 2.042,
}

MIN_TIMED_STEPS = 5
MIN_CLEAN_STEPS = 2  # clean steps a figure is computed from (usable_steps): a spread, so a CI
# Seconds of counted steps before a rung may stop on its CI or a race's verdict (the time limit,
# when shorter, still ends it). The CI takes consecutive steps as independent draws; over a few
# milliseconds they are not: the scheduler's ticks, the clock governor and a neighbour's bursts
# move the machine's speed over tens to hundreds of milliseconds. On TinyGAN's ~4-5 ms steps a
# quiet machine met the +-3% CI after 5-10 steps, and one A-B leg of a 4 s budget stored
# 17,593 samples/s from 10 steps (40 ms), where the same probe's ladder read 10,482 for that
# configuration and other quiet runs' legs 10,565-13,178 (issue 33). A second of steps spans
# many such swings (a simulated machine whose speed swings 1.75x every 15-65 steps: every leg's
# figure within 10% of its long-run rate, where 5 steps read most of them 20% or more off:
# test_probe_timing). Steps of 0.2 s or more reach it with MIN_TIMED_STEPS anyway, so only short
# steps pay, and they pay under a second.
MIN_TIMED_SECONDS = 1.0
# A step the machine was contended for may run this many times its limit before the rung is given
# up as "contended": never cut as too slow to win on a step someone else slowed down.
CONTENDED_EXTENSION = 2


def t95(df: int) -> float:
    if df < 1:
        return math.inf
    return _T95.get(df, 1.96 + 2.4 / df)  # the tail is within 0.01 of the exact value


@dataclass(frozen=True)
class StepRate:
    """Samples/s measured over a rung's timed steps, with its 95% CI."""

    samples_per_sec: float
    ci_low: float
    ci_high: float
    rel_half_width: float  # CI half-width / samples_per_sec (inf with fewer than 2 steps)


def step_rate(step_times: Sequence[float], samples_per_step: int) -> StepRate:
    """Samples/s over timed steps with a 95% CI from the step-time mean (t distribution)."""
    n = len(step_times)
    if n == 0:
        raise ValueError("no timed steps")
    mean = statistics.fmean(step_times)
    sps = samples_per_step / mean
    if n < 2:
        return StepRate(sps, 0.0, math.inf, math.inf)
    half = t95(n - 1) * statistics.stdev(step_times) / math.sqrt(n)
    lo_t, hi_t = mean - half, mean + half
    ci_high = samples_per_step / lo_t if lo_t > 0 else math.inf
    return StepRate(sps, samples_per_step / hi_t, ci_high, half / mean)


def stop_reason(
    step_times: Sequence[float],
    elapsed_s: float,
    target_ci: float,
    max_seconds: float,
    min_steps: int = MIN_TIMED_STEPS,
    max_steps: int | None = None,
    steps_taken: int | None = None,
    race: Race | None = None,
    min_seconds: float = MIN_TIMED_SECONDS,
) -> str | None:
    """Why timing should stop now, or None to keep going.

    "converged": the 95% CI half-width of samples/s is within target_ci (a fraction) after at
    least min_steps steps that add up to `min_seconds` (or max_seconds, if less); "time-limit":
    max_seconds of timed steps have passed (at least two steps are kept so there is a spread);
    "max-steps": the step cap was reached. `step_times` are the steps that count (the clean
    ones); `steps_taken` all of them, when more. With a `race`, "won", "lost" or "tied": the
    rung's answer against the best so far is known (race.py), once the steps add up to the same
    seconds as for "converged" (MIN_TIMED_SECONDS says why).
    """
    n = len(step_times)
    taken = max(n, steps_taken or 0)
    if max_steps is not None and taken >= max_steps:
        return "max-steps"
    spanned = math.fsum(step_times) >= min(min_seconds, max_seconds)
    if spanned and race is not None and (verdict := race.verdict(step_times)) is not None:
        return verdict
    if spanned and n >= min_steps and step_rate(step_times, 1).rel_half_width <= target_ci:
        return "converged"
    if elapsed_s >= max_seconds and taken >= 2:
        return "time-limit"
    return None


def progress_line(label: str, steps: int, warmup_steps: int, step_times: Sequence[float], samples_per_step: int,
                  max_seconds: float, timed_s: float | None) -> str:
    """What the probe shows while a rung runs: `rung NAME: warm-up 2/3` or `rung NAME: step 40,
    412 samples/s ±4.1% so far, 3.2 s left` (left: until the rung's --max-seconds of timed steps)."""
    head = f"rung {label}: " if label else ""
    if not step_times:
        return f"{head}warm-up step {min(steps, warmup_steps)}/{warmup_steps}"
    rate = step_rate(step_times, samples_per_step)
    ci = f"±{rate.rel_half_width:.1%}" if math.isfinite(rate.rel_half_width) else "±?"
    left = "" if timed_s is None or not math.isfinite(max_seconds) else f", {max(max_seconds - timed_s, 0):.1f} s left"
    return f"{head}step {steps - warmup_steps}, {rate.samples_per_sec:,.1f} samples/s {ci} so far{left}"


def step_stats(step_times: Sequence[float], warmup_steps: int, warmup_seconds: float) -> StepTimeStats:
    s = sorted(step_times)
    q = statistics.quantiles(s, n=10, method="inclusive") if len(s) >= 2 else [s[0]] * 9
    return StepTimeStats(
        n_steps=len(s),
        mean_s=statistics.fmean(s),
        median_s=statistics.median(s),
        stdev_s=statistics.stdev(s) if len(s) >= 2 else 0.0,
        p10_s=q[0],
        p90_s=q[-1],
        warmup_steps=warmup_steps,
        warmup_seconds=warmup_seconds,
    )


@dataclass
class Timing:
    """What one rung measured, the same on every rank (rank 0's clock is broadcast)."""

    step_times: list[float] = field(default_factory=list)
    warmup_steps: int = 0
    warmup_seconds: float = 0.0
    first_step_seconds: float | None = None  # includes compilation when the model is compiled
    reason: str | None = None
    contended: list[bool] = field(default_factory=list)  # per timed step: the machine was contended
    contention: Contention | None = None


def clean_steps(timing: Timing) -> list[float]:
    """The timed steps nothing else slowed down (all of them where contention was not watched)."""
    if len(timing.contended) != len(timing.step_times):
        return list(timing.step_times)
    return [s for s, c in zip(timing.step_times, timing.contended) if not c]


def usable_steps(timing: Timing) -> list[float]:
    """What the throughput is computed from: the clean steps, when there are MIN_CLEAN_STEPS of
    them, else every step (and the rung is reported as contended). A figure is what the
    configuration does when nothing else slows it; a contended step tells how much the machine
    slowed it, not how fast it runs. Needing more clean steps than a spread needs made a cliff:
    under load one thread's rung with 2 clean steps of 358 reported 2,856 samples/s (every step),
    its confirmation leg with 9 of 261 reported 9,997 (the clean ones), the same configuration a
    minute apart (issue 33). Few clean steps give a wide CI, which says so (summarise's
    ci_target_met wants MIN_TIMED_STEPS of them); a race's verdict, reached on the clean steps,
    comes from the same steps as its figure."""
    clean = clean_steps(timing)
    return clean if len(clean) >= MIN_CLEAN_STEPS else list(timing.step_times)


class Stopwatch:
    """One rung's timing, fed the time (and, with a meter, a contention Reading) at the start and at
    the end of every step: the warm-up apart, the timed steps, which of them were contended, and
    whether the stopping rule says to stop."""

    def __init__(self, warmup_steps: int, target_ci: float, max_seconds: float, max_steps: int | None = None,
                 meter: ContentionMeter | None = None, race: Race | None = None, settle_from: int | None = None,
                 look_s: float | None = None):
        # settle_from: the warm-up ends where the step times settle (settle.py), never before this
        # many steps nor after MAX_WARMUP_FACTOR x warmup_steps, and the settled steps are the first
        # timed; None (or no warm-up asked): after warmup_steps steps.
        self._settling = settle_from is not None and warmup_steps > 0
        self.settle_from = settle_from or 0
        self.warmup_steps = max(warmup_steps * MAX_WARMUP_FACTOR, self.settle_from) if self._settling else warmup_steps
        self._marks: list[tuple[float, Reading | None]] = []  # the step boundaries while settling
        self.race = race  # None: timed to the CI target or the time limit, whatever the best so far
        # a step this long ends the warm-up at the first step alone (settle.settled_at's long_s)
        self.look_s = look_s if look_s is not None else RACE_LOOK_S if race is not None else None
        self.target_ci = target_ci
        self.max_seconds = max_seconds
        self.max_steps = max_steps
        self.meter = meter  # None: contention is not watched, every step counts
        self.timing = Timing()
        self.steps = 0  # steps ended, warm-up included
        self.reading: Reading | None = None  # the latest reading, at the last step boundary
        self._start: float | None = None
        self._last: float | None = None
        self._timed_start: float | None = None
        self._pending = 0  # timed steps not yet judged for contention (no reading since)

    def start(self, now: float, reading: Reading | None = None) -> None:
        self._start, self.reading = now, reading
        self._marks = [(now, reading)]

    def step(self, now: float, reading: Reading | None = None) -> None:
        """A step ended at `now`. With a meter, a step given no reading is judged with the steps
        up to the next reading, as one window (a training run reads the machine every few steps)."""
        self.steps += 1
        t = self.timing
        if self.steps == 1:
            t.first_step_seconds = now - self._start
        if self._settling:
            self._settle(now, reading)
            return
        if self.steps <= self.warmup_steps:
            t.warmup_steps = self.steps
            t.warmup_seconds = now - self._start
        else:
            last = self._last if self._last is not None else self._start  # no warm-up: timed from the start
            t.step_times.append(now - last)
            self._pending += 1
            if self._timed_start is None:
                self._timed_start = last
        self._last = now
        self._judge(reading)

    def _settle(self, now: float, reading: Reading | None) -> None:
        """A warm-up step ended: the warm-up is over once the step times have settled (or at the
        cap); the steps after the change-point become the first timed ones, each judged for
        contention as a timed step is (or, without a reading for each, left in the warm-up)."""
        t, marks = self.timing, self._marks
        marks.append((now, reading))
        durations = [b[0] - a[0] for a, b in pairwise(marks)]
        at = settled_at(durations, first=self.settle_from, long_s=self.look_s)
        self._last, self.reading = now, reading
        if at is None and self.steps < self.warmup_steps:
            t.warmup_steps, t.warmup_seconds = self.steps, now - self._start
            return
        if at is None or (self.meter is not None and any(m[1] is None for m in marks[at:])):
            at = len(durations)
        self._settling = False
        self.warmup_steps = t.warmup_steps = at
        t.warmup_seconds = marks[at][0] - self._start
        t.step_times.extend(durations[at:])
        if at < len(durations):
            self._timed_start = marks[at][0]
            if self.meter is not None:
                t.contended.extend(self.meter.add(a[1], b[1]).contended for a, b in pairwise(marks[at:]))

    def _judge(self, reading: Reading | None) -> None:
        if self.meter is None or reading is None:
            return
        if self._pending and self.reading is not None:
            self.timing.contended.extend([self.meter.add(self.reading, reading, self._pending).contended] * self._pending)
        self._pending = 0
        self.reading = reading

    def timed_seconds(self, now: float) -> float | None:
        """Seconds of timed steps so far (None in warm-up): what --max-seconds bounds."""
        return None if self._timed_start is None else now - self._timed_start

    def pause(self, reading: Reading | None = None) -> None:
        """Something that is not a training step starts (a validation pass): the steps so far are
        judged up to here."""
        self._judge(reading)

    def resume(self, now: float, reading: Reading | None = None) -> None:
        """Training steps go on from `now`: the pause is no step's time and no step's load."""
        if self._last is not None or self._start is not None:
            self._last = now
        if self._pending:  # not judged at the pause: they cannot be now (the window holds the pause)
            del self.timing.contended[:]  # misaligned from here on: clean_steps takes every step
            self.meter = None
        if self.meter is not None and reading is not None:
            self.reading = reading

    def stop_reason(self, now: float) -> str | None:
        """Why timing should stop at `now` (see stop_reason), or None: judged on the clean steps."""
        t = self.timing
        if not t.step_times:
            return None
        return stop_reason(clean_steps(t), now - self._timed_start, self.target_ci, self.max_seconds,
                           max_steps=self.max_steps, steps_taken=len(t.step_times), race=self.race)

    def finish(self, load_average: float | None = None, own_load: float | None = None,
               gpu: Iterable[GpuState] = ()) -> None:
        """The rung's contention record, from its steps and the last look at the machine."""
        if self.meter is not None:
            self.timing.contention = self.meter.record(load_average, own_load, gpu)
