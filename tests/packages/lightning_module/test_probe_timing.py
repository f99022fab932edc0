"""The stopping rule, the throughput CI and the Stopwatch on synthetic step times (no torch)."""

from __future__ import annotations

import random

import pytest

from lightning_module.contract.contention import ContentionMeter, Reading
from lightning_module.contract.race import Race
from lightning_module.contract.timing import MIN_TIMED_SECONDS, Stopwatch, step_rate, step_stats, stop_reason, t95


def run(series, target_ci=0.03, max_seconds=60.0, max_steps=None):
    """Feed steps one at a time, as the callback does; return (reason, steps used)."""
    elapsed = 0.0
    for n in range(1, len(series) + 1):
        elapsed += series[n - 1]
        reason = stop_reason(series[:n], elapsed, target_ci, max_seconds, max_steps=max_steps)
        if reason:
            return reason, n
    return None, len(series)


def test_steady_steps_converge_after_the_minimum():
    rng = random.Random(1)
    series = [0.3 * (1 + rng.uniform(-0.01, 0.01)) for _ in range(200)]
    assert run(series) == ("converged", 5)
    # Short steps: not before they add up to MIN_TIMED_SECONDS (10 or 11 steps of ~0.1 s).
    reason, n = run([x / 3 for x in series])
    assert reason == "converged" and n in (10, 11) and sum(series[:n]) / 3 >= MIN_TIMED_SECONDS


def drifting(rng: random.Random, n: int = 2000) -> list[float]:
    """~5 ms steps on a machine whose speed moves every 50 ms: 14 steps of 3.6 ms, then 8 of 6.3 ms
    (1% noise within each), over and over; the long-run mean step is 4.8 ms."""
    out: list[float] = []
    while len(out) < n:
        out += [0.0036 * (1 + rng.gauss(0, 0.01)) for _ in range(14)]
        out += [0.0063 * (1 + rng.gauss(0, 0.01)) for _ in range(8)]
    return out[:n]


def test_short_steps_are_not_a_figure_before_they_span_the_machine_s_own_swings():
    """Issue 33: a quiet probe's 4 s A-B leg of TinyGAN stored 17,593 samples/s from 10 steps of
    ~4 ms: its CI met +-3% in 40 ms, where its ladder read 10,482 for that configuration and
    other quiet runs' legs 10,565-13,178. The rule converged on the first 5 fast steps here (33% high);
    now it waits for a second of steps and stores the long-run rate."""
    rng = random.Random(4)
    series = drifting(rng)
    long_run = 64 / (sum(series) / len(series))
    reason, n = run(series, max_seconds=4.0)
    assert reason == "converged" and sum(series[:n]) >= MIN_TIMED_SECONDS
    assert n >= 200  # not 5
    assert step_rate(series[:n], 64).samples_per_sec / long_run == pytest.approx(1.0, abs=0.02)
    # The first 5 steps' figure, where the old rule stopped, is the fast spell's (+33%).
    assert step_rate(series[:5], 64).samples_per_sec / long_run > 1.25


def test_every_leg_on_a_swinging_machine_stores_its_long_run_rate():
    """Not just the median: 200 legs of a 4 s budget, each starting at a random point of the machine's
    swings, with spells of random length (10-40 steps fast, 5-25 slow). Every stored figure is within
    10% of the series' long-run rate (a second holds a handful of spells, not their average: the CI
    takes the steps as independent, so it claims +-3% where the worst leg is 6.1% off on this seed);
    stopped on the CI after 5 steps (the old rule), most read 20% or more off it (88%)."""
    rng = random.Random(6)
    off: list[float] = []
    first5: list[float] = []
    for _ in range(200):
        series: list[float] = []
        while len(series) < 1200:
            series += [0.0036 * (1 + rng.gauss(0, 0.01)) for _ in range(rng.randint(10, 40))]
            series += [0.0063 * (1 + rng.gauss(0, 0.01)) for _ in range(rng.randint(5, 25))]
        series = series[rng.randrange(60):]
        long_run = step_rate(series, 64).samples_per_sec
        reason, n = run(series, max_seconds=4.0)
        assert reason in ("converged", "time-limit")
        off.append(abs(step_rate(series[:n], 64).samples_per_sec / long_run - 1))
        first5.append(abs(step_rate(series[:5], 64).samples_per_sec / long_run - 1))
    assert max(off) < 0.10
    assert sum(x >= 0.20 for x in first5) / len(first5) >= 0.5


def test_a_race_waits_as_long_before_its_verdict():
    """The same machine raced against its own long-run rate: a race looking after 3 steps called
    the fast spell a win; waiting for a second of steps, no verdict claims a difference that is
    not there, over many runs."""
    rng = random.Random(5)
    wrong = 0
    for _ in range(50):
        series = drifting(rng, 400)
        race = Race(threshold=64 / 0.0048, samples_per_step=64)
        for n in range(1, len(series) + 1):
            if (why := stop_reason(series[:n], sum(series[:n]), 0.0, 4.0, race=race)) is not None:
                wrong += why in ("won", "lost")
                break
    assert wrong == 0
    assert race.verdict(drifting(random.Random(5), 3)) == "won"  # what a look at 3 steps says


def test_moderate_noise_needs_more_steps_but_converges():
    rng = random.Random(2)
    series = [max(0.01, rng.gauss(0.1, 0.01)) for _ in range(500)]
    reason, n = run(series)
    assert reason == "converged" and 10 < n < 100
    tp = step_rate(series[:n], 32)
    assert tp.rel_half_width <= 0.03
    assert tp.samples_per_sec == pytest.approx(320, rel=0.06)  # the true rate, 32 samples / 0.1 s


def test_very_noisy_steps_stop_at_the_time_limit():
    rng = random.Random(3)
    series = [rng.choice([0.05, 1.0]) for _ in range(400)]
    reason, n = run(series, max_seconds=20.0)
    assert reason == "time-limit"
    assert 20.0 <= sum(series[:n]) < 21.5
    assert step_rate(series[:n], 1).rel_half_width > 0.03


def test_time_limit_keeps_at_least_two_steps():
    assert stop_reason([30.0], 30.0, 0.03, 10.0) is None
    assert stop_reason([30.0, 30.5], 60.5, 0.03, 10.0) == "time-limit"  # two steps are enough
    assert stop_reason([30.0, 40.0], 70.0, 0.03, 10.0) == "time-limit"


def test_step_cap():
    assert run([0.1, 0.5] * 50, max_steps=7) == ("max-steps", 7)


def test_step_rate_and_ci_bounds():
    tp = step_rate([0.5, 0.5, 0.5, 0.5], 64)
    assert tp.samples_per_sec == pytest.approx(128.0)
    assert tp.ci_low == pytest.approx(128.0) and tp.ci_high == pytest.approx(128.0)
    tp = step_rate([0.4, 0.6], 64)
    assert tp.ci_low < 128 < tp.ci_high
    assert step_rate([0.5], 64).rel_half_width == float("inf")
    with pytest.raises(ValueError):
        step_rate([], 1)


def test_t_critical_values():
    assert t95(1) == pytest.approx(12.706)
    assert t95(30) == pytest.approx(2.042)
    assert t95(60) == pytest.approx(2.000, abs=0.01)
    assert t95(10_000) == pytest.approx(1.96, abs=0.001)


def test_step_stats():
    s = step_stats([0.1, 0.2, 0.3, 0.4, 0.5], warmup_steps=3, warmup_seconds=9.0)
    assert s.n_steps == 5 and s.median_s == pytest.approx(0.3) and s.p10_s < s.p90_s
    assert s.warmup_seconds == 9.0


def test_the_stopwatch_keeps_warm_up_apart_and_stops_on_the_rule():
    w = Stopwatch(warmup_steps=2, target_ci=0.03, max_seconds=60.0, max_steps=4)
    w.start(10.0)
    for now in (13.0, 14.0):  # compilation, then an ordinary warm-up step
        w.step(now)
        assert w.stop_reason(now) is None
    for now in (14.5, 15.0, 15.5):
        w.step(now)
    t = w.timing
    assert (t.first_step_seconds, t.warmup_steps, t.warmup_seconds) == (3.0, 2, 4.0)
    assert t.step_times == [0.5, 0.5, 0.5] and t.contended == [] and w.steps == 5
    assert w.stop_reason(15.5) is None  # three timed steps: under the CI rule's five, the cap's four
    w.step(16.0)
    assert w.stop_reason(16.0) == "max-steps"


def test_the_stopwatch_leaves_contended_steps_out_of_the_rule():
    def reading(wall, wait):
        return Reading(wall, wall, run=wall, wait=wait)

    w = Stopwatch(warmup_steps=1, target_ci=0.03, max_seconds=60.0, meter=ContentionMeter(1, 2))
    w.start(-1.0)
    w.step(0.0, reading(0.0, 0.0))  # the warm-up step
    wait = 0.0
    for i in range(1, 11):
        wait += 0.5 if i % 2 else 0.0  # every other step queued for a CPU half its time
        w.step(float(i), reading(float(i), wait))
    assert w.timing.contended == [True, False] * 5
    assert w.stop_reason(10.0) == "converged"  # the five clean steps, all 1 s
    w.finish(load_average=1.0, own_load=1)
    assert w.timing.contention.contended_steps == 5 and w.timing.contention.contended


def _idle(t: float) -> Reading:
    return Reading(t, t, run=t, wait=0.0)  # one core busy with this process: not contended


def _busy(t0: float, t: float) -> Reading:
    return Reading(t, t0 + (t - t0) * 0.1, run=t0, wait=t - t0)  # waited for a CPU all along


def test_steps_read_in_windows_are_judged_one_verdict_per_step():
    # A training run looks at the machine every few steps: each window's verdict covers its steps.
    clock = Stopwatch(warmup_steps=1, target_ci=0.03, max_seconds=1e9, meter=ContentionMeter(1, 1))
    clock.start(0.0, _idle(0.0))
    clock.step(1.0, _idle(1.0))  # warm-up
    for t in (2.0, 3.0):
        clock.step(t)  # no reading
    clock.step(4.0, _idle(4.0))
    for t in (5.0, 6.0):
        clock.step(t)
    clock.step(7.0, _busy(4.0, 7.0))
    assert clock.timing.step_times == [1.0] * 6
    assert clock.timing.contended == [False] * 3 + [True] * 3
    assert clock.meter.record().steps == 6 and clock.meter.record().contended_steps == 3


def test_a_pause_is_no_step_s_time_and_no_step_s_load():
    clock = Stopwatch(warmup_steps=0, target_ci=0.03, max_seconds=1e9, meter=ContentionMeter(1, 1))
    clock.start(0.0, _idle(0.0))
    clock.step(1.0)
    clock.pause(_idle(1.0))  # validation starts: the step so far judged
    clock.resume(31.0, _idle(31.0))  # 30 s of validation later
    clock.step(32.0, _idle(32.0))
    assert clock.timing.step_times == [1.0, 1.0] and clock.timing.contended == [False, False]


def test_a_pause_without_a_reading_gives_up_the_verdicts_not_the_times():
    clock = Stopwatch(warmup_steps=0, target_ci=0.03, max_seconds=1e9, meter=ContentionMeter(1, 1))
    clock.start(0.0, _idle(0.0))
    clock.step(1.0)
    clock.resume(5.0)
    clock.step(6.0, _idle(6.0))
    assert clock.timing.step_times == [1.0, 1.0] and clock.timing.contended == [] and clock.meter is None
