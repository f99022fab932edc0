"""Whether a probe's numbers can be believed: pure maths on step-time series, no torch.

- `summarise` turns a rung's timed steps into a RungMeasurement, from the steps nothing else slowed
  down when there are enough of them.
- `measure_until_known` re-measures a configuration whose CI is still wider than the target when
  its time ran out, pooling the steps (a bounded number of times).
- `confirm` measures the ladder's pick and the baseline again in alternation (A B A B ...) and
  gives the speed-up as a ratio with its 95% CI: the speed-up is confirmed ("held") when the CI
  lies above 1 (with step times at hand: it won every round by more than its steps' noise); the
  pick is dropped for the baseline only when the confirmation reads it no faster
  (`confirm_outcome`), and kept, its speed-up unconfirmed, when the answer is inside the noise.
- `reasons` says why a finished result is not reliable.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from . import contention
from .ladder import CI_UNBOUNDED, RungMeasurement
from .options import CONFIRM_ROUNDS, REMEASURE_ROUNDS
from .race import RACED, judge, look_alpha, t_critical
from .result import Confirmation, ProbeConfig
from .timing import MIN_TIMED_STEPS, Timing, step_rate, t95, usable_steps


def summarise(timing: Timing, samples_per_step: float, target_ci: float, **extra) -> RungMeasurement:
    """A RungMeasurement from a rung's timing: throughput and CI over the usable steps."""
    steps = usable_steps(timing)
    if not steps:
        raise RuntimeError("no steps were timed (the data ran out during warm-up?)")
    tp = step_rate(steps, samples_per_step)
    return RungMeasurement(  # an unbounded CI (inf) is capped by RungMeasurement itself
        samples_per_sec=tp.samples_per_sec, ci_low=tp.ci_low, ci_high=tp.ci_high,
        steps_timed=len(timing.step_times), extra=timing, contention=timing.contention,
        # As the stopping rule: a CI from fewer than MIN_TIMED_STEPS steps is not known to be narrow.
        ci_target_met=tp.rel_half_width <= target_ci and len(steps) >= MIN_TIMED_STEPS,
        samples_per_step=samples_per_step, stop_reason=timing.reason, **extra,
    )


def pooled(a: RungMeasurement, b: RungMeasurement, samples_per_step: int, target_ci: float) -> RungMeasurement:
    """Two measurements of one configuration as one: their timed steps together."""
    ta, tb = a.extra, b.extra
    aligned = len(ta.contended) == len(ta.step_times) and len(tb.contended) == len(tb.step_times)
    timing = Timing(
        step_times=ta.step_times + tb.step_times, warmup_steps=ta.warmup_steps,
        warmup_seconds=ta.warmup_seconds, first_step_seconds=ta.first_step_seconds, reason=tb.reason,
        contended=ta.contended + tb.contended if aligned else [],
        contention=contention.merge([ta.contention, tb.contention]),
    )
    peaks = [p for p in (a.peak_memory_gib, b.peak_memory_gib) if p is not None]
    per_step = a.samples_per_step or samples_per_step  # counted from the batches where it was
    return summarise(timing, per_step, target_ci, compile_seconds=a.compile_seconds,
                     peak_memory_gib=max(peaks) if peaks else None, remeasured=a.remeasured + 1,
                     model_facts=a.model_facts, runtime_overhead=a.runtime_overhead,
                     rank_peaks=([max(x, y) for x, y in zip(a.rank_peaks, b.rank_peaks)]
                                 if a.rank_peaks and b.rank_peaks else a.rank_peaks or b.rank_peaks))


def measure_until_known(measure_once: Callable[[], RungMeasurement], samples_per_step: int, target_ci: float,
                        rounds: int = REMEASURE_ROUNDS,
                        matters: Callable[[RungMeasurement], bool] = lambda m: True,
                        first: RungMeasurement | None = None) -> RungMeasurement:
    """Measure; while the CI is wider than the target and the answer `matters` (the rung could
    still change the ladder's decision), measure again (at most `rounds` more times) and pool the
    steps. A measurement without a timing to pool is returned as it is, and so is one a race
    stopped: its answer against the best so far is known (race.py), however wide its CI. `first`:
    a measurement already taken, to go on from."""
    m = first if first is not None else measure_once()
    while (m.ci_target_met is False and m.remeasured < rounds and isinstance(m.extra, Timing) and matters(m)
           and m.stop_reason not in RACED):
        m = pooled(m, measure_once(), samples_per_step, target_ci)
    return m


def decided(m: RungMeasurement, threshold: float, floor: float | None = None) -> str | None:
    """The answer a rung's 95% CI already gives against its lines (race.judge, as a race judges its
    looks). A raced rung so decided is not re-measured because its CI is wider than the +-3% target
    (issue 32: at 8-10 s a step, a re-measurement is another 40-60 s); the A-B confirmation still
    measures the pick against the baseline."""
    return judge(m.ci_low, m.ci_high, threshold, floor)


# ---------------------------------------------------------------------------------------------
# Confirmation: the pick against the baseline, in alternation


@dataclass
class Speedup:
    ratio: float
    ci_low: float
    ci_high: float

    @property
    def held(self) -> bool:
        return self.ci_low > 1.0


def _rel_sd(m: RungMeasurement) -> float:
    """The relative standard error of one leg's samples/s, from its own CI (normal approximation)."""
    if m.samples_per_sec <= 0 or m.ci_high >= CI_UNBOUNDED:
        return math.inf
    return (m.ci_high - m.ci_low) / 2 / m.samples_per_sec / 1.96


def speedup(base: list[RungMeasurement], tuned: list[RungMeasurement], alpha: float = 0.05) -> Speedup:
    """tuned / baseline from paired rounds, with a 95% CI.

    Each round's log-ratio log(tuned_i / base_i) is one observation: pairs measured back to back
    share the machine's conditions, so drift between rounds cancels within a pair. The ratio is
    their geometric mean. When the legs' timed steps are at hand, each round gets its own CI from
    the step-to-step noise (pooled over every leg, so a short leg borrows the others' degrees of
    freedom) and the result's CI spans them all: the pick holds only if it won in every round, by
    more than its steps' noise. That needs no estimate of the drift between rounds, which two or
    three rounds cannot give (a t interval over two rounds multiplies their spread by 12.7, and
    threw away a pick that beat the baseline by 1.4x and 1.8x in its two rounds). `alpha`: the
    CI's error (a raced confirmation's looks spend less than 5% each: confirm).
    """
    crit = (lambda df: t95(df)) if alpha == 0.05 else (lambda df: t_critical(df, alpha))
    k = min(len(base), len(tuned))
    if k == 0:
        raise ValueError("no rounds to compare")
    d = [math.log(tuned[i].samples_per_sec / base[i].samples_per_sec) for i in range(k)]
    mean = statistics.fmean(d)
    per_round = _round_halves(base[:k], tuned[:k], crit)
    if per_round is not None:
        return Speedup(math.exp(mean), math.exp(min(x - h for x, h in zip(d, per_round))),
                       math.exp(max(x + h for x, h in zip(d, per_round))))
    # No step times: the rounds' spread (t interval), never narrower than the legs' own CIs allow.
    between = crit(k - 1) * statistics.stdev(d) / math.sqrt(k) if k >= 2 else math.inf
    z = statistics.NormalDist().inv_cdf(1 - alpha / 2)
    within = z * math.sqrt(sum(_rel_sd(base[i]) ** 2 + _rel_sd(tuned[i]) ** 2 for i in range(k))) / k
    if k == 1:
        half = within  # one pair: only its legs' own noise to go by (unbounded if a leg's CI is)
    elif math.isfinite(within):
        half = max(between, within)
    else:
        half = between  # a leg too short for a CI of its own: the pairs' spread carries its noise
    if not math.isfinite(half):
        return Speedup(math.exp(mean), 0.0, CI_UNBOUNDED)
    return Speedup(math.exp(mean), math.exp(mean - half), math.exp(mean + half))


def _round_halves(base: list[RungMeasurement], tuned: list[RungMeasurement], crit=t95) -> list[float] | None:
    """Each round's 95% half-width on log(tuned / base) from the legs' step times: the variance of
    log step time pooled over every leg (a configuration's batch is fixed within a leg, so this is
    the variance of log samples/s per step). None when a leg has no step times or no leg has two."""
    legs = [m.extra for m in (*base, *tuned)]
    if not all(isinstance(t, Timing) for t in legs):
        return None
    logs = [[math.log(x) for x in usable_steps(t) if x > 0] for t in legs]
    if not all(logs):
        return None
    df = sum(len(x) - 1 for x in logs)
    if df < 1:
        return None
    var = sum(sum((v - statistics.fmean(x)) ** 2 for v in x) for x in logs) / df
    k = len(base)
    return [crit(df) * math.sqrt(var * (1 / len(logs[i]) + 1 / len(logs[k + i]))) for i in range(k)]


def confirm_outcome(s: Speedup, margin: float = 0.0) -> str:
    """What the probe keeps after a confirmation: "held" (the pick; its CI lies above 1), "lost"
    (the baseline: the fresh draws read the pick no faster, ratio <= 1, its CI's top end included)
    or "unconfirmed" (the pick, with its own band: it read faster but inside the noise). Reverting
    on an unclear answer threw away a pick that read +10% in its one raced round (issue 32); the
    ladder kept it beyond its own noise, and the confirmation did not say otherwise. A pick that
    reads no faster is dropped: the ladder's figure for it was the luckiest of several draws.
    `margin`: the gain the pick must show over the baseline, where the ladder asked one of it (a
    thread count alone: threads.THREADS_GAIN): 1 + margin stands for 1 above."""
    if s.ci_low > 1.0 + margin:
        return "held"
    return "lost" if s.ratio <= 1.0 + margin else "unconfirmed"


@dataclass
class Confirmed:
    record: Confirmation
    base: RungMeasurement  # every baseline leg pooled
    tuned: RungMeasurement  # every tuned leg pooled
    legs: list[tuple[str, RungMeasurement]] = field(default_factory=list)


# Two timings of one configuration minutes apart, each within its +-TARGET_CI (3%), agree to a few
# per cent on an unchanged machine; a baseline that reads more than this factor apart between the
# ladder and the confirmation means the machine changed under the ladder: its ratios are not
# speed-ups (seen: 922/s in the ladder, ~14,000/s confirming, "15.37x").
BASELINE_MOVED = 1.25


def baseline_moved(shift: float | None) -> bool:
    return shift is not None and not 1 / BASELINE_MOVED <= shift <= BASELINE_MOVED


def confirm(measure: Callable[[str, ProbeConfig], RungMeasurement], base_cfg: ProbeConfig, tuned_cfg: ProbeConfig,
            samples_per_step: Callable[[ProbeConfig], int], target_ci: float,
            rounds: int = CONFIRM_ROUNDS, ladder_baseline: float | None = None, race: bool = False,
            margin: float = 0.0) -> Confirmed:
    """A B A B ...: `rounds` pairs, baseline first in each; `measure(leg name, config)`.
    `ladder_baseline`: the ladder's baseline samples/s, to tell whether the baseline moved.
    `race`: stop after a round once the verdict is known, the speed-up's CI clear of 1 either way
    at that look's level (race.look_alpha: the looks' errors sum to RACE_ALPHA, 5%, as a rung's
    race spends them), so a clear win or loss costs one round, not `rounds`. `margin`: the gain the
    pick must show (confirm_outcome), which the verdict is clear of in place of 1."""
    base, tuned = [], []
    legs: list[tuple[str, RungMeasurement]] = []
    for k in range(1, rounds + 1):
        for name, cfg, out in (("baseline", base_cfg, base), ("tuned", tuned_cfg, tuned)):
            m = measure(name, cfg)
            out.append(m)
            legs.append((name, m))
        if race and k < rounds:
            look = speedup(base, tuned, alpha=look_alpha(k))
            if look.ci_low > 1.0 + margin or look.ci_high < 1.0 + margin:
                break
    rounds = len(base)
    s = speedup(base, tuned)

    def pool(ms: list[RungMeasurement], cfg: ProbeConfig) -> RungMeasurement:
        acc = ms[0]
        for m in ms[1:]:
            acc = pooled(acc, m, samples_per_step(cfg), target_ci)
        return replace(acc, remeasured=0)

    shift = (statistics.median(m.samples_per_sec for m in base) / ladder_baseline
             if ladder_baseline else None)
    outcome = confirm_outcome(s, margin)
    record = Confirmation(
        rounds=rounds, baseline_samples_per_sec=[m.samples_per_sec for m in base],
        tuned_samples_per_sec=[m.samples_per_sec for m in tuned], speedup=s.ratio,
        speedup_ci=(s.ci_low, s.ci_high), held=outcome == "held", outcome=outcome,
        contended=any(m.contention is not None and m.contention.contended for _, m in legs) or baseline_moved(shift),
        baseline_shift=shift,
    )
    return Confirmed(record, pool(base, base_cfg), pool(tuned, tuned_cfg), legs)


# ---------------------------------------------------------------------------------------------
# What makes a finished result unreliable


def reasons(m: RungMeasurement, target_ci: float, confirmation: Confirmation | None = None) -> list[str]:
    out = []
    if m.ci_target_met is False:
        rel = (m.ci_high - m.ci_low) / 2 / m.samples_per_sec if m.ci_high < CI_UNBOUNDED else math.inf
        width = f"±{rel:.1%}" if math.isfinite(rel) and rel < 1 else "over ±100%"
        again = f" after {m.remeasured} re-measurement(s)" if m.remeasured else ""
        out.append(f"95% CI {width} is wider than the ±{target_ci:.0%} target{again}")
    if m.contention is not None and m.contention.contended:
        out.extend(f"contended: {r}" for r in m.contention.reasons)
    if confirmation is not None and baseline_moved(confirmation.baseline_shift):
        out.append(moved_line(confirmation))
    elif confirmation is not None and confirmation.contended:
        out.append("contended during the A-B confirmation")
    return out


def moved_line(c: Confirmation) -> str:
    base = statistics.median(c.baseline_samples_per_sec)
    return (f"contended: the baseline moved {c.baseline_shift:.2f}x between the ladder ({base / c.baseline_shift:,.1f} "
            f"samples/s) and the confirmation ({base:,.1f}): the ladder's ratios are not speed-ups; probe again on a "
            "quiet machine")


def speedup_over_baseline(r) -> float | None:
    """The speed-up a ProbeResult states over its baseline, one figure wherever it is printed or
    stored: the A-B confirmation's when there was one (confirmed or not: Confirmation.outcome says;
    1 when the baseline was kept), None when the baseline moved between the ladder and the
    confirmation (no speed-up can be stated) or there is no baseline; else the stored figure over
    the ladder's baseline rung."""
    c = r.confirmation
    if c is not None:
        return None if baseline_moved(c.baseline_shift) else c.speedup if c.pick_kept else 1.0
    base = r.ladder[0].samples_per_sec if r.ladder else None
    return r.samples_per_sec / base if base else None
